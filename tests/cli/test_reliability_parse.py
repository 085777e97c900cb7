"""No file takes a `check` run down (issue 13, items 1, 5 and 7): code nested deeper than libcst's
parser handles, a parser that crashes or runs out of memory, a file too large to analyse. Each
costs that file one FSDP000 that says what happened (and whether the limit is Python's or
fsdp2-lint's), the other files are still linted, and the exit status is 1, never a traceback."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import hostile_inputs
import pytest
from click.testing import CliRunner
from samples import BAD

from fsdp2_lint import engine
from fsdp2_lint.analysis import facts
from fsdp2_lint.cli import main
from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

FSDP001 = (
    "optimizer built from parameters of `model` captured before `fully_shard` (line 7): its step() updates "
    "the old, non-DTensor tensors and training silently does nothing"
)
LIMIT = "fsdp2-lint cannot analyse this file: it nests up to {:,} levels deep (its parser handles 1,000)"
# FSDP000 quotes the running Python's own refusal, which changed between versions (measured on
# 3.10.13, 3.11.7, 3.12.1 and 3.13.0): 3.12's parser names its overflow (before, its MemoryError
# was empty and fsdp2-lint supplies the reason); from 3.13 the compiler no longer runs out of
# recursion on 8,000 `+`, `.` or `()` terms, so only fsdp2-lint's own limit is left to report.
if sys.version_info >= (3, 12):
    TOO_COMPLEX = "Python cannot compile this file: Parser stack overflowed - Python source too complex to parse"
else:
    TOO_COMPLEX = "Python cannot compile this file: the expression is too complex for its parser"


def too_deep(depth: int) -> str:
    if sys.version_info >= (3, 13):
        return LIMIT.format(depth)
    return "Python cannot compile this file: maximum recursion depth exceeded during compilation"


# every hostile form at 8,000 terms (brackets: 300), and what FSDP000 says about it
DEEP = {
    "and": LIMIT.format(8005),
    "or": LIMIT.format(8005),
    "strings": LIMIT.format(8005),
    "fstring": LIMIT.format(8010),
    "minus": TOO_COMPLEX,
    "not": TOO_COMPLEX,
    "power": TOO_COMPLEX,
    "lambda": TOO_COMPLEX,
    "conditional": TOO_COMPLEX,
    "plus": too_deep(8005),
    "attribute": too_deep(8005),
    "call": too_deep(8008),
    "brackets": "syntax error: too many nested parentheses",
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    return tmp_path


def lint(*args: str, stack: int | None = None) -> subprocess.CompletedProcess:
    """`python -m fsdp2_lint check` as a user runs it (``stack``: its stack limit in bytes)."""

    def limit_stack() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))

    command = [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "--output-format", "json", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, preexec_fn=limit_stack if stack else None
    )


def found(result: subprocess.CompletedProcess) -> dict[str, list[tuple[str, str]]]:
    assert result.returncode == 1 and result.stderr == "", result.stderr
    by_path: dict[str, list[tuple[str, str]]] = {}
    for diagnostic in json.loads(result.stdout):
        by_path.setdefault(diagnostic["path"], []).append((diagnostic["code"], diagnostic["message"]))
    return by_path


def write_hostile(directory: Path, name: str, size: int | None = None) -> str:
    size = size if size is not None else (300 if name == "brackets" else 8000)
    (directory / f"{name}.py").write_bytes(hostile_inputs.source(name, size))
    return f"{name}.py"


@pytest.mark.parametrize("form", sorted(DEEP))
def test_deep_code_over_short_lines_costs_that_file_one_fsdp000(project, form):
    """8,000 `and` terms over short lines killed the run with SIGSEGV; other forms took minutes."""
    result = lint(write_hostile(project, form), "bad.py")
    assert found(result) == {f"{form}.py": [("FSDP000", DEEP[form])], "bad.py": [("FSDP001", FSDP001)]}


def test_parallel_run_over_deep_files_reports_what_the_serial_run_does(project):
    """With --jobs 2 the crash ended in a BrokenProcessPool traceback, exit status 1."""
    names = [write_hostile(project, form) for form in sorted(DEEP)]
    for index in range(6):
        (project / f"bad{index}.py").write_text(BAD)
    serial = lint("--jobs", "1", ".")
    assert found(serial)["and.py"] == [("FSDP000", DEEP["and"])] and len(found(serial)) == len(names) + 7
    assert lint("--jobs", "2", ".").stdout == serial.stdout


CRASHED = [("FSDP000", "fsdp2-lint crashed on this file (killed by SIGSEGV)")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_parser_crash_below_the_guard_costs_that_file_only(project, jobs):
    """On a 1 MB stack libcst's parser overflows at 900 `and` terms, which the guard lets through:
    the worker dies of SIGSEGV, the file gets FSDP000, and the other files are linted."""
    write_hostile(project, "and", 900)
    for index in range(16):  # enough files for --jobs 2 to start workers
        (project / f"bad{index}.py").write_text(BAD)
    result = found(lint("--jobs", jobs, ".", stack=1 << 20))
    assert result.pop("and.py") == CRASHED
    assert result == {f"bad{index}.py": [("FSDP001", FSDP001)] for index in [*range(16), ""]}


def test_a_parser_crash_under_fix_costs_that_file_only(project):
    write_hostile(project, "and", 900)
    fixable = BAD + "model.forward(x)\n"  # FSDP003 has a safe fix
    (project / "fixable.py").write_text(fixable)
    result = found(lint("--fix", "and.py", "fixable.py", stack=1 << 20))
    assert result == {"and.py": CRASHED, "fixable.py": [("FSDP001", FSDP001)]}
    assert (project / "fixable.py").read_text() == fixable.replace("model.forward(x)", "model(x)")
    assert (project / "and.py").read_bytes() == hostile_inputs.source("and", 900)


def test_deep_code_under_fix_is_left_as_it_is(project):
    name = write_hostile(project, "and")
    assert found(lint("--fix", name, "bad.py")) == {name: [("FSDP000", DEEP["and"])], "bad.py": [("FSDP001", FSDP001)]}
    assert (project / name).read_bytes() == hostile_inputs.source("and", 8000)


def test_a_file_over_max_file_size_is_fsdp000_and_not_parsed(project):
    """A 50 MB file died in the parser (`memory allocation failed`) and took the run with it."""
    big = hostile_inputs.source("big", 1100)
    (project / "big.py").write_bytes(big)
    too_large = f"file is {len(big):,} bytes, more than max-file-size (1,048,576): fsdp2-lint did not analyse it"
    assert found(lint("big.py", "bad.py")) == {"big.py": [("FSDP000", too_large)], "bad.py": [("FSDP001", FSDP001)]}


def check(*args: str) -> tuple[int, list[tuple[str, str, str]]]:
    result = CliRunner().invoke(main, ["check", "--output-format", "json", *args])
    return result.exit_code, [(d["path"], d["code"], d["message"]) for d in json.loads(result.stdout or "[]")]


def test_max_file_size_setting_option_and_cache(project):
    subprocess.run(["git", "init", "-q"], check=True)  # a cache outside git's view is used
    size = len(BAD.encode())
    (project / "pyproject.toml").write_text(f"[tool.fsdp2-lint]\nmax-file-size = {size - 1}\n")
    too_large = f"file is {size:,} bytes, more than max-file-size ({size - 1:,}): fsdp2-lint did not analyse it"
    assert check("bad.py") == (1, [("bad.py", "FSDP000", too_large)])
    assert check("--max-file-size", str(size), "bad.py") == (1, [("bad.py", "FSDP001", FSDP001)])
    assert check("--max-file-size", "0", "bad.py") == (1, [("bad.py", "FSDP001", FSDP001)])  # 0: no limit
    assert check("bad.py") == (1, [("bad.py", "FSDP000", too_large)])  # the cached result is not for this limit
    (project / "pyproject.toml").write_text('[tool.fsdp2-lint]\nmax-file-size = "1MB"\n')
    result = CliRunner().invoke(main, ["check", "bad.py"])
    assert result.exit_code == 2 and "`max-file-size` must be a number of bytes (0: no limit)" in result.output


def test_valid_code_the_parser_rejects_is_not_called_a_syntax_error(monkeypatch):
    """libcst's parser rejects 8,000 adjacent string literals, which Python compiles: that was
    FSDP000 "syntax error"."""
    monkeypatch.setattr(engine, "MAX_NESTING", 10**6, raising=False)  # past the guard, to the parser
    [diagnostic] = lint_source(hostile_inputs.source("strings", 8000), "strings.py")
    assert diagnostic.message.startswith("fsdp2-lint's parser cannot parse this file, which Python compiles: ")
    assert (
        diagnostic.hint
        == "Python accepts this file: the limit is fsdp2-lint's, and it checked nothing else in this file"
    )


def test_python_parser_overflow_gets_a_reason():
    """A MemoryError from Python's own parser was FSDP000 "Python cannot compile this file: "."""
    source = f"{hostile_inputs.HEADER}x = {'-' * 8000}1\n".encode()
    assert [d.message for d in lint_source(source, "minus.py")] == [TOO_COMPLEX]


