"""Every fixture produces exactly its marked diagnostics; good fixtures produce none."""

from __future__ import annotations

import pytest
from fixture_marks import FIXTURES, expected_diagnostics, fixture_files

from fsdp2_lint.engine import lint_file
from fsdp2_lint.rule import all_rules


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_reports_exactly_its_marks(path):
    source = path.read_text()
    expected = expected_diagnostics(source)
    if path.name.startswith("good_"):
        assert expected == [], "good fixtures carry no marks"
    else:
        assert expected, "a bad fixture marks at least one expected diagnostic"
    got = sorted((d.line, d.code) for d in lint_file(path))
    assert got == expected


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_rule_has_two_bad_and_two_good_fixtures(rule):
    folder = FIXTURES / rule.code
    assert len(list(folder.glob("bad_*.py"))) >= 2
    assert len(list(folder.glob("good_*.py"))) >= 2
