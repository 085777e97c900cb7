from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.conditions import excludes
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, Obj, canonical, may_be_same, refs
from fsdp2_lint.analysis.switches import (
    Enable,
    enabled_by_sibling,
    follows,
    optimizer_step,
    setting_enables,
    switched_off,
    switching_on,
)
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
iteration switches it off again before any backward). A branch in the loop that switches sync on in
one arm and off in the other (`if is_last: ...(True) else: ...(False)`, in the loop or in a helper it
calls) chooses per micro-batch, like `set_requires_gradient_sync(is_last)`, and counts as switching it
back on; one that tests a setting read from an object (`if cfg.accumulate:`) takes the same arm every
iteration and does not.

Switching it back on counts only for the modules it reaches: `set_requires_gradient_sync(True)` on
the same module (through any alias, `self.model` in another method) or a module around it does;
on another model or on a submodule it does not, nor does `recurse=False`, which switches the
module alone back on and leaves the FSDP modules inside it off, unless those are switched back on
too (each block and the root individually). When the file does not show which modules inside
the model are sharded, a `recurse=False` call on the model counts only alongside calls on modules
below it. (torch makes `recurse` keyword-only: `set_requires_gradient_sync(True, False)` raises
`TypeError` and switches nothing on.) A call on an object the file cannot follow (what a helper
of another package returns, `unwrap(model)`) may be any module and counts.

## Why is this bad?
With gradient sync off, FSDP2 skips the reduce-scatter: gradients are never reduced into the
sharded parameters' `.grad`. Observed with torch 2.13: 0 reduce-scatters, `p.grad is None` for 10 of
10 parameters, and `opt.step()` changes 0 of 10 parameters. No warning, the loss just stays flat.
Switched back on with `recurse=False` on the root only: the root's own parameters get a `.grad`, the blocks'
all stay `None`.
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
        """
from torch.distributed.fsdp import fully_shard

for block in model.blocks:
    fully_shard(block)
fully_shard(model)
model.set_requires_gradient_sync(False)  # expect: FSDP014
model(batch).sum().backward()
model.set_requires_gradient_sync(True, recurse=False)
model(last).sum().backward()
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
            enables = _enables(trace)
            for call in trace.methods(SYNC):
                if call.arg(0, "requires_gradient_sync") != Const(False):
                    continue
                later = follows(trace, call)
                steps = list(later(trace.methods("step")))
                switched = switched_off(trace, call)
                if not steps or enabled_by_sibling(facts, trace, switched, _enables):
                    continue
                # For each module the call switches off, the later calls that switch it back on.
                groups = [list(later([e.event for e in switching_on(module, enables)])) for module in switched]
                if any(not group for group in groups) or any(
                    optimizer_step(step) and not all(_enabled_between(call, step, group) for group in groups)
                    for step in steps
                ):
                    after = set(later([e.event for e in enables]))
                    partial = after and any(not group for group in groups)
                    yield Finding(
                        call.node, _partly(call, [e for e in enables if e.event in after]) if partial else None
                    )


def _partly(call: Event, enables: list[Enable]) -> str:
    """The message for sync switched back on (by ``enables``), but not for all the modules ``call``
    switched off."""
    receivers = [canonical(ref) for ref in refs(call.receiver)] if call.receiver is not None else []
    name = f"`{receivers[0].text}`" if receivers else "the module"
    alone = any(
        not e.recursive and any(r is not None and may_be_same(r, m) for r in e.receivers for m in receivers)
        for e in enables
    )
    if alone:
        return (
            f"gradient sync of the modules inside {name} stays off at the optimizer step: it is switched back on "
            "with `recurse=False`, for the module alone"
        )
    others = ", ".join(dict.fromkeys(f"`{r.text}`" for e in enables for r in e.receivers if r is not None))
    return f"gradient sync of {name} stays off at the optimizer step: it is switched back on only for {others}"


def _enabled_between(call: Event, step: Event, enables: list[Event]) -> bool:
    """Is sync switched back on after ``call`` and before ``step`` (through the loop when the
    step comes earlier in the loop body)? Switched on only after the step is too late: the next
    iteration turns it off again before any backward reduces. A branch in the loop that switches
    it on in one arm and off in the other chooses per iteration, like
    ``set_requires_gradient_sync(is_last)``."""
    if any(_chosen_per_iteration(call, enable) for enable in enables):
        return True
    enables = [enable for enable in enables if not enable.exclusive_with(call)]
    if step.index > call.index:
        return any(call.index < enable.index < step.index for enable in enables)
    return any(enable.index > call.index or enable.index < step.index for enable in enables)


def _chosen_per_iteration(call: Event, enable: Event) -> bool:
    """Other arms of a branch in a loop around both, unless the branch tests a setting read from an
    object (``if cfg.accumulate:``), which takes the same arm in every iteration."""
    if not set(call.ctx.loops) & set(enable.ctx.loops) or not enable.exclusive_with(call):
        return False
    return not any(
        excludes(mine, my_truth, theirs, their_truth)
        for mine, my_truth in call.ctx.conditions
        if mine.path
        for theirs, their_truth in enable.ctx.conditions
    )


def _enables(trace: Trace, onto: Obj | None = None) -> list[Enable]:
    return setting_enables(trace, SYNC, "requires_gradient_sync", onto)
