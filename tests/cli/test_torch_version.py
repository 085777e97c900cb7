"""The torch the code is linted for (`torch-version`, `--torch-version`, else the installed torch's
package metadata, else the newest supported): parsing and errors, the default, and rules that run
only on the versions their failure happens on, in `check`, the language server and the rule docs."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from fixture_marks import ROOT
from fsdp2_lint.rules import _index
from samples import BAD, write

from fsdp2_lint.cli import main
from fsdp2_lint.config import find_config
from fsdp2_lint.lsp.worker import lint_document
from fsdp2_lint.rule import all_rules
from fsdp2_lint.torch_version import (
    NEWEST_SUPPORTED,
    TorchVersion,
    TorchVersions,
    default_torch_version,
    installed_torch_version,
)

OPTIMIZER_BEFORE_SHARD = next(rule for rule in all_rules() if rule.code == "FSDP001")  # what BAD reports
BEFORE_2_8 = TorchVersions(before="2.8", why="Fixed in 2.8.")


def installed(monkeypatch, version: str | None) -> None:
    """Make the package metadata say this torch is installed (None: none is)."""

    def version_of(name: str) -> str:
        if name != "torch" or version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", version_of)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    find_config.cache_clear()  # configurations are cached by directory
    write(tmp_path / "bad.py", BAD)
    yield tmp_path
    find_config.cache_clear()


@pytest.fixture
def fixed_in_2_8(monkeypatch):
    """FSDP001 as if its failure happened before torch 2.8 only (its class, and its head: what a run
    selects rules by)."""
    monkeypatch.setattr(OPTIMIZER_BEFORE_SHARD, "torch_versions", BEFORE_2_8)
    heads = tuple(head._replace(torch_versions=BEFORE_2_8) if head.code == "FSDP001" else head for head in _index.HEADS)
    monkeypatch.setattr(_index, "HEADS", heads)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("text, version", [("2.13", (2, 13)), ("2.7", (2, 7)), (" 2.8.1 ", (2, 8)), ("3.0", (3, 0))])
def test_a_version_is_major_dot_minor(text, version):
    assert TorchVersion.parse(text) == TorchVersion(*version)
    assert str(TorchVersion.parse(text)) == "{}.{}".format(*version)


@pytest.mark.parametrize("text", ["", "2", "2.x", "v2.13", "2.13+cpu", "2.13.0.dev1", "latest"])
def test_anything_else_is_refused_with_what_is_expected(text):
    with pytest.raises(ValueError, match=r'expected MAJOR.MINOR, such as "2.13"'):
        TorchVersion.parse(text)


def test_versions_compare_as_numbers_and_ranges_include_since_and_exclude_before():
    assert TorchVersion(2, 9) < TorchVersion(2, 10) < TorchVersion(2, 13)
    window = TorchVersions(since="2.8", before="2.13")
    assert [str(v) for v in map(TorchVersion.parse, ["2.7", "2.8", "2.12", "2.13"]) if v in window] == ["2.8", "2.12"]
    assert str(window) == "torch >= 2.8, < 2.13"
    assert str(TorchVersions(since="2.13")) == "torch >= 2.13" and TorchVersion(3, 0) in TorchVersions(since="2.13")
    assert TorchVersions().unbounded and TorchVersion(1, 0) in TorchVersions()
    assert BEFORE_2_8.excludes(TorchVersion(2, 13)) == "its failure happens on torch < 2.8 only; torch 2.13 ran"
    assert BEFORE_2_8.excludes(TorchVersion(2, 7)) == "" and BEFORE_2_8.excludes(None) == ""
    with pytest.raises(ValueError, match="empty torch version range"):
        TorchVersions(since="2.13", before="2.8")


@pytest.mark.parametrize(
    "metadata, version",
    [("2.13.0+cpu", (2, 13)), ("2.7.1+cu126", (2, 7)), ("2.14.0.dev20260101", (2, 14)), ("weird", None), (None, None)],
)
def test_the_installed_torch_comes_from_package_metadata(monkeypatch, metadata, version):
    installed(monkeypatch, metadata)
    assert installed_torch_version() == (TorchVersion(*version) if version else None)
    assert default_torch_version() == (TorchVersion(*version) if version else NEWEST_SUPPORTED)


def test_finding_the_installed_torch_does_not_import_it():
    code = "import sys; from fsdp2_lint.torch_version import installed_torch_version as v; v(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_a_rule_outside_its_range_is_silent_and_inside_it_reports(project, monkeypatch, fixed_in_2_8):
    installed(monkeypatch, "2.13.0+cpu")
    assert run("check", "bad.py")[0] == 0  # the installed torch: 2.13
    assert run("check", "--torch-version", "2.7", "bad.py")[0] == 1  # cached above with other rules: not reused
    assert run("check", "--torch-version", "2.8", "bad.py")[0] == 0
    installed(monkeypatch, "2.7.0")
    assert run("check", "bad.py")[0] == 1
    installed(monkeypatch, None)  # the pre-commit hook's environment: the newest supported
    assert run("check", "bad.py")[0] == 0


def test_standard_input_and_fix_go_the_same_way(project, fixed_in_2_8):
    result = CliRunner().invoke(main, ["check", "--stdin-filename", "x.py", "--torch-version", "2.7"], input=BAD)
    assert result.exit_code == 1 and "FSDP001" in result.output
    result = CliRunner().invoke(main, ["check", "--stdin-filename", "x.py", "--torch-version", "2.13"], input=BAD)
    assert result.exit_code == 0
    assert run("check", "--fix", "--torch-version", "2.13", "bad.py")[0] == 0
    assert run("check", "--fix", "--torch-version", "2.7", "bad.py")[0] == 1  # FSDP001 has no safe fix


def test_the_configured_version_applies_and_the_command_line_overrides_it(project, monkeypatch, fixed_in_2_8):
    installed(monkeypatch, "2.13.0")
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\ntorch-version = "2.7"\n')
    assert run("check", "bad.py")[0] == 1
    assert run("check", "--torch-version", "2.13", "bad.py")[0] == 0
    assert run("check", "--isolated", "bad.py")[0] == 0  # no configuration: the installed torch


def test_the_language_server_reads_the_configured_version(project, fixed_in_2_8):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\ntorch-version = "2.7"\n')
    assert [d.code for d in lint_document(project / "bad.py", BAD.encode()).diagnostics] == ["FSDP001"]
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\ntorch-version = "2.13"\n')
    assert lint_document(project / "bad.py", BAD.encode()).diagnostics == ()


@pytest.mark.parametrize(
    "value, message",
    [
        ("2.13", '`torch-version` must be a string such as "2.13"'),  # a TOML number: 2.10 would read as 2.1
        ('"2.x"', "`torch-version`: invalid torch version '2.x': expected MAJOR.MINOR"),
        ('["2.13"]', '`torch-version` must be a string such as "2.13"'),
    ],
)
def test_a_bad_configured_version_exits_2_and_names_the_problem(project, value, message):
    write(project / "pyproject.toml", f"[tool.fsdp2-lint]\ntorch-version = {value}\n")
    code, output = run("check", "bad.py")
    assert code == 2 and message in output and "Traceback" not in output
    assert lint_document(project / "bad.py", BAD.encode()).config_error is not None  # the editor shows it too


def test_a_bad_command_line_version_exits_2_and_names_the_option(project):
    code, output = run("check", "--torch-version", "2.13.x", "bad.py")
    assert code == 2 and "Traceback" not in output
    assert "Invalid value for '--torch-version': invalid torch version '2.13.x'" in output


def test_rule_docs_and_json_show_the_range(fixed_in_2_8):
    text = run("rule", "FSDP001")[1]
    assert "Torch versions" in text
    assert "The failure happens on torch < 2.8 only. Fixed in 2.8." in " ".join(text.split())
    listed = {rule["code"]: rule for rule in json.loads(run("rules", "--output-format", "json")[1])}
    assert listed["FSDP001"]["torch_versions"] == {"since": None, "before": "2.8"}
    assert listed["FSDP003"]["torch_versions"] == {"since": None, "before": None}
    assert "the rule runs for every torch version" in " ".join(run("rule", "FSDP003")[1].split())


def test_readme_documents_the_setting():
    configuration = (ROOT / "README.md").read_text().split("\n### Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert 'torch-version = "2.13"' in configuration and "--torch-version" in configuration
    assert "2.13.0" in configuration  # the torch the suite runs on
