"""Each rule's VALID/INVALID examples (shown by `fsdp2-lint rule CODE`) are tests too."""

from __future__ import annotations

import pytest
from fixture_marks import expected_diagnostics

from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

EXAMPLES = [
    pytest.param(rule, source, id=f"{rule.code}-{kind}{index}")
    for rule in all_rules()
    for kind, sources in (("valid", rule.valid), ("invalid", rule.invalid))
    for index, source in enumerate(sources)
]


@pytest.mark.parametrize("rule, source", EXAMPLES)
def test_example_reports_exactly_its_marks(rule, source):
    """As in Fixit, a rule's examples are checked against that rule alone."""
    got = sorted((d.line, d.code) for d in lint_source(source.encode(), "example.py", [rule]))
    assert got == expected_diagnostics(source)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_documented(rule):
    assert rule.valid and rule.invalid, "a rule shows at least one good and one bad example"
    assert all(expected_diagnostics(source) for source in rule.invalid)
    assert "## What it does" in rule.docs and "## Why is this bad?" in rule.docs
    assert rule.summary and rule.hint and rule.name
    assert isinstance(rule.severity, Severity)
    assert rule.signature.evidence
    assert rule.applies_to(" ".join(rule.invalid).encode()), "the prefilter admits the rule's own examples"
