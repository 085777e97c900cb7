"""Each rule's VALID/INVALID examples (shown by `fsdp2-lint rule CODE`) are tests too."""

from __future__ import annotations

import pytest
from fixture_marks import expected_diagnostics

from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

# Kept here, not read from the rules' examples: per rule, how many valid examples it shows and how many
# findings each invalid example must produce. Weakening an example (dropping one, or a mark with the
# finding it marks) fails this table instead of weakening its own test.
EXAMPLE_COUNTS: dict[str, tuple[int, tuple[int, ...]]] = {
    "FSDP001": (4, (1, 1, 1, 1)),
    "FSDP002": (3, (1, 1, 1)),
    "FSDP003": (3, (1, 1)),
    "FSDP004": (4, (1, 1)),
    "FSDP005": (3, (1, 1, 1)),
    "FSDP006": (2, (1, 1, 1)),
    "FSDP007": (7, (1, 1, 1, 2, 1, 1, 1)),
    "FSDP008": (2, (1,)),
    "FSDP009": (1, (1,)),
    "FSDP010": (1, (1,)),
    "FSDP011": (2, (1,)),
    "FSDP012": (6, (1, 1, 1, 1, 1, 1, 1)),
    "FSDP013": (4, (1, 1, 1)),
    "FSDP014": (2, (1, 1)),
    "FSDP015": (2, (1, 1)),
    "FSDP016": (3, (1, 1)),
    "FSDP017": (1, (1,)),
    "FSDP018": (5, (1, 1, 1, 1, 1)),
    "FSDP019": (3, (1, 1)),
    "FSDP020": (4, (1, 1, 1, 1)),
    "FSDP021": (2, (1, 1)),
    "FSDP022": (2, (1, 2, 1)),
    "FSDP023": (2, (2, 1)),
    "FSDP024": (2, (3, 2)),
    "FSDP025": (2, (1, 1)),
    "FSDP026": (3, (1, 1)),
    "FSDP027": (1, (1,)),
    "FSDP028": (1, (1,)),
    "FSDP029": (2, (1, 1)),
    "FSDP030": (2, (1, 1)),
    "FSDP031": (2, (1, 1)),
    "FSDP032": (1, (1,)),
    "FSDP033": (3, (1, 1)),
    "FSDP034": (3, (1, 1)),
    "FSDP035": (4, (1, 1)),
    "FSDP036": (2, (1,)),
    "FSDP037": (2, (1,)),
    "FSDP039": (2, (1,)),
    "FSDP040": (2, (1, 1)),
    "FSDP042": (2, (1,)),
    "FSDP043": (2, (1, 1)),
    "FSDP044": (3, (1, 1, 1)),
    "FSDP045": (3, (1, 1)),
}

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


def test_every_rule_has_its_expected_example_counts():
    assert sorted(EXAMPLE_COUNTS) == sorted(rule.code for rule in all_rules())


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_examples_match_the_counts_kept_beside_the_test(rule):
    valid, findings = EXAMPLE_COUNTS[rule.code]
    assert len(rule.valid) == valid
    assert tuple(len(expected_diagnostics(source)) for source in rule.invalid) == findings
    assert tuple(len(lint_source(source.encode(), "example.py", [rule])) for source in rule.invalid) == findings
