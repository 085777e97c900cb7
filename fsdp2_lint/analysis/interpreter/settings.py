"""Settings: attributes the analysis knows nothing of (``cfg.checkpoint.kind``), or that hold what
was stored on the object or its class default (one of ``"full"`` and ``"sharded"``), proved equal
to a constant by a test. In the arm where ``cfg.kind == "full"`` holds, reading ``cfg.kind`` gives
``"full"`` (the test's heap slot is narrowed there, by :mod:`.flow` like every other arm fact), so
that a later test of it, also in a helper it was passed to, is decided. The comparisons note what
they read when they are evaluated (:meth:`~.expressions.Expressions.note_settings`); the truth of
a property implies the comparisons its returned ``and`` holds (:func:`.conditions.implied_tests`).
"""

from __future__ import annotations

import libcst as cst

from fsdp2_lint.analysis import conditions
from fsdp2_lint.analysis.interpreter.state import Evaluator, Slot
from fsdp2_lint.analysis.model import Value

MAX_PROPERTY_DEPTH = 3  # properties whose truth implies another's, followed this deep


def setting_facts(interp: Evaluator, test: cst.BaseExpression) -> tuple[dict[Slot, Value], dict[Slot, Value]]:
    """The settings a test proves equal to a constant in its true and in its false arm: ``cfg.mode
    == "full"`` (true arm), ``self.plan is not None`` (false arm), and the equalities the truth
    of a property implies (``if self.monolith:`` where the property returns ``self.cfg is not None
    and self.cfg.kind == "full"``). What each comparison read was noted when the test (or the
    property) was evaluated: :attr:`~.state.Evaluator.settings_compared`."""
    found = conditions.parts(test)
    if found is None:
        return {}, {}
    if found[1] is conditions.TRUTH:
        return (_implied_by_property(interp, test, 0) if found[2] else {}), {}
    facts = _compared(interp, test, -1)
    return (facts, {}) if found[2] else ({}, facts)


def _compared(interp: Evaluator, comparison: cst.BaseExpression, since: int) -> dict[Slot, Value]:
    """The settings ``comparison`` (evaluated after evaluation number ``since``) found equal to its constant."""
    noted = interp.settings_compared.get(id(comparison))
    if noted is None or noted[0] <= since:
        return {}
    _, slots, constant = noted
    return dict.fromkeys(slots, constant)


def _implied_by_property(interp: Evaluator, read: cst.BaseExpression, depth: int) -> dict[Slot, Value]:
    """The settings proved equal to constants when the property ``read`` ran is true."""
    noted = interp.properties_read.get(id(read))
    if noted is None or depth > MAX_PROPERTY_DEPTH:
        return {}
    method, since = noted
    facts: dict[Slot, Value] = {}
    for implied in conditions.implied_tests(method.node):
        found = conditions.parts(implied)
        if found is None or not found[2]:
            continue
        if found[1] is conditions.TRUTH:
            facts.update(_implied_by_property(interp, found[0], depth + 1))
        else:
            facts.update(_compared(interp, implied, since))
    return facts
