"""Which rules ``confirm --rule CODE`` selects: the one check of the codes it is given (torch-free)."""

from __future__ import annotations

from collections.abc import Sequence

from fsdp2_lint.rule import Rule, all_rules
from fsdp2_lint.runtime.evidence.registry import EVIDENCE_KINDS


class UnknownRule(Exception):
    """A code that names no rule, or a rule whose runtime signature no evidence kind of this harness
    can observe (a usage error: nothing has run)."""


def select_rules(codes: Sequence[str]) -> tuple[type[Rule], ...]:
    """The rules ``codes`` name (every rule when there are none), in code order, once each. A code
    is read as ``fsdp2-lint rule CODE`` reads it: surrounding blanks and case do not matter."""
    rules = all_rules()
    wanted = {code.strip().upper() for code in codes}
    unknown = sorted(wanted - {rule.code for rule in rules})
    if unknown:
        raise UnknownRule(f"unknown rule(s): {', '.join(unknown)}")
    selected = tuple(rule for rule in rules if not wanted or rule.code in wanted)
    unobservable = [f"{rule.code} ({rule.signature.evidence})" for rule in selected
                    if rule.signature.evidence not in EVIDENCE_KINDS]  # fmt: skip
    if unobservable:
        raise UnknownRule(f"no evidence kind in this harness for the runtime signature of {', '.join(unobservable)}")
    return selected
