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
    return sorted(FIXTURES.glob("FSDP*/*.py"))
