"""The prefilter skips files before parsing; it must never change what the rules report."""

from __future__ import annotations

import textwrap
from pathlib import Path

import fsdp2_lint.rules.fsdp007_collective_on_some_ranks as fsdp007
import project_cases
import pytest
from fixture_marks import fixture_files, fixture_projects, project_files
from style_cases import CASES

from fsdp2_lint import engine, prefilter
from fsdp2_lint.config import Selection
from fsdp2_lint.diagnostics import PARSE_ERROR
from fsdp2_lint.engine import lint_source
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files
from fsdp2_lint.prefilter import TokenFacts, Word, applicable_rules, code_and_bare
from fsdp2_lint.rule import all_rules

torch = pytest.importorskip("torch")  # its own sources are the large real corpus every CI machine has
TORCH_DISTRIBUTED = Path(torch.__file__).parent / "distributed"

# Guards and collectives written in ways the token lists must still admit.
NEAR_MISSES = {
    "slurm-guard": """
        import os
        import torch.distributed as dist

        if int(os.environ["SLURM_PROCID"]) == 0:
            dist.barrier()
    """,
    "env-rank-guard": """
        import os
        from torch.distributed import all_reduce

        def sync(t):
            if os.environ.get("LOCAL_RANK") == "0":
                all_reduce(t)
    """,
    "global-zero-flag": """
        import torch.distributed.checkpoint as dcp

        def save(trainer, state):
            if trainer.is_global_zero:
                dcp.save(state, checkpoint_id="ckpt")
    """,
    "rank-zero-decorator": """
        import torch.distributed as dist
        from lightning.pytorch.utilities import rank_zero_only

        @rank_zero_only
        def sync():
            dist.barrier()
    """,
    "rank-lookalike-words": """
        import torch.distributed as dist

        def pad(ranking, remainder, domain):
            if ranking[0] == 0 and remainder:  # maintain the order
                dist.barrier()
    """,
    "comment-only-tokens": """
        # fully_shard(model); dist.barrier() under `if rank == 0` hangs: distributed checkpoint
        def f(model):  # model.no_sync(), clip_grad_norm_
            return "#" + '#'  # to_local
    """,
    "collective-named-in-a-string": """
        import torch.distributed as dist

        SYNC = "barrier"  # getattr turns the string into the collective

        def sync():
            if dist.get_rank() == 0:
                getattr(dist, SYNC)()
    """,
    "module-named-in-a-string": """
        import importlib

        dist = importlib.import_module("torch.distributed")

        def sync(rank):
            if rank == 0:
                dist.barrier()
    """,
    "tokens-only-in-docstrings-and-strings": """
        \"\"\"Helpers around fully_shard: `dist.barrier()` and `dist.all_reduce` on rank 0 hang.\"\"\"
        import torch.distributed as dist

        def report(rank, loss):
            \"\"\"Logs the loss once the all_reduce is done (torch.distributed.checkpoint.save).\"\"\"
            if rank == 0:
                print(f"loss {loss}", "after all_reduce and barrier, unshard", dist.get_world_size())
    """,
    "hash-in-strings": """
        import torch.distributed as dist
        label = "# not a comment"; banner = '''
        # still inside the string
        '''
        if dist.get_rank() == 0:  # the guard
            dist.barrier()
    """,
}


def _sources() -> list[tuple[str, bytes]]:
    sources = [(str(path), path.read_bytes()) for path in fixture_files()]
    for rule in all_rules():
        sources += [(f"{rule.code}-example.py", example.encode()) for example in rule.valid + rule.invalid]
    sources += [(f"{name}.py", textwrap.dedent(source).encode()) for name, source in CASES.items()]
    sources += [(f"{name}.py", textwrap.dedent(source).encode()) for name, source in NEAR_MISSES.items()]
    sources += [(str(path), path.read_bytes()) for path in sorted(TORCH_DISTRIBUTED.rglob("*.py"))]
    return sources


