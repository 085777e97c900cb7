"""Reading the `# expect: CODE` marks of fixtures and rule examples."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(FSDP\d{3}(?:\s*,\s*FSDP\d{3})*)")


def expected_diagnostics(source: str) -> list[tuple[int, str]]:
    """(line, code) for every `# expect: CODE[, CODE]` mark."""
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            found.extend((number, code.strip()) for code in match.group(1).split(","))
    return sorted(found)


def fixture_files() -> list[Path]:
    """The one-file fixtures (``FSDP0NN/bad_*.py``, ``good_*.py``)."""
    return sorted(FIXTURES.glob("FSDP*/*.py"))


def fixture_projects() -> list[Path]:
    """The fixture projects: ``FSDP0NN/bad_<name>/`` and ``good_<name>/`` directories."""
    return sorted(path for path in FIXTURES.glob("FSDP*/*_*") if path.is_dir() and path.name != "__pycache__")


def project_files(project: Path) -> list[Path]:
    """The Python files of a fixture project."""
    return sorted(path for path in project.rglob("*.py") if "__pycache__" not in path.parts)


def project_marks(project: Path) -> list[tuple[str, int, str]]:
    """(file relative to the project, line, code) for every mark in every file of the project."""
    return sorted(
        (path.relative_to(project).as_posix(), line, code)
        for path in project_files(project)
        for line, code in expected_diagnostics(path.read_text())
    )
