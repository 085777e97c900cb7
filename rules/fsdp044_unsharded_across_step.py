from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import UNKNOWN, Const, Event, Obj, Ref, canonical, may_be_same, options, refs
from fsdp2_lint.analysis.switches import (
    Enable,
    enabled_by_sibling,
    follows,
    optimizer_step,
    setting_enables,
    switch_receiver,
    switched_off,
    switching_on,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.fixing.builders import code_of
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

SETTER = "set_reshard_after_backward"
RESHARD = "reshard"
UNSHARD = "unshard"


class UnshardedAcrossStep(Rule):
    code = "FSDP044"
    name = "unsharded-across-optimizer-step"
    summary = (
        "`set_reshard_after_backward(False)` or a manual `unshard()` leaves parameters unsharded at the optimizer step"
    )
    hint = (
        "reshard after the last micro-batch's backward: `model.set_reshard_after_backward(is_last_microbatch)`, "
        "or call `model.reshard()` on each FSDP module before `optimizer.step()`"
    )
    failure = (
        "silent: the next forward reuses the unsharded parameters gathered before the step; the update is never "
        "seen by the forward (the model trains on its initial weights)"
    )
    docs = """
## What it does
Flags `model.set_reshard_after_backward(False)` when no later call switches resharding back on
before a backward that precedes the optimizer `step()` (`set_reshard_after_backward(True)` or a
computed value such as `is_last_microbatch`), and no `reshard()` of the module runs before the step.
Switching it on only after the last backward is too late: the flag is read by the post-backward
hook, so the parameters stay unsharded through the step. As with FSDP014, `recurse=False` (and
`reshard()`, which is not recursive) count only for the module itself, and a call on another
model or on a submodule does not count for the model.

Also flags a manual `model.unshard()` of a sharded module that runs after the last backward
before the optimizer `step()` (no backward between the two) with no `reshard()` of that module
in between, e.g. to read the full weights for logging.

Not flagged: `set_reshard_after_backward(is_last)` in a gradient-accumulation loop, `False` switched
back to `True` before the last micro-batch's backward, `model.reshard()` before the step, a file
without an optimizer step; an `unshard()` before the forward (the post-backward hook reshards it),
or after the step (the next forward then uses the updated values).

## Why is this bad?
With resharding after backward off, the module's parameters stay unsharded (the all-gathered
copy) after the backward. `optimizer.step()` updates the sharded parameters (the DTensors the
optimizer holds), not that copy, and at the next forward FSDP2 sees the group already unsharded
and skips the all-gather: the forward uses the values from before the step. Observed with torch
2.13 on CPU/gloo, 2 ranks: after `set_reshard_after_backward(False)` on every micro-batch, every
following forward used the pre-step weights of every layer (equal to the old values, different
from the updated shards), step after step; with `recurse=False` on the root, the root's own
parameters were stale and the blocks' were not. With `set_reshard_after_backward(is_last)` or a
`reshard()` before the step the forward used the updated values. No error, no warning. A manual
`model.unshard()` (not recursive: the module's own group) after the backward does the same: on
torch 2.13 the following forwards used the pre-step values of the root's parameters, step after
step; an `unshard()` before the forward is resharded by the post-backward hook, and one followed
by `reshard()` before the step is harmless (both observed clean).

## Known problems
An `unshard()` is flagged only on a module the analysis knows to be sharded (a `fully_shard`
call the flow runs, or one in another method of the class); an `async_op=True` handle waited on
later counts as the unshard itself. A `reshard()` in a method no code shown calls is not seen.
"""
    valid = (
        """
for micro, batch in enumerate(batches):
    model.set_reshard_after_backward(micro == len(batches) - 1)
    model(batch).sum().backward()
optimizer.step()
""",
        """
from torch.distributed.fsdp import FSDPModule

model.set_reshard_after_backward(False)
for batch in batches:
    model(batch).sum().backward()
for module in model.modules():
    if isinstance(module, FSDPModule):
        module.reshard()
optimizer.step()
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in batches:
    model.unshard()  # gathered early: the post-backward hook reshards it
    model(batch).sum().backward()
    optimizer.step()
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in batches:
    model(batch).sum().backward()
    model.unshard()  # expect: FSDP044
    log(model.head.weight.norm())
    optimizer.step()
""",
        """
for batch in batches:
    model.set_reshard_after_backward(False)  # expect: FSDP044
    model(batch).sum().backward()
optimizer.step()
""",
        """
model.set_reshard_after_backward(False)  # expect: FSDP044
for batch in batches:
    model(batch).sum().backward()
model.set_reshard_after_backward(True)
optimizer.step()
""",
    )
    requires = ((SETTER, UNSHARD), ("step",))
    signature = RuntimeSignature(
        evidence="stale_unsharded_params",
        note="at the forward after the optimizer step, a parameter group is still unsharded and its unsharded "
        "copy differs from the shards the step updated",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            enables = _enables(trace)
            backwards = trace.methods("backward")
            for call in trace.methods(SETTER):
                if call.arg(0, "reshard_after_backward") != Const(False):
                    continue
                later = follows(trace, call)
                steps = [step for step in later(trace.methods("step")) if optimizer_step(step)]
                switched = switched_off(trace, call)
                if not steps or enabled_by_sibling(facts, trace, switched, _enables):
                    continue
                groups = [list(later([e.event for e in switching_on(module, enables)])) for module in switched]
                if any(not group for group in groups) or any(
                    not all(_undone_between(call, step, group, backwards) for group in groups) for step in steps
                ):
                    yield Finding(
                        call.node, "`set_reshard_after_backward(False)` is still in effect at the optimizer step"
                    )
            yield from _unshards_before_step(facts, trace, backwards)


def _unshards_before_step(facts: FileFacts, trace: Trace, backwards: list[Event]) -> Iterator[Finding]:
    """``m.unshard()`` on a sharded module, after the last backward and before an optimizer step
    that can follow it, with no ``reshard()`` of ``m`` in between: the step updates the shards and
    the next forward, finding the group unsharded, skips the all-gather."""
    reshards = trace.methods(RESHARD)
    for call in trace.methods(UNSHARD):
        modules = [canonical(ref) for ref in refs(call.receiver)] if call.receiver is not None else []
        if not modules or not all(trace.is_fsdp_module(module, call) for module in modules):
            continue
        later = follows(trace, call)
        for step in later(trace.methods("step")):
            if not optimizer_step(step):
                continue
            between = _between(call, step)
            if any(between(b) for b in backwards):
                continue  # its post-backward hook reshards the group
            if any(between(r) and _reshards(r, modules) for r in reshards):
                continue
            yield Finding(
                call.node,
                f"`{_receiver(call)}.unshard()` runs after the last backward and nothing reshards "
                "it before the optimizer step: the next forward finds the group unsharded, skips the all-gather "
                "and uses the values from before the step",
            )
            break


def _receiver(call: Event) -> str:
    func = call.node.func if isinstance(call.node, cst.Call) else None
    return code_of(func.value) if isinstance(func, cst.Attribute) else "module"


def _between(call: Event, step: Event):
    """Does an event run after ``call`` and before ``step`` (through the loop when the step comes
    earlier in the loop body)?"""

    def inside(event: Event) -> bool:
        if step.index > call.index:
            return call.index < event.index < step.index
        return event.index > call.index or event.index < step.index

    return inside


def _reshards(event: Event, modules: list[Ref]) -> bool:
    """``reshard()`` on one of ``modules``, on an unknown module, or on every module of a model."""
    receivers = [canonical(ref) for ref in refs(event.receiver)] if event.receiver is not None else []
    return not receivers or any(_any_module(r) or any(may_be_same(r, module) for module in modules) for r in receivers)


def _enables(trace: Trace, onto: Obj | None = None) -> list[Enable]:
    """The calls that switch resharding back on (``set_reshard_after_backward`` with another value
    than False) or reshard the module (``reshard()``, not recursive)."""
    found = setting_enables(trace, SETTER, "reshard_after_backward", onto)
    for event in trace.methods(RESHARD):
        receivers = tuple(switch_receiver(option, trace, onto) for option in options(event.receiver or UNKNOWN))
        found.append(Enable(event, receivers, any(_any_module(r) for r in receivers)))
    return sorted(found, key=lambda enable: enable.event.index)


def _any_module(receiver: Ref | None) -> bool:
    """A receiver that stands for each module below a module, itself included (``for m in
    model.modules(): m.reshard()``): resharding them all reshards the whole model."""
    return receiver is not None and any(str(part).startswith("**") for part in receiver.path)


def _undone_between(call: Event, step: Event, enables: list[Event], backwards: list[Event]) -> bool:
    """Is the module resharded between ``call`` and ``step``: ``reshard()`` runs in between, or
    resharding is switched back on before a backward that runs before the step (through the loop
    when the step comes earlier in the loop body)? Where the trace shows no backward, switching it
    on counts."""

    def before_step(event: Event) -> bool:
        if step.index > call.index:
            return call.index < event.index < step.index
        return event.index > call.index or event.index < step.index

    for enable in enables:
        if not before_step(enable):
            continue
        if enable.name == RESHARD or not backwards:
            return True
        if any(before_step(b) and _precedes(enable, b, step) for b in backwards):
            return True
    return False


def _precedes(enable: Event, backward: Event, step: Event) -> bool:
    """Does ``backward`` run after ``enable`` and before ``step`` (``enable`` known to come before
    the step, possibly through the loop)?"""
    if enable.index < step.index:
        return enable.index < backward.index < step.index
    return backward.index > enable.index or backward.index < step.index
