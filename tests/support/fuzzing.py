"""A seeded fuzzer of the linter: mutants of the shipped fixtures (token, line and statement level)
and small programs generated from a grammar of FSDP2 training code, each checked against the
properties every lint must keep whatever the input:

- the lint returns (no exception) and reports no internal error of the linter;
- a file CPython compiles is never blamed for a syntax error;
- every output format renders the diagnostics;
- a fix never breaks a valid file (what it writes still compiles) and fixing is idempotent.

``tests/cli/test_reliability_fuzz.py`` runs a small budget; ``bench/fuzz.py`` runs a long one. A failure
names the seed and program index, and :func:`program` rebuilds that exact program.
"""

from __future__ import annotations

import io
import random
import tokenize
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fixture_marks import fixture_files

from fsdp2_lint.diagnostics import PARSE_ERROR, Diagnostic
from fsdp2_lint.engine import fix_source, lint_source
from fsdp2_lint.output import FORMATS, write_report

_INTERESTING_TOKENS = (
    "fully_shard", "(", ")", "[", "]", ":", ",", "=", ".", "**", "-", "not ", " and ", " or ", "lambda: ",
    "yield ", "await ", "async ", "return ", "if rank == 0:", "\\\n", "\r", "\x0c", '"""', "#", "'", "\t",
    "model", "optimizer", "forward", "no_sync()", "torch.save", "dist.barrier()", "\n", "    ", "\ufeff",
)  # fmt: skip


@dataclass(frozen=True)
class Program:
    seed: int
    index: int
    how: str  # which generator made it
    source: bytes


def programs(seed: int, count: int) -> Iterator[Program]:
    """``count`` programs, the same ones for the same seed."""
    for index in range(count):
        yield program(seed, index)


def program(seed: int, index: int) -> Program:
    rng = random.Random(f"{seed}:{index}")
    how, make = rng.choice(_GENERATORS)
    return Program(seed, index, how, make(rng))


def _fixture(rng: random.Random) -> str:
    return rng.choice(_fixture_sources())


_FIXTURE_SOURCES: list[str] = []


def _fixture_sources() -> list[str]:
    if not _FIXTURE_SOURCES:
        _FIXTURE_SOURCES.extend(path.read_text() for path in fixture_files())
    return _FIXTURE_SOURCES


def _token_mutant(rng: random.Random) -> bytes:
    """Delete, duplicate or replace a few tokens of a fixture (spans of its text, layout kept)."""
    text = _fixture(rng)
    spans = _token_spans(text)
    for _ in range(rng.randint(1, 4)):
        start, end = rng.choice(spans)
        action = rng.randrange(3)
        if action == 0:
            text = text[:start] + text[end:]
        elif action == 1:
            text = text[:end] + text[start:end] + text[end:]
        else:
            text = text[:start] + rng.choice(_INTERESTING_TOKENS) + text[end:]
        spans = _token_spans(text) or [(0, 0)]
    return text.encode("utf-8", "surrogatepass")


def _token_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the tokens Python finds (up to the first tokenizer error)."""
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            (row, col), (end_row, end_col) = token.start, token.end
            if token.string and row - 1 < len(offsets) and end_row - 1 < len(offsets):
                spans.append((offsets[row - 1] + col, offsets[end_row - 1] + end_col))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return spans


def _line_mutant(rng: random.Random) -> bytes:
    """Delete, duplicate, swap or re-indent lines of a fixture, or splice in another fixture's line."""
    lines = _fixture(rng).splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        action = rng.randrange(5)
        if action == 0:
            del lines[i]
        elif action == 1:
            lines.insert(i, lines[j])
        elif action == 2:
            lines[i], lines[j] = lines[j], lines[i]
        elif action == 3:
            lines[i] = rng.choice(("    ", "", "\t", "        ")) + lines[i].lstrip(" ")
        else:
            lines.insert(i, rng.choice(_fixture(rng).splitlines(keepends=True) or ["\n"]))
        lines = lines or ["\n"]
    return "".join(lines).encode()


def _layout_mutant(rng: random.Random) -> bytes:
    """A fixture with its line ends, indentation or encoding changed: bytes a fix must keep."""
    text = _fixture(rng)
    choice = rng.randrange(5)
    if choice == 0:
        text = text.replace("\n", rng.choice(("\r\n", "\r")))
    elif choice == 1:
        text = text.replace("\n\n", "\n\x0c\n")
    elif choice == 2:
        text = "\ufeff" + text
    elif choice == 3:
        text = text.rstrip("\n")
    else:
        text = text.replace("    ", "\t")
    return text.encode()