def _rule_findings(source: bytes, path: str) -> list[tuple]:
    """What the rules report (FSDP000 is left out: a skipped file's syntax errors are, by design,
    left to the user's other tools)."""
    return [(d.path, d.line, d.column, d.code, d.message) for d in lint_source(source, path) if d.code != PARSE_ERROR]


def test_prefilter_is_exact_on_fixtures_examples_and_torch_sources(monkeypatch):
    sources = _sources()
    assert len(sources) > 400
    filtered = [_rule_findings(source, path) for path, source in sources]
    raw_skipped = sum(not any(rule.applies_to(source) for rule in all_rules()) for _, source in sources)
    skipped = sum(not applicable_rules(all_rules(), source) for _, source in sources)
    monkeypatch.setattr(engine, "applicable_rules", lambda rules, data: list(rules))
    unfiltered = [_rule_findings(source, path) for path, source in sources]
    assert filtered == unfiltered
    # the comparison means something: violations are found, and both stages skip files
    assert sum(map(len, filtered)) > 50
    assert raw_skipped > 100 and skipped > raw_skipped


def _project_findings(files: list[Path]) -> list[list[tuple]]:
    """What the rules report linting each file on its own, following its imports."""
    resolver = SettingsResolver(Selection(), isolated=True)
    found = []
    for path in files:
        (diagnostics,) = lint_files([LintTask.of(path, resolver.for_path(path), str(path))], jobs=1)
        found.append([(d.path, d.line, d.column, d.code, d.message) for d in diagnostics if d.code != PARSE_ERROR])
    return found


def test_prefilter_is_exact_on_projects(tmp_path, monkeypatch):
    """A file is skipped when neither its code nor that of the project modules it imports can satisfy
    a rule: the fixture projects, and generated ones where only an imported module names FSDP's API,
    report the same with the prefilter on and off."""
    generated = [
        project_cases.write_project(tmp_path / str(n), files) for n, files in enumerate(project_cases.CASES.values())
    ]
    files = [path for project in fixture_projects() for path in project_files(project)]
    files += [path for project in generated for path in project]
    entries = [path for path in files if path.name == "train.py" and path.is_relative_to(tmp_path)]
    assert entries and len(entries) == len(project_cases.CASES)
    assert all(not applicable_rules(all_rules(), path.read_bytes()) for path in entries)  # alone: skipped
    filtered = _project_findings(files)

    # off: every file is analysed with every rule; which modules' calls are expanded stays as it is
    def relevant(data: bytes) -> bool:  # engine._may_matter, with the prefilter this test turns off
        return (
            engine.DEVICE_SELECTION_TOKEN in data
            or any(token in data for token in engine.META_DEVICE_TOKENS)
            or bool(applicable_rules(all_rules(), data))
        )

    monkeypatch.setattr(engine, "_may_matter", lambda project: relevant)
    monkeypatch.setattr(engine, "applicable_rules", lambda rules, *texts: list(rules))
    unfiltered = _project_findings(files)
    assert dict(zip(files, filtered, strict=True)) == dict(zip(files, unfiltered, strict=True))
    found_in = {path for path, findings in zip(files, filtered, strict=True) if findings}
    assert len(found_in & set(entries)) == len(entries) - 1  # all but "a submodule nothing imports"
    assert sum(map(len, filtered)) > 20


def test_a_file_and_its_imports_are_judged_as_their_code_joined():
    """Across modules, a token counts when one module's code holds it: the rules the texts joined
    admit, wherever each text's comments can be stripped."""
    texts = [source for _, source in _sources()]
    facts = TokenFacts()
    compared = 0
    for start in range(0, len(texts) - 2, 3):
        first, *imported = texts[start : start + 3]
        if any(code_and_bare(text)[0] is text and b"#" in text for text in texts[start : start + 3]):
            continue  # kept whole: the texts joined would keep the other modules' comments too
        joined = applicable_rules(all_rules(), b"\n".join(texts[start : start + 3]))
        assert applicable_rules(all_rules(), first, imported, facts) == joined
        compared += bool(joined)
    assert compared > 150


