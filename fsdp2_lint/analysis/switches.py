"""Module settings that FSDPModule setters switch off and on (`set_requires_gradient_sync`,
`set_reshard_after_backward`): which modules a call switches off (with ``recurse``, the sharded
modules inside its receiver), which later calls switch each back on, and what can run after a
call (later events, and the next iteration of a loop around it), and where DDP's `no_sync` is taken
from an FSDP2 module, which has none. FSDP005, FSDP014, FSDP033 and FSDP044 ask these."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Const,
    Event,
    EventKind,
    Obj,
    ObjKind,
    Ref,
    Value,
    canonical,
    may_be_same,
    may_be_wrapper,
    may_contain,
    options,
    refs,
    strict_ancestor,
)
from fsdp2_lint.analysis.trace import Trace


@dataclass(frozen=True)
class Switched:
    """A module whose gradient sync a call switches off (None: the call's receiver is unknown);
    ``unknown_inside``: with FSDP modules inside it that the file does not show."""

    module: Ref | None
    unknown_inside: bool = False


@dataclass(frozen=True)
class Enable:
    """A call that switches sync on (or to a computed value), on ``receivers`` (None: an object
    that may be any module)."""

    event: Event
    receivers: tuple[Ref | None, ...]
    recursive: bool


def is_recursive(call: Event) -> bool:
    """``recurse`` is True unless given as False (torch makes it keyword-only; a second positional
    argument, which raises, means the same to whoever wrote it)."""
    return call.arg(1, "recurse") != Const(False)


def switched_off(trace: Trace, call: Event) -> list[Switched]:
    """The modules whose sync ``call`` switches off: its receiver, and with ``recurse`` the
    modules the trace shards inside it (when it shows none, those are unknown)."""
    receivers = [canonical(ref) for ref in refs(call.receiver)] if call.receiver is not None else []
    if not receivers:
        return [Switched(None)]
    if not is_recursive(call):
        return [Switched(module) for module in receivers]
    sharded = [canonical(target) for shard in trace.shards for target in shard.targets] + trace.assumed_sharded
    switched = []
    for receiver in receivers:
        inside = [Switched(t) for t in dict.fromkeys(t for t in sharded if may_contain(receiver, t))]
        switched += inside or [Switched(receiver, unknown_inside=True)]
    return switched


def setting_enables(trace: Trace, setter: str, keyword: str, onto: Obj | None = None) -> list[Enable]:
    """The trace's calls of ``setter`` that switch its setting on (with a value other than False).
    ``onto``: the instance of another trace of the same class, onto which the calls' modules of
    this trace's instance are moved; other objects of this trace may then be any module."""
    found = []
    for event in trace.methods(setter):
        if event.arg(0, keyword) == Const(False):
            continue
        receivers = tuple(switch_receiver(option, trace, onto) for option in options(event.receiver or UNKNOWN))
        found.append(Enable(event, receivers, is_recursive(event)))
    return found


def switch_receiver(option: Value, trace: Trace, onto: Obj | None) -> Ref | None:
    if not isinstance(option, Ref) or (
        option.root.kind is ObjKind.NEW and not (option.root.qname or "").startswith("torch.")
    ):
        return None  # unknown, or what a call outside torch returned (`unwrap(model)`)
    module = canonical(option)
    if onto is None:
        return module
    instance = trace.instance
    return Ref(onto, module.path) if instance is not None and module.root is instance.root else None


def switching_on(switched: Switched, enables: list[Enable]) -> list[Enable]:
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


def follows(trace: Trace, call: Event):
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


def optimizer_step(step: Event) -> bool:
    """``optimizer.step()`` (or ``scaler.step(optimizer)``), not a scheduler or profiler step."""
    values = (step.receiver, *step.args) if step.receiver is not None else step.args
    return any(
        ref.root.kind is ObjKind.OPTIMIZER or "optim" in ref.text.lower() or ref.text.rpartition(".")[2] == "opt"
        for value in values
        for ref in refs(value)
    )


def enabled_by_sibling(
    facts: FileFacts, trace: Trace, switched: list[Switched], enables_of: Callable[[Trace, Obj], list[Enable]]
) -> bool:
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
        for enable in enables_of(other, instance.root)
    ]
    return bool(enables) and all(
        switching_on(module if module.module and module.module.root is instance.root else Switched(None), enables)
        for module in switched
    )


def fsdp2_no_sync_uses(facts: FileFacts, trace: Trace) -> Iterator[tuple[Event, Ref, Event | bool]]:
    """Where ``no_sync`` (DDP's and FSDP1's way to switch sync off) is taken from a sharded module,
    which has none: ``m.no_sync()``, ``getattr(m, "no_sync")``, ``f = m.no_sync`` (once, where it is
    taken). Yields (the access, the module, the shard that makes it an FSDP2 module)."""
    direct_calls = [call for call in trace.methods("no_sync") if isinstance(call.node.func, cst.Attribute)]
    for use in sorted(direct_calls + trace.methods("no_sync", EventKind.ATTR), key=lambda e: e.index):
        if may_be_wrapper(use.receiver):
            continue  # DDP / FSDP1 wrappers have no_sync()
        for module in refs(use.receiver):
            if facts.defines(module, "no_sync"):
                continue  # the class's own `no_sync` (a trainer's, or the model class's)
            shard = trace.sharded_overlap(module, use)
            if shard:
                yield use, module, shard
                break
