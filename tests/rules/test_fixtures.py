"""Every fixture produces exactly its marked diagnostics; good fixtures produce none. Fixture
projects are well formed (an ENTRY, marks as their kind says); what the linter reports on them is
tests/rules/test_project_fixtures.py."""

from __future__ import annotations

import pytest
from fixture_marks import (
    FIXTURES,
    declared_torch_version,
    expected_diagnostics,
    fixture_files,
    fixture_projects,
    project_marks,
)

from fsdp2_lint.engine import lint_file
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.harness.project import read_entry
from fsdp2_lint.torch_version import default_torch_version


def lint_fixture(path):
    """The fixture's diagnostics from the rules that run for the torch it declares (else the
    installed one), as `check --torch-version` would report them."""
    version = declared_torch_version(path) or default_torch_version()
    return lint_file(path, [rule for rule in all_rules() if version in rule.torch_versions])


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_reports_exactly_its_marks(path):
    source = path.read_text()
    expected = expected_diagnostics(source)
    if path.name.startswith("good_"):
        assert expected == [], "good fixtures carry no marks"
    else:
        assert expected, "a bad fixture marks at least one expected diagnostic"
    got = sorted((d.line, d.code) for d in lint_fixture(path))
    assert got == expected


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_rule_has_two_bad_and_two_good_fixtures(rule):
    folder = FIXTURES / rule.code
    assert len(list(folder.glob("bad_*.py"))) >= 2
    assert len(list(folder.glob("good_*.py"))) >= 2


@pytest.mark.parametrize("project", fixture_projects(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_project_has_an_entry_a_root_and_marks_as_its_kind_says(project):
    assert project.name.startswith(("bad_", "good_")), "a fixture project is bad_<name>/ or good_<name>/"
    entry = read_entry(project)  # raises on a missing or malformed ENTRY
    assert entry.script.is_relative_to(project.resolve())
    assert (project / "pyproject.toml").is_file(), "the project's root, as the analysis finds it"
    marks = project_marks(project)
    if project.name.startswith("good_"):
        assert marks == [], "good fixture projects carry no marks"
    else:
        assert marks, "a bad fixture project marks at least one expected diagnostic, in whichever file"
        assert {code for _, _, code in marks} == {project.parent.name}


def test_every_rule_folder_with_a_bad_project_has_a_good_one():
    folders = {project.parent for project in fixture_projects()}
    assert folders, "no fixture projects"
    for folder in folders:
        kinds = {project.name.partition("_")[0] for project in fixture_projects() if project.parent == folder}
        assert kinds == {"bad", "good"}, folder.name


def test_a_fixture_is_linted_for_the_torch_its_header_declares(tmp_path, monkeypatch):
    from samples import BAD

    from fsdp2_lint.torch_version import TorchVersion, TorchVersions

    rule = next(rule for rule in all_rules() if rule.code == "FSDP001")
    monkeypatch.setattr(rule, "torch_versions", TorchVersions(before="2.8"))  # as if fixed in 2.8
    marked = BAD.replace("model.parameters())\n", "model.parameters())  # expect: FSDP001\n")
    declared = tmp_path / "FSDP001" / "bad_old_torch.py"
    declared.parent.mkdir()
    declared.write_text('# fsdp2-lint: torch-version = "2.7"\n' + marked)
    undeclared = declared.with_name("bad_undeclared.py")
    undeclared.write_text(marked)

    assert declared_torch_version(declared) == TorchVersion(2, 7)
    assert declared_torch_version(tmp_path / "FSDP001") == TorchVersion(2, 7)  # a project: any of its files
    assert declared_torch_version(undeclared) is None
    assert [(d.line, d.code) for d in lint_fixture(declared)] == expected_diagnostics(declared.read_text())
    monkeypatch.setitem(globals(), "default_torch_version", lambda: TorchVersion(2, 13))  # what the suite runs on
    assert lint_fixture(undeclared) == []  # on 2.13 the rule does not run: the fixture needs its header
