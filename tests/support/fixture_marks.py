"""Reading the `# expect: CODE` marks of fixtures and rule examples, and the torch version a fixture
is linted for (its `# fsdp2-lint: torch-version = "X.Y"` header)."""

from __future__ import annotations

import re
from pathlib import Path

from fsdp2_lint.torch_version import TorchVersion

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(FSDP\d{3}(?:\s*,\s*FSDP\d{3})*)")
TORCH_VERSION_HEADER = re.compile(r'^#\s*fsdp2-lint:\s*torch-version\s*=\s*"([^"]*)"\s*$', re.MULTILINE)
HEADER_LINES = 5  # the header is a comment among a file's first lines


def declared_torch_version(fixture: Path) -> TorchVersion | None:
    """The torch a fixture (a file, or a project: any of its files) is linted for: the version its
    `# fsdp2-lint: torch-version = "X.Y"` header gives, None without one (then `check`'s default,
    the installed torch). A fixture of a rule whose failure happens on some torch versions only
    declares one of them, so that the suite checks it statically whatever torch it runs on."""
    files = project_files(fixture) if fixture.is_dir() else [fixture]
    for path in files:
        head = "\n".join(path.read_text().splitlines()[:HEADER_LINES])
        match = TORCH_VERSION_HEADER.search(head)
        if match:
            return TorchVersion.parse(match.group(1))
    return None


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