def test_running_out_of_memory_in_analysis_says_so(project, monkeypatch):
    """An analysis MemoryError was reported as "internal error while analysing the file"."""

    def exhausted(*args):
        raise MemoryError

    monkeypatch.setattr(facts, "interpret", exhausted)  # the engine imports it when it analyses
    assert check("--no-cache", "bad.py") == (1, [("bad.py", "FSDP000", "fsdp2-lint ran out of memory on this file")])


NEWER_SYNTAX = {  # syntax a newer Python accepts, each before the misuse so lines must stay exact
    "PEP 695 type alias": "type Batch = list[int]",
    "PEP 695 generic function": "def first[T](items: list[T]) -> T:\n    return items[0]",
    "PEP 701 nested f-string": 'tag = f"{"run"}-{f"{1}"}"',
    "PEP 696 type parameter default": "class Box[T = int]:\n    pass",
}


@pytest.mark.parametrize("code", NEWER_SYNTAX.values(), ids=NEWER_SYNTAX.keys())
def test_syntax_newer_than_the_running_python_lints_at_the_right_lines(code):
    lines = ["import torch", "from torch.distributed.fsdp import fully_shard", *code.splitlines()]
    lines += ["model = Net()", "optimizer = torch.optim.AdamW(model.parameters())", "fully_shard(model)"]
    lines += ["optimizer.step()"]
    source = "\n".join(lines) + "\n"
    found = [(d.code, d.line) for d in lint_source(source.encode(), "new.py") if d.code == "FSDP001"]
    assert found == [("FSDP001", lines.index("optimizer = torch.optim.AdamW(model.parameters())") + 1)]


def test_a_noqa_comment_never_hides_that_a_file_was_not_checked(monkeypatch):
    """FSDP000 says a file (or a rule on it) went unchecked: a `# noqa` on its line must not hide that."""
    broken = b"from torch.distributed.fsdp import fully_shard  # noqa\ndef f(:  # noqa\n"
    assert [(d.code, d.line) for d in lint_source(broken, "broken.py")] == [("FSDP000", 2)]

    def planted_fault(self, facts):
        raise RuntimeError("planted rule fault")

    [optimizer_rule] = [rule for rule in all_rules() if rule.code == "FSDP001"]
    monkeypatch.setattr(optimizer_rule, "check", planted_fault)
    found = lint_source(("import torch  # noqa\n" + BAD.partition("\n")[2]).encode(), "bad.py", [optimizer_rule])
    assert [(d.code, d.line, d.message) for d in found] == [
        ("FSDP000", 1, "internal error in rule FSDP001: RuntimeError: planted rule fault")
    ]
