"""Each style case (tests/support/style_cases/) reports exactly its `# expect:` marks under its own rule."""

from __future__ import annotations

import textwrap

import pytest
from fixture_marks import expected_diagnostics
from style_cases import CASES

from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

RULES = {rule.code: rule for rule in all_rules()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name):
    source = textwrap.dedent(CASES[name])
    rule = RULES[name.split("-", 1)[0].upper()]
    got = sorted((d.line, d.code) for d in lint_source(source.encode(), "example.py", [rule]))
    assert got == expected_diagnostics(source)
