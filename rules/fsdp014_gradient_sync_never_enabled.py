from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Const,
    Event,
    Obj,
    ObjKind,
    Ref,
    Value,
    canonical,
    may_be_same,
    may_contain,
    options,
    refs,
    strict_ancestor,
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
iteration switches it off again before any backward).

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
                later = _follows(trace, call)
                steps = list(later(trace.methods("step")))
                switched = _switched_off(trace, call)
                if not steps or _enabled_by_sibling(facts, trace, switched):
                    continue
                # For each module the call switches off, the later calls that switch it back on.
                groups = [list(later([e.event for e in _switching_on(module, enables)])) for module in switched]
                if any(not group for group in groups) or any(
                    _optimizer_step(step) and not all(_enabled_between(call, step, group) for group in groups)
                    for step in steps
                ):
                    after = set(later([e.event for e in enables]))
                    partial = after and any(not group for group in groups)
                    yield Finding(
                        call.node, _partly(call, [e for e in enables if e.event in after]) if partial else None
                    )


def _partly(call: Event, enables: list[_Enable]) -> str:
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


@dataclass(frozen=True)
class _Switched:
    """A module whose gradient sync a call switches off (None: the call's receiver is unknown);
    ``unknown_inside``: with FSDP modules inside it that the file does not show."""

    module: Ref | None
    unknown_inside: bool = False


@dataclass(frozen=True)
class _Enable:
    """A call that switches sync on (or to a computed value), on ``receivers`` (None: an object
    that may be any module)."""

    event: Event
    receivers: tuple[Ref | None, ...]
    recursive: bool


def _recursive(call: Event) -> bool:
    """``recurse`` is True unless given as False (torch makes it keyword-only; a second positional
    argument, which raises, means the same to whoever wrote it)."""
    return call.arg(1, "recurse") != Const(False)


def _switched_off(trace: Trace, call: Event) -> list[_Switched]:
    """The modules whose sync ``call`` switches off: its receiver, and with ``recurse`` the
    modules the trace shards inside it (when it shows none, those are unknown)."""
    receivers = [canonical(ref) for ref in refs(call.receiver)] if call.receiver is not None else []
    if not receivers:
        return [_Switched(None)]
    if not _recursive(call):
        return [_Switched(module) for module in receivers]
    sharded = [canonical(target) for shard in trace.shards for target in shard.targets] + trace.assumed_sharded
    switched = []
    for receiver in receivers:
        inside = [_Switched(t) for t in dict.fromkeys(t for t in sharded if may_contain(receiver, t))]
        switched += inside or [_Switched(receiver, unknown_inside=True)]
    return switched


def _enables(trace: Trace, onto: Obj | None = None) -> list[_Enable]:
    """The trace's calls that switch sync on. ``onto``: the instance of another trace of the same
    class, onto which the calls' modules of this trace's instance are moved; other objects of
    this trace may then be any module."""
    found = []
    for event in trace.methods(SYNC):
        if event.arg(0, "requires_gradient_sync") == Const(False):
            continue
        receivers = tuple(_receiver(option, trace, onto) for option in options(event.receiver or UNKNOWN))
        found.append(_Enable(event, receivers, _recursive(event)))
    return found


def _receiver(option: Value, trace: Trace, onto: Obj | None) -> Ref | None:
    if not isinstance(option, Ref) or (
        option.root.kind is ObjKind.NEW and not (option.root.qname or "").startswith("torch.")
    ):
        return None  # unknown, or what a call outside torch returned (`unwrap(model)`)
    module = canonical(option)
    if onto is None:
        return module
    instance = trace.instance
    return Ref(onto, module.path) if instance is not None and module.root is instance.root else None


def _switching_on(switched: _Switched, enables: list[_Enable]) -> list[_Enable]:
    """The calls that switch ``switched`` back on: on the module or a module around it, or on
    one that may be any module; with ``recurse=False``, on the module itself, and when modules
    inside it are unknown, only if another call switches on a module below it (each block and the
    root individually)."""
    module = switched.module
    if module is None:
        return enables
    whole = [e for e in enables if any(r is None or (e.recursive and may_contain(r, module)) for r in e.receivers)]
    alone = [
        e for e in enables if not e.recursive and any(r is not None and may_be_same(r, module) for r in e.receivers)
    ]
    below = any(r is not None and strict_ancestor(module, r) for e in enables for r in e.receivers)
    return whole if switched.unknown_inside and not below else whole + alone


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


def _enabled_by_sibling(facts: FileFacts, trace: Trace, switched: list[_Switched]) -> bool:
    """A method that no code calls may run after this one: calls in other methods of the same
    class that switch sync back on for every module this one switched off count. (The relation of
    another object than the instance to theirs is unknown: any of their calls counts for it.)"""
    instance = trace.instance
    if instance is None:
        return False
    enables = [
        enable
        for other in facts.traces
        if other is not trace and other.instance is not None and other.instance.root.cls is instance.root.cls
        for enable in _enables(other, onto=instance.root)
    ]
    return bool(enables) and all(
        _switching_on(module if module.module and module.module.root is instance.root else _Switched(None), enables)
        for module in switched
    )
