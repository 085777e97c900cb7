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
