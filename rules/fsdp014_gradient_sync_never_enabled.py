from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, ObjKind, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

SYNC = "set_requires_gradient_sync"


class GradientSyncNeverEnabled(Rule):
    code = "FSDP014"
    name = "gradient-sync-never-reenabled"
    summary = "`set_requires_gradient_sync(False)` is never switched back on before the optimizer step"
    hint = (
        "re-enable sync for the last micro-batch: `model.set_requires_gradient_sync(is_last_microbatch)`, or "
        "`set_requires_gradient_sync(True)` in a `finally:` block"
    )
    failure = "silent: no gradient is reduced, `p.grad` stays None, the step changes 0 of N parameters"
    docs = """
## What it does
Flags `model.set_requires_gradient_sync(False)` when no later call (in the same function, in the
same loop, or in another method of the same class) sets it to `True` or to a computed value before
an optimizer `step()`, including a loop that switches it back on only after the step (the next
iteration switches it off again before any backward).

## Why is this bad?
With gradient sync off, FSDP2 skips the reduce-scatter: gradients are never reduced into the
sharded parameters' `.grad`. Observed with torch 2.13: 0 reduce-scatters, `p.grad is None` for 10 of
10 parameters, and `opt.step()` changes 0 of 10 parameters. No warning, the loss just stays flat.
"""
    valid = (
        """
for micro, batch in enumerate(batches):
    model.set_requires_gradient_sync(micro == len(batches) - 1)
    model(batch).sum().backward()
optimizer.step()
""",
        """
model.set_requires_gradient_sync(False)
try:
    model(batch).sum().backward()
finally:
    model.set_requires_gradient_sync(True)
model(last).sum().backward()
optimizer.step()
""",
    )
    invalid = (
        """
for batch in batches:
    model.set_requires_gradient_sync(False)  # expect: FSDP014
    model(batch).sum().backward()
optimizer.step()
""",
    )
    requires = (("set_requires_gradient_sync",), ("step",))
    signature = RuntimeSignature(
        evidence="grads_not_reduced",
        note="at the optimizer step the parameters whose gradient sync was off at the backward have no grad and do "
        "not change",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            enables = [e for e in trace.methods(SYNC) if e.arg(0, "requires_gradient_sync") != Const(False)]
            for call in trace.methods(SYNC):
                if call.arg(0, "requires_gradient_sync") != Const(False):
                    continue
                later = _follows(trace, call)
                steps = list(later(trace.methods("step")))
                if not steps or _enabled_by_sibling(facts, trace):
                    continue
                reenables = list(later(enables))
                if not reenables or any(
                    _optimizer_step(step) and not _enabled_between(call, step, reenables) for step in steps
                ):
                    yield Finding(call.node)


def _follows(trace: Trace, call: Event):
    """Events that can run after ``call``: later ones, and any in a loop that contains it."""

    def later(events: list[Event]) -> Iterator[Event]:
        for event in events:
            if event is call:
                continue
            if set(event.ctx.loops) & set(call.ctx.loops):
                yield event  # the next iteration, whichever arm of a branch it takes
            elif event.index > call.index and not event.exclusive_with(call):
                yield event

    return later


def _enabled_between(call: Event, step: Event, enables: list[Event]) -> bool:
    """Is sync switched back on after ``call`` and before ``step`` (through the loop when the
    step comes earlier in the loop body)? Switched on only after the step is too late: the next
    iteration turns it off again before any backward reduces."""
    if step.index > call.index:
        return any(call.index < enable.index < step.index for enable in enables)
    return any(enable.index > call.index or enable.index < step.index for enable in enables)


def _optimizer_step(step: Event) -> bool:
    """``optimizer.step()`` (or ``scaler.step(optimizer)``), not a scheduler or profiler step."""
    values = (step.receiver, *step.args) if step.receiver is not None else step.args
    return any(
        ref.root.kind is ObjKind.OPTIMIZER or "optim" in ref.text.lower() or ref.text.rpartition(".")[2] == "opt"
        for value in values
        for ref in refs(value)
    )


def _enabled_by_sibling(facts: FileFacts, trace: Trace) -> bool:
    """A method that no code calls may run after this one: another method of the same class
    that enables sync counts."""
    if trace.instance is None:
        return False
    return any(
        other.instance is not None
        and other.instance.root.cls is trace.instance.root.cls
        and any(e.arg(0, "requires_gradient_sync") != Const(False) for e in other.methods(SYNC))
        for other in facts.traces
        if other is not trace
    )