def test_tokens_only_an_imported_module_holds_count_with_or_without_a_token_memo():
    caller = b"from helpers import setup\nmodel = setup()\n"
    helper = b"from torch.distributed.fsdp import fully_shard\ndef setup():\n    return fully_shard(Net())\n"
    assert applicable_rules(all_rules(), caller) == []
    alone = applicable_rules(all_rules(), caller, [helper])
    assert alone and alone == applicable_rules(all_rules(), caller, [helper], TokenFacts())


def test_each_module_keeps_only_its_own_comments():
    file = textwrap.dedent(NEAR_MISSES["comment-only-tokens"]).encode()
    kept_whole = b'v = f"{d["k"]}#{x}"  # c\n'  # the scan cannot strip it
    assert code_and_bare(kept_whole)[0] is kept_whole
    assert applicable_rules(all_rules(), b"\n".join([file, kept_whole])), "joined, the file's comments would count"
    assert applicable_rules(all_rules(), file, [kept_whole]) == []


def test_a_module_many_files_import_is_scanned_once(monkeypatch):
    scanned = []
    scan = prefilter._present_in_code
    monkeypatch.setattr(prefilter, "_present_in_code", lambda tokens, data: scanned.append(data) or scan(tokens, data))
    helper = b"def shard(model):\n    fully_shard(model)\n"
    facts = TokenFacts()
    for n in range(3):
        assert applicable_rules(all_rules(), f"import helper{n}\n".encode(), [helper], facts)
    assert len(scanned) == 4 and scanned.count(helper) == 1


def test_no_token_spans_a_line():
    """A token found in code without comments is then in the bytes too (see ``_present_in_code``)."""
    tokens = [token for rule in all_rules() for group in rule.requires for token in group]
    assert not [token for token in tokens if isinstance(token, str) and ("\n" in token or "\r" in token)]


@pytest.mark.parametrize(
    "name",
    [
        "slurm-guard",
        "env-rank-guard",
        "global-zero-flag",
        "hash-in-strings",
        "rank-zero-decorator",
        "collective-named-in-a-string",
        "module-named-in-a-string",
    ],
)
def test_rank_guards_of_every_kind_pass_the_prefilter_and_are_reported(name):
    source = textwrap.dedent(NEAR_MISSES[name]).encode()
    assert [d.code for d in lint_source(source, "x.py")] == ["FSDP007"]


def test_tokens_only_in_comments_do_not_get_a_file_parsed():
    source = textwrap.dedent(NEAR_MISSES["comment-only-tokens"]).encode()
    assert applicable_rules(all_rules(), source) == []
    assert [rule.code for rule in all_rules() if rule.applies_to(source)], "the raw bytes alone would admit it"


def test_collectives_named_only_in_docstrings_and_strings_get_no_file_parsed():
    """A collective's words count in code only (a string names one only through getattr or
    import_module, which this file does not call), and docstrings are no code at all."""
    source = textwrap.dedent(NEAR_MISSES["tokens-only-in-docstrings-and-strings"]).encode()
    assert applicable_rules(all_rules(), source) == []
    assert "FSDP007" in [rule.code for rule in all_rules() if rule.applies_to(source)], "the raw bytes admit it"
    with_getattr = source + b"handler = getattr(dist, 'get_world_size')\n"
    assert [rule.code for rule in applicable_rules(all_rules(), with_getattr)] == ["FSDP007"]


def test_words_that_only_contain_rank_or_main_are_no_rank_guard():
    source = textwrap.dedent(NEAR_MISSES["rank-lookalike-words"]).encode()
    assert b"rank" in source and b"main" in source and b"barrier" in source
    assert applicable_rules(all_rules(), source) == []


