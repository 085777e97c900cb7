"""What a run imports: `check` of files the prefilter rejects (pre-commit's common case) imports no
parser, no analysis, no rule module, no fixing, no runtime harness and none of rich's markdown or
tables; a file that can violate a rule imports the parser and the rules that can fire on it, and no
other. Each run is a fresh interpreter, its modules read when it exits; bench/startup.py times it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from samples import BAD, BAD_WITH_FIX, write

from fsdp2_lint.output import Fixing, _print_summary, console, write_report

# Records the modules loaded when the command exits (it always ends with sys.exit), and the
# dataclasses fsdp2-lint's modules define.
RUN = (
    "import atexit, json, sys\n"
    "def record():\n"
    "    modules = sorted(sys.modules)\n"
    "    defined = [f'{{name}}.{{kind.__qualname__}}' for name in modules if name.startswith('fsdp2_lint')\n"
    "               for kind in vars(sys.modules[name]).values()\n"
    "               if isinstance(kind, type) and kind.__module__ == name and '__dataclass_fields__' in vars(kind)]\n"
    "    open({out!r}, 'w').write(json.dumps({{'modules': modules, 'dataclasses': sorted(defined)}}))\n"
    "atexit.register(record)\n"
    "from fsdp2_lint.cli import main\n"
    "main()\n"
)
# Not needed before a file passes the prefilter.
HEAVY = (
    "libcst",
    "rich",  # a clean run into a pipe writes its line unstyled, as rich would
    "fsdp2_lint.analysis.facts",
    "fsdp2_lint.analysis.interpreter",
    "fsdp2_lint.analysis.model",
    "fsdp2_lint.fixing.apply",
    "fsdp2_lint.fixing.lines",
    "fsdp2_lint.rule_docs",
    "fsdp2_lint.runtime",
)
# Imported by the work that needs them, which a check of files the prefilter rejects never does:
# worker processes, notebooks, writing a fix, the nesting estimate (before parsing), the cache's
# hashing and signing (a lookup), the rule modules' discovery.
DEFERRED = (
    "fsdp2_lint.isolation",
    "fsdp2_lint.notebooks",
    "fsdp2_lint.fixing",
    "fsdp2_lint.nesting",
    "hashlib",
    "hmac",
    "tempfile",
    "pkgutil",
)
# The dataclasses such a check defines. Creating one compiles its methods, about 4 M instructions
# of every start (bench/startup.py): the records this run makes without comparing or printing them
# (a rule's head, a task), and those only a lint, a fix or a rule module makes, are NamedTuples or
# plain classes. The diagnostic records stay dataclasses (the cache's codec and `replace` read their
# fields), in the module the rule index imports `Severity` from.
CLEAN_RUN_DATACLASSES = [
    "fsdp2_lint.analysis.project.ProjectModule",
    "fsdp2_lint.config.Settings",
    "fsdp2_lint.diagnostics.Diagnostic",
    "fsdp2_lint.diagnostics.Edit",
    "fsdp2_lint.diagnostics.Fix",
    "fsdp2_lint.diagnostics.Related",
    "fsdp2_lint.output.Fixing",
    "fsdp2_lint.prefilter.Word",
    "fsdp2_lint.torch_version.TorchVersions",
]
CLEAN = '''\
"""Data loading: no collective, no rank test, nothing sharded."""
import os

from helpers import batches


def paths(root):
    return sorted(os.path.join(root, name) for name in os.listdir(root))
'''


def run(cwd: Path, *args: str, stdin: str | None = None) -> tuple[int, str, list[str]]:
    """Exit status, standard output and the modules loaded of `fsdp2-lint ARGS`."""
    status, stdout, recorded = _run(cwd, *args, stdin=stdin)
    return status, stdout, recorded["modules"]


def _run(cwd: Path, *args: str, stdin: str | None = None) -> tuple[int, str, dict[str, list[str]]]:
    out = cwd / "modules.json"
    code = RUN.format(out=str(out))
    result = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120
    )
    return result.returncode, result.stdout, json.loads(out.read_text())


def loaded(modules: list[str], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in modules)


def rule_modules(modules: list[str]) -> list[str]:
    return [module for module in modules if module.startswith("fsdp2_lint.rules.fsdp")]


def project(tmp_path: Path) -> Path:
    write(tmp_path / "pyproject.toml", "[tool.fsdp2-lint]\nselect = ['FSDP']\n")
    write(tmp_path / "helpers.py", "def batches(data):\n    yield from data\n")
    write(tmp_path / "data.py", CLEAN)
    write(tmp_path / "bad.py", BAD)
    return tmp_path


def test_a_file_the_prefilter_rejects_imports_nothing_heavy(tmp_path):
    root = project(tmp_path)
    for args in (("check", "data.py"), ("check", "--no-cache", "--no-follow-imports", "data.py")):
        status, stdout, modules = run(root, *args)
        assert (status, stdout) == (0, "All checks passed!\n")
        assert [name for name in HEAVY + DEFERRED if loaded(modules, name)] == [], args
        assert rule_modules(modules) == [], args


def test_a_file_the_prefilter_rejects_defines_no_other_dataclass(tmp_path):
    status, _, recorded = _run(project(tmp_path), "check", "data.py")
    assert status == 0 and recorded["dataclasses"] == CLEAN_RUN_DATACLASSES


def test_standard_input_the_prefilter_rejects_imports_nothing_heavy(tmp_path):
    status, stdout, modules = run(project(tmp_path), "check", "--stdin-filename", "data.py", stdin=CLEAN)
    assert (status, stdout) == (0, "All checks passed!\n")
    assert [name for name in HEAVY + DEFERRED if loaded(modules, name)] == []


def test_a_file_a_rule_can_fire_on_loads_the_parser_and_only_the_rules_that_can_fire(tmp_path):
    status, stdout, modules = run(project(tmp_path), "check", "--no-cache", "bad.py")
    assert status == 1 and "FSDP001" in stdout
    assert loaded(modules, "libcst") and loaded(modules, "fsdp2_lint.analysis.interpreter")
    assert "fsdp2_lint.rules.fsdp001_optimizer_before_shard" in rule_modules(modules)
    # BAD has no collective or rank test, no `no_sync`: FSDP007 and FSDP005 cannot fire, and are not imported
    assert "fsdp2_lint.rules.fsdp007_collective_on_some_ranks" not in modules
    assert "fsdp2_lint.rules.fsdp005_no_sync" not in modules
    assert not loaded(modules, "rich.markdown") and not loaded(modules, "fsdp2_lint.runtime")


def test_the_toml_parser_loads_with_the_first_pyproject_toml(tmp_path):
    # no word FSDP007's prefilter asks the rank classifier about (CLEAN's docstring has "rank")
    write(tmp_path / "data.py", "import os\n\n\ndef paths(root):\n    return sorted(os.listdir(root))\n")
    status, _, modules = run(tmp_path, "check", "data.py")
    assert status == 0 and not loaded(modules, "tomllib") and not loaded(modules, "fsdp2_lint.analysis.kinds")
    write(tmp_path / "pyproject.toml", "[project]\nname = 'data'\n")  # read to find no [tool.fsdp2-lint]
    status, _, modules = run(tmp_path, "check", "data.py")
    assert status == 0 and loaded(modules, "tomllib")


def test_what_a_clean_check_defers_loads_when_a_file_needs_it(tmp_path):
    root = project(tmp_path)
    status, _, modules = run(root, "check", "bad.py")  # analysed here, its result cached
    assert status == 1
    assert [name for name in ("fsdp2_lint.isolation", "fsdp2_lint.nesting", "hashlib", "hmac", "tempfile")
            if not loaded(modules, name)] == []  # fmt: skip
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": BAD, "outputs": [], "execution_count": None}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    write(root / "train.ipynb", json.dumps(notebook))
    status, stdout, modules = run(root, "check", "--no-cache", "train.ipynb")
    assert status == 1 and "cell 1:" in stdout and loaded(modules, "fsdp2_lint.notebooks")
    write(root / "fixable.py", BAD_WITH_FIX)
    status, _, modules = run(root, "check", "--no-cache", "--fix", "fixable.py")
    assert loaded(modules, "fsdp2_lint.fixing.atomic_write") and (root / "fixable.py").read_text() != BAD_WITH_FIX
    status, _, modules = run(root, "rules")
    assert status == 0 and loaded(modules, "pkgutil")


def test_the_commands_that_need_them_import_them(tmp_path):
    status, stdout, modules = run(tmp_path, "rule", "FSDP001")
    assert status == 0 and "optimizer" in stdout.lower()
    assert loaded(modules, "rich.markdown")
    status, stdout, modules = run(tmp_path, "confirm", "--help")
    assert status == 0 and "fixtures" in stdout
    assert loaded(modules, "fsdp2_lint.runtime.harness")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# (environment, a terminal?, styled by rich?)
STREAMS = [
    ({}, False, False),
    ({}, True, True),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": ""}, True, False),
    ({"TTY_COMPATIBLE": "1"}, False, True),
    ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True, False),
    ({"NO_COLOR": "1"}, True, True),  # bold, no colour
]


@pytest.mark.parametrize("environment, terminal, styled", STREAMS)
@pytest.mark.parametrize("fixing", [Fixing(), Fixing(applied=2)])
def test_a_clean_report_is_what_rich_writes(monkeypatch, environment, terminal, styled, fixing):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    stream_type = _Terminal if terminal else io.StringIO
    by_rich = stream_type()
    _print_summary([], console(by_rich), fixing)
    assert ("\x1b[" in by_rich.getvalue()) == styled
    for output_format in ("text", "concise"):
        written = stream_type()
        write_report([], output_format, written, fixing=fixing)
        assert written.getvalue() == by_rich.getvalue()
        quiet = stream_type()
        write_report([], output_format, quiet, summary=False, fixing=fixing)
        assert quiet.getvalue() == ""
