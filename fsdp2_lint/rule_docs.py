"""A rule's documentation, from what the rule declares: README's rule and fix tables, the page
``fsdp2-lint rule CODE`` prints (also SARIF's rule help) and ``rules --output-format json``."""

from __future__ import annotations

import re

from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.rule import Rule

_SAFETY = {
    (Applicability.SAFE,): "Safe: `--fix` applies it.",
    (Applicability.UNSAFE,): "Unsafe: only `--fix --unsafe-fixes` applies it.",
    (Applicability.SAFE, Applicability.UNSAFE): (
        "Safe or unsafe, fix by fix: `--fix` applies the safe ones, `--unsafe-fixes` the others too."
    ),
}
# The tests' mark of an expected diagnostic in a rule's example, which a user's page does not show.
_EXPECT_MARK = re.compile(r"[ \t]*#\s*expect:\s*FSDP\d{3}(?:\s*,\s*FSDP\d{3})*[ \t]*$", re.MULTILINE)
_NO_FIX = "No fix is offered: the right change is a choice this rule leaves to you."


def rules_table(rules: tuple[type[Rule], ...]) -> str:
    """README's rule table (``rules --output-format markdown``)."""
    rows = ["| code | name | severity | what it catches | what happens at runtime |", "|---|---|---|---|---|"]
    for rule in rules:
        rows.append(_row(rule.code, f"`{rule.name}`", rule.severity.value, rule.summary, rule.failure))
    return "\n".join(rows)


def fix_table(rules: tuple[type[Rule], ...]) -> str:
    """README's fix table: each rule that offers a fix, what the fix does, and its applicabilities."""
    rows = ["| rule | fix | |", "|---|---|---|"]
    for rule in rules:
        if rule.fix_offer is not None:
            rows.append(_row(rule.code, rule.fix_offer.summary, fix_kinds(rule)))
    return "\n".join(rows)


def fix_kinds(rule: type[Rule]) -> str:
    """``safe``, ``unsafe`` or ``safe / unsafe``; empty for a rule that offers no fix."""
    offer = rule.fix_offer
    return " / ".join(applicability.value for applicability in offer.applicabilities) if offer else ""


def fix_safety(rule: type[Rule]) -> str:
    """The "Fix safety" section: which fixes ``--fix`` applies, and why they are safe or not."""
    offer = rule.fix_offer
    if offer is None:
        return _NO_FIX
    return f"{_SAFETY[offer.applicabilities]} {offer.safety[:1].upper()}{offer.safety[1:]}"


def rule_markdown(rule: type[Rule]) -> str:
    """A rule's documentation: its docs, a bad and a good example from its tests, the fix and how
    safe it is, the torch versions its failure happens on, and the runtime evidence."""
    parts = [f"# {rule.code} {rule.name} ({rule.severity.value})", rule.summary, rule.docs.strip()]
    if rule.invalid:
        parts.append("## Example\n```python\n" + example(rule.invalid[0]) + "\n```")
    if rule.valid:
        parts.append("## Use instead\n```python\n" + rule.valid[0].strip() + "\n```")
    parts.append(f"## Fix\n{rule.hint}")
    parts.append(f"## Fix safety\n{fix_safety(rule)}")
    parts.append(f"## Torch versions\n{torch_versions(rule)}")
    evidence = f"`{rule.signature.evidence}`"
    if rule.signature.exception:
        evidence += f": {' or '.join(rule.signature.exception)} matching `{rule.signature.message}`"
    evidence = f"{evidence}. {rule.signature.note}".rstrip(" .")
    if rule.signature.min_ranks > 1:
        evidence += f"; it shows in every form only with {rule.signature.min_ranks} or more ranks (`--nproc`)"
    shows = rule.signature.torch_versions
    if not shows.unbounded:
        evidence += f"; this evidence shows on {shows} only{' (' + shows.why + ')' if shows.why else ''}"
    parts.append(f"## Runtime evidence (`fsdp2-lint confirm`)\n{evidence}.")
    return "\n\n".join(parts) + "\n"


def example(code: str) -> str:
    """A rule's example as its documentation shows it: without the tests' ``# expect: CODE`` marks."""
    return _EXPECT_MARK.sub("", code.strip())


def torch_versions(rule: type[Rule]) -> str:
    """The "Torch versions" section: where the failure happens, and that the rule runs only there."""
    versions = rule.torch_versions
    why = f" {versions.why}" if versions.why else ""
    if versions.unbounded:
        return f"No range is declared: the rule runs for every torch version.{why}"
    return (
        f"The failure happens on {versions} only.{why} For another torch (`torch-version`, `--torch-version`, "
        "else the installed torch) the rule does not run."
    )


def rule_json(rule: type[Rule]) -> dict[str, object]:
    """One rule in ``rules --output-format json``; ``fix`` is null for a rule that offers none."""
    offer = rule.fix_offer
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "hint": rule.hint,
        "runtime_evidence": rule.signature.evidence,
        "torch_versions": rule.torch_versions.to_json(),
        "fix": None
        if offer is None
        else {
            "summary": offer.summary,
            "applicabilities": [applicability.value for applicability in offer.applicabilities],
            "safety": fix_safety(rule),
        },
    }


def _row(*cells: str) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