def test_a_word_token_needs_a_whole_identifier_the_predicate_accepts():
    word = Word("rank", lambda name: name in ("rank", "local_rank"))
    assert word.occurs_in(b"x = ranking + local_rank")
    assert word.occurs_in(b'getattr(env, "rank")')
    assert not word.occurs_in(b"ranking = franks + rank_table + local_rank_of")


def test_a_word_token_at_the_very_start_or_end_of_a_file_is_judged_as_a_whole_identifier():
    word = Word("rank", lambda name: name == "rank")
    assert word.occurs_in(b"rank = 0\nx")
    assert word.occurs_in(b"x = rank")
    assert not word.occurs_in(b"frank = 0\n")  # the identifier starts at the first byte
    assert not word.occurs_in(b"x = ranks")
    prefixed = Word("rank", lambda name: name == "my_rank")  # an identifier that starts 3 bytes before its core
    assert prefixed.occurs_in(b"x = my_rank") and not prefixed.occurs_in(b"x = amy_rank")


@pytest.mark.parametrize(
    "source, code",
    [
        (b"a = 1  # note\n", b"a = 1  \n"),
        (b"s = '#x'  # c\n", b"s = '#x'  \n"),
        (b's = """\n# inside\n"""  # c\n', b's = """\n# inside\n"""  \n'),
        (b"s = 'it\\'s # x'  # c\n", b"s = 'it\\'s # x'  \n"),
        (b"s = f'{a}#'  # c\n", b"s = f'{a}#'  \n"),
        (b"x = 1\n", b"x = 1\n"),
    ],
)
def test_the_code_keeps_strings_and_drops_comments_and_docstrings(source, code):
    assert code_and_bare(source)[0] == code


@pytest.mark.parametrize(
    "source, code, bare",
    [
        (b'"""rank"""\nx = 1\n', b"\nx = 1\n", b" \nx = 1\n"),  # a module docstring
        (
            b'def f():\n    r"""a\n    b"""  # c\n    return 1\n',
            b"def f():\n      \n    return 1\n",
            b"def f():\n    r   \n    return 1\n",  # the prefix is left, a word of one letter
        ),
        (b'"doc"; x = 1\n', b"; x = 1\n", b" ; x = 1\n"),
        (b'# (\n"doc"\n', b"\n\n", b"\n \n"),  # a bracket in a comment opens nothing
        (b'y = {\n  "k": 1,\n}\n"doc"\n', b'y = {\n  "k": 1,\n}\n\n', b"y = {\n   : 1,\n}\n \n"),
        # strings that are not a statement of their own stay in the code
        (b'x = (\n"a"\n)\n', None, b"x = (\n \n)\n"),
        (b'x = \\\n"a"\n', None, b"x = \\\n \n"),
        (b'"a".join(y)\n', None, b" .join(y)\n"),
        (b'"a" "b"\n', None, b"   \n"),
        (b'__doc__\n"doc"\n', None, b"__doc__\n \n"),  # the module reads its docstrings
        (b'f"{dist.barrier()}"\n', None, None),  # an f-string's fields are code
    ],
)
def test_code_drops_statement_strings_and_bare_code_every_string(source, code, bare):
    """None: the text is ``source`` itself."""
    found_code, found_bare = code_and_bare(source)
    assert found_code == (source if code is None else code)
    assert found_bare == (source if bare is None else bare)
    assert (found_code is source) == (code is None) and (found_bare is source) == (bare is None)


def test_an_fstring_reusing_its_quote_keeps_the_file_whole():
    source = b'v = f"{d["k"]}#{x}"  # c\nfully_shard(m)\n'  # Python 3.12 syntax: the scan cannot be trusted
    assert code_and_bare(source)[0] is source


def test_fsdp007_word_tokens_cover_every_collective_it_knows():
    for names, words in ((fsdp007.DIST_COLLECTIVES, fsdp007.DIST_WORDS), (fsdp007.DCP_COLLECTIVES, fsdp007.DCP_WORDS)):
        for qname in names:
            assert any(word.occurs_in(f"x.{qname.rpartition('.')[2]}(y)".encode()) for word in words), qname
