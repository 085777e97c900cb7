"""Each project module is parsed once per run, whether it is linted, imported, or both."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from fsdp2_lint.analysis.project import ParsedModules, Project, Projects

SOURCE = b"import torch\n\n\ndef build():\n    return torch.nn.Linear(2, 2)\n"


class CountingParser:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: bytes) -> cst.Module:
        self.calls += 1
        return cst.parse_module(data)


@pytest.fixture
def module_file(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "helpers.py"
    path.write_bytes(SOURCE)
    return path


def test_a_linted_file_s_parse_serves_the_files_that_import_it(module_file: Path) -> None:
    project, parse = Project(module_file.parent), CountingParser()
    linted = project.parse_linted(module_file, SOURCE, parse)
    imported = project.parse(module_file)
    assert imported is not None and imported.module is linted
    assert imported.name == "helpers" and imported.source == SOURCE
    assert parse.calls == 1


def test_an_imported_module_s_parse_serves_its_lint(module_file: Path) -> None:
    project, parse = Project(module_file.parent), CountingParser()
    imported = project.parse(module_file)
    assert imported is not None
    assert project.parse_linted(module_file, SOURCE, parse) is imported.module
    assert parse.calls == 0


def test_text_other_than_the_project_reads_is_parsed_apart(module_file: Path) -> None:
    project, parse = Project(module_file.parent), CountingParser()
    edited = SOURCE + b"x = 1\n"
    linted = project.parse_linted(module_file, edited, parse)
    imported = project.parse(module_file)
    assert imported is not None and imported.module is not linted and imported.source == SOURCE
    assert parse.calls == 1


def test_a_module_the_project_refuses_to_parse_stays_refused(module_file: Path) -> None:
    project = Project(module_file.parent, parseable=lambda data: False)
    project.parse_linted(module_file, SOURCE, cst.parse_module)
    assert project.parse(module_file) is None


def test_a_syntax_error_propagates_and_nothing_is_kept(module_file: Path) -> None:
    module_file.write_bytes(b"def (:\n")
    project = Project(module_file.parent)
    with pytest.raises(cst.ParserSyntaxError):
        project.parse_linted(module_file, b"def (:\n", cst.parse_module)
    assert project.parse(module_file) is None


def test_trees_past_the_budget_are_dropped_oldest_first_and_parsed_again(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    paths = [tmp_path / f"m{index}.py" for index in range(3)]
    for path in paths:
        path.write_bytes(SOURCE)
    project = Project(tmp_path, kept=ParsedModules(budget=2 * len(SOURCE)))
    first = project.parse(paths[0])
    assert project.parse(paths[0]) is first  # kept: the same tree
    project.parse(paths[1])
    assert project.parse(paths[0]) is first  # used last, so m1 goes before it
    project.parse(paths[2])
    again = project.parse(paths[1])
    assert again is not None and again.source == SOURCE and project.parse(paths[0]) is not first


def test_the_projects_of_a_run_share_one_budget(tmp_path: Path) -> None:
    files = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text("")
        files.append(tmp_path / name / "helpers.py")
        files[-1].write_bytes(SOURCE)
    projects = Projects(kept=ParsedModules(budget=len(SOURCE)))
    first = projects.for_file(files[0]).parse(files[0])
    projects.for_file(files[1]).parse(files[1])
    assert projects.for_file(files[0]).parse(files[0]) is not first


def test_a_later_run_reuses_a_kept_tree_while_the_file_s_text_is_unchanged(module_file: Path) -> None:
    kept = ParsedModules()
    first = Project(module_file.parent, kept=kept).parse(module_file)
    again = Project(module_file.parent, kept=kept).parse(module_file)  # a new run: its own reads
    assert first is not None and again is first
    module_file.write_bytes(SOURCE + b"x = 1\n")
    changed = Project(module_file.parent, kept=kept).parse(module_file)
    assert changed is not None and changed.source == SOURCE + b"x = 1\n" and changed.module is not first.module
