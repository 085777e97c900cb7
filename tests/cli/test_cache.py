"""The results cache: complete round trips, invalidation, a second run that parses nothing,
corrupt entries, concurrent writers."""

from __future__ import annotations

import dataclasses
import enum
import json
import multiprocessing
import types
import typing
from pathlib import Path

import cache_project
from click.testing import CliRunner
from fixture_marks import FIXTURES

from fsdp2_lint.cache import DEFAULT_CACHE_DIR, Cache, decode, encode, sources_fingerprint
from fsdp2_lint.cli import main
from fsdp2_lint.diagnostics import Diagnostic
from fsdp2_lint.engine import lint_file
from fsdp2_lint.rule import all_rules

BAD_FIXTURES = sorted(FIXTURES.glob("FSDP*/bad_*.py"))
project, parses = cache_project.project, cache_project.parses  # fixtures: three bad files in pkg/; parse count


def _sample(kind: object, seed: int) -> object:
    """A value of type ``kind`` that differs from any default, built from the annotations alone,
    so a field added to Diagnostic (or to what it holds) is covered without naming it here."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return _sample(next(option for option in typing.get_args(kind) if option is not type(None)), seed)
    if origin is tuple:
        items = typing.get_args(kind)
        if items[-1] is Ellipsis:
            return tuple(_sample(items[0], seed + offset) for offset in range(2))
        return tuple(_sample(item, seed + offset) for offset, item in enumerate(items))
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        fields = [field for field in dataclasses.fields(kind) if field.init]
        return kind(**{field.name: _sample(hints[field.name], seed + i + 1) for i, field in enumerate(fields)})
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return list(kind)[seed % len(kind)]
    return {str: f"text {seed} ✓\n", int: 1000 + seed, bool: True, float: seed + 0.5}[kind]


def test_every_field_of_a_diagnostic_round_trips_through_json():
    diagnostic = _sample(Diagnostic, 0)
    assert diagnostic.fix is not None and diagnostic.fix.edits
    assert decode(Diagnostic, json.loads(json.dumps(encode(diagnostic)))) == diagnostic
    without_fix = dataclasses.replace(diagnostic, fix=None)
    assert decode(Diagnostic, json.loads(json.dumps(encode(without_fix)))) == without_fix


def test_real_diagnostics_with_fixes_come_back_equal(tmp_path):
    cache = Cache(tmp_path)
    linted = [(path, lint_file(path)) for path in BAD_FIXTURES]
    assert any(d.fix is not None and d.fix.edits for _, diagnostics in linted for d in diagnostics)
    for path, diagnostics in linted:
        key = cache.key(path.read_bytes(), str(path), all_rules())
        cache.store(key, diagnostics)
        assert cache.load(key) == diagnostics


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--jobs", "1", "--output-format", "json", *args])
    return result.exit_code, result.output


def test_second_run_of_an_unchanged_tree_parses_nothing(project, parses):
    first = check("pkg")
    assert parses[0] == 3  # the unrelated file never passes the prefilter
    assert (project / DEFAULT_CACHE_DIR / ".gitignore").read_text() == "*\n"
    assert check("pkg") == first and parses[0] == 3
    (project / "pkg" / "bad1.py").write_text(cache_project.BAD_FILE + "\n# edited\n")
    assert check("pkg")[0] == 1 and parses[0] == 4  # only the edited file again
    check("--select", "FSDP001,FSDP002", "pkg")
    assert parses[0] == 7  # another rule set is another key
    check("--no-cache", "pkg")
    assert parses[0] == 10


def test_cached_results_keep_each_files_own_path(project, parses):
    code, output = check("pkg")
    assert code == 1 and parses[0] == 3
    assert sorted({d["path"] for d in json.loads(output)}) == [f"pkg/bad{i}.py" for i in range(3)]
    assert json.loads(check("pkg")[1]) == json.loads(output)


def test_cache_location_option_environment_and_no_cache(project, parses, monkeypatch):
    check("--cache-dir", "elsewhere", "pkg")
    assert (project / "elsewhere" / "CACHEDIR.TAG").exists() and not (project / DEFAULT_CACHE_DIR).exists()
    monkeypatch.setenv("FSDP2_LINT_CACHE_DIR", str(project / "from-env"))
    check("pkg")
    assert (project / "from-env" / "CACHEDIR.TAG").exists() and parses[0] == 6
    monkeypatch.delenv("FSDP2_LINT_CACHE_DIR")
    check("--no-cache", "pkg")
    assert not (project / DEFAULT_CACHE_DIR).exists()


def test_default_location_is_the_project_root(project):
    (project / "pyproject.toml").write_text("[tool.fsdp2-lint]\n")
    (project / "pkg" / "sub").mkdir()
    CliRunner().invoke(main, ["check", "--jobs", "1", str(project / "pkg")], catch_exceptions=False)
    assert (project / DEFAULT_CACHE_DIR).is_dir()


def test_a_corrupt_entry_is_ignored_and_rewritten(project, parses):
    expected = check("pkg")
    entries = sorted((project / DEFAULT_CACHE_DIR).rglob("*.json"))
    assert len(entries) == 3
    entries[0].write_text('[{"code": "FSDP001", "line": ')
    entries[1].write_text('[{"unexpected": true}]')
    assert check("pkg") == expected and parses[0] == 5
    assert all(json.loads(entry.read_bytes().partition(b"\n")[2]) for entry in entries)  # signature, then JSON


def test_editing_the_linters_source_changes_the_fingerprint(tmp_path):
    (tmp_path / "rules").mkdir()
    rule = tmp_path / "rules" / "fsdp001.py"
    rule.write_text("TOKENS = ('fully_shard',)\n")
    before = sources_fingerprint("0.1.0", [tmp_path])
    assert sources_fingerprint("0.1.0", [tmp_path]) == before
    rule.write_text("TOKENS = ('fully_shard', 'no_sync')\n")
    assert sources_fingerprint("0.1.0", [tmp_path]) != before
    assert sources_fingerprint("0.2.0", [tmp_path]) != sources_fingerprint("0.1.0", [tmp_path])


def _hammer(directory: str, key: str, rounds: int, result: multiprocessing.Queue) -> None:
    cache = Cache(Path(directory))
    diagnostics = lint_file(FIXTURES / "FSDP005" / "bad_module_level.py")
    seen = set()
    for _ in range(rounds):
        cache.store(key, diagnostics)
        loaded = cache.load(key)
        seen.add("equal" if loaded == diagnostics else "missing" if loaded is None else "different")
    result.put(seen)


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    key = Cache(tmp_path).key(b"x", "x.py", all_rules())
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    workers = [context.Process(target=_hammer, args=(str(tmp_path), key, 100, result)) for _ in range(4)]
    for worker in workers:
        worker.start()
    seen = set().union(*(result.get(timeout=120) for _ in workers))
    for worker in workers:
        worker.join()
    assert seen == {"equal"}
    assert not list(tmp_path.rglob(".tmp-*")), "no temporary file is left behind"