_GRAMMAR: dict[str, list[str]] = {
    "program": ["{imports}{setup}{body}"],
    "imports": [
        "import torch\nimport torch.distributed as dist\nfrom torch.distributed.fsdp import fully_shard\n",
        "import torch\nimport torch.distributed as dist\nfrom torch.distributed.fsdp import fully_shard as shard\n"
        "fully_shard = shard\n",
        "import torch, torch.nn as nn\nimport torch.distributed as dist\nimport torch.distributed.fsdp as fsdp\n"
        "fully_shard = fsdp.fully_shard\n",
    ],
    "setup": ["dist.init_process_group('gloo')\nrank = dist.get_rank()\nmodel = torch.nn.Sequential({layers})\n"],
    "layers": ["torch.nn.Linear(4, 4)", "torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)"],
    "body": ["{stmt}", "{stmt}{stmt}", "{stmt}{stmt}{stmt}", "{stmt}{stmt}{stmt}{stmt}{stmt}"],
    "stmt": [
        "fully_shard(model)\n",
        "for layer in model:\n    fully_shard(layer)\n",
        "model = fully_shard(model)\n",
        "opt = torch.optim.AdamW(model.parameters())\n",
        "out = model(torch.ones(2, 4))\n",
        "out = model.forward(torch.ones(2, 4))\n",
        "out.sum().backward()\nopt.step()\n",
        "torch.save(model.state_dict(), 'ckpt.pt')\n",
        "if rank == 0:\n    {inner}",
        "if dist.get_rank() != 0:\n    {inner}else:\n    {inner}",
        "with model.no_sync():\n    {inner}",
        "def helper(m):\n    {inner}helper(model)\n",
        "class Trainer:\n    def run(self, m):\n        fully_shard(m)\n        return m\nTrainer().run(model)\n",
        "try:\n    {inner}except RuntimeError:\n    pass\n",
        "while rank:\n    {inner}    break\n",
        "x = [fully_shard(m) for m in model]\n",
        "model.set_requires_gradient_sync(False)\n",
        "dist.barrier()\n",
        "model.to_empty(device='cpu')\n",
        "with torch.device('meta'):\n    model = torch.nn.Linear(4, 4)\n",
    ],
    "inner": [
        "dist.barrier()\n",
        "fully_shard(model)\n",
        "torch.save(model.state_dict(), 'x.pt')\n",
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "dist.all_reduce(torch.ones(1))\n",
        "pass\n",
        "model.forward(torch.ones(1, 4))\n",
    ],
}


def _grammar_program(rng: random.Random) -> bytes:
    return _expand("{program}", rng, depth=0).encode()


def _expand(template: str, rng: random.Random, depth: int) -> str:
    out, rest = [], template
    while "{" in rest:
        before, _, after = rest.partition("{")
        symbol, _, rest = after.partition("}")
        out.append(before)
        choices = _GRAMMAR[symbol] if depth < 6 else _GRAMMAR[symbol][:1]
        expansion = _expand(rng.choice(choices), rng, depth + 1)
        indent = before.rsplit("\n", 1)[-1]
        if indent.strip() == "" and indent:  # an indented slot: indent every line of the expansion
            expansion = expansion.replace("\n", "\n" + indent).removesuffix(indent)
        out.append(expansion)
    out.append(rest)
    return "".join(out)


_GENERATORS: list[tuple[str, Callable[[random.Random], bytes]]] = [
    ("token", _token_mutant),
    ("line", _line_mutant),
    ("layout", _layout_mutant),
    ("grammar", _grammar_program),
]


def check(program: Program) -> list[str]:
    """The properties ``program`` breaks (empty when it keeps them all)."""
    where = f"seed {program.seed} program {program.index} ({program.how})"
    diagnostics = lint_source(program.source, "fuzz.py")
    problems = [f"{where}: {d.message}" for d in diagnostics if "internal error" in d.message]
    valid = _compiles(program.source)
    if valid:
        problems += [f"{where}: blamed valid code: {d.message}" for d in diagnostics if _blames_syntax(d)]
    for output_format in FORMATS:
        try:
            write_report(diagnostics, output_format, io.StringIO())
        except Exception as error:  # any exception is a finding
            problems.append(f"{where}: format {output_format}: {type(error).__name__}: {error}")
    fixed = fix_source(program.source, "fuzz.py", unsafe=True).source
    if fixed != program.source:
        if valid and not _compiles(fixed):  # libcst parses some code Python refuses (`return` at module level)
            problems.append(f"{where}: a fix broke the file")
        elif fix_source(fixed, "fuzz.py", unsafe=True).source != fixed:
            problems.append(f"{where}: fixing is not idempotent")
    return problems


def _blames_syntax(diagnostic: Diagnostic) -> bool:
    return diagnostic.code == PARSE_ERROR and diagnostic.message.startswith("syntax error")


def _compiles(source: bytes) -> bool:
    try:
        with warnings.catch_warnings():  # mutants often draw SyntaxWarnings: noise here
            warnings.simplefilter("ignore")
            compile(source, "fuzz.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def fuzz(seed: int, count: int) -> tuple[int, list[str]]:
    """(programs checked, problems found) for ``count`` programs of ``seed``."""
    problems: list[str] = []
    for item in programs(seed, count):
        problems.extend(check(item))
    return count, problems
