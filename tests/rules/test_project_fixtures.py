"""Every fixture project produces exactly its marked diagnostics, in whichever of its files they
are; good ones produce none. The project is linted as a user would lint it: `check` on its
directory, so that the analysis follows the project's own imports (issue 15)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fixture_marks import declared_torch_version, fixture_projects, project_marks


def check_project(project) -> list[tuple[str, int, str]]:
    """(file relative to the project, line, code) of every diagnostic `check` reports on it, for
    the torch the project's header declares (else the installed one)."""
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--no-cache", "--output-format", "json", "."]
    version = declared_torch_version(project)
    if version is not None:
        command += ["--torch-version", str(version)]
    run = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stderr
    return sorted((d["path"], d["line"], d["code"]) for d in json.loads(run.stdout))


@pytest.mark.parametrize("project", fixture_projects(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_project_reports_exactly_its_marks(project):
    assert check_project(project) == project_marks(project)
