"""The interpreter's state: variable environments (:class:`Env`), call frames (:class:`Frame`), the
heap (attribute and container slots, keyed by :data:`Slot`), what a block's outcome means for the
statements after it (:class:`Continuation`), and what one entry point's run produced
(:class:`EntryRun`).

:class:`Evaluator` is the part of the interpreter that the analyses beside the evaluator
(:mod:`.flow`, :mod:`.guards`, :mod:`.torch_api`) use: they receive the evaluator and never import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from fsdp2_lint.analysis.model import ClassInfo, Context, Event, Obj, ObjKind, RankGuard, Ref, Value, key_element, refs

Slot = tuple[int, tuple[str, ...]]  # a heap key: (id of the owning object, attribute path)
TERMINATED = object()  # a block that ends in return/raise/break/continue


class Env:
    """Variables of one scope; ``parent`` is the enclosing scope (closures, module globals)."""

    __slots__ = ("vars", "parent")

    def __init__(self, parent: Env | None = None, variables: dict[str, Value] | None = None) -> None:
        self.vars: dict[str, Value] = {} if variables is None else variables
        self.parent = parent

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return None

    def branch(self) -> Env:
        return Env(self.parent, dict(self.vars))


@dataclass(frozen=True)
class Continuation:
    """What an ``if`` whose one arm always exits means for the statements after it: they run in
    the other arm (``arms``: with those of ``if``s nested in it that exit the same way), on the
    ranks that arm runs on (``rank_guard``)."""

    arms: tuple[tuple[int, int], ...]
    rank_guard: RankGuard | None
    not_fsdp2: tuple[Ref, ...] = ()
    dtensor_tested: tuple[Value, ...] = ()


def joined(continuations: list[Continuation]) -> Continuation:
    """The statements after a block in which several ``if``s exit early run in all their other arms."""
    guards = [c.rank_guard for c in continuations if c.rank_guard is not None]
    return Continuation(
        tuple(arm for c in continuations for arm in c.arms),
        guards[-1] if guards else None,
        tuple(ref for c in continuations for ref in c.not_fsdp2),
        tuple(value for c in continuations for value in c.dtensor_tested),
    )


@dataclass
class Frame:
    env: Env
    stack: tuple[cst.CSTNode, ...] = ()
    self_ref: Ref | None = None
    cls: ClassInfo | None = None
    returns: list[Value] = field(default_factory=list)
    global_names: set[str] = field(default_factory=set)
    defaulted: set[str] = field(default_factory=set)  # parameters the call left to their default


@dataclass(frozen=True)
class EntryRun:
    """What interpreting one entry point produced: its events in execution order, and ``self`` for
    a method analysed as an entry point."""

    entry: str
    events: list[Event]
    instance: Ref | None = None


class Evaluator(Protocol):
    """The interpreter as the analyses beside it see it."""

    frame: Frame
    ctx: Context
    heap: dict[Slot, Value]
    module_env: Env
    module: cst.Module
    mentions_dtensor: bool  # does the file's source spell `DTensor` anywhere?
    dtensor_checks_of: dict[int, tuple[str, ...]]  # guards.dtensor_checks by id of the test

    def now(self) -> int: ...
    def eval(self, node: cst.BaseExpression | None) -> Value: ...
    def exec_block(self, body: list[cst.CSTNode], exits: list[Continuation] | None = None) -> bool: ...
    def loop_body(self, node: cst.CSTNode, body: cst.BaseSuite, orelse: cst.Else | None) -> None: ...
    def element_of(self, value: Value, lazy: bool) -> Value: ...
    def call_value(self, callee: Value, args: tuple, kwargs: dict, node: cst.Call) -> Value: ...
    def new_object(self, event: Event, qname: str | None) -> Value: ...
    def unbound(self, name: str) -> Value: ...
    def loop_wildcard(self, wildcard: str) -> str: ...


# --- the heap ----------------------------------------------------------------------------------


def slot_keys(ref: Ref, name: str) -> list[Slot]:
    """The heap keys of ``ref.name``, from its outermost owner (where stores go) to the object
    itself (where stores went before it became part of another object: an attribute set in a
    constructor, read after the instance was stored as ``self.checkpointer``)."""
    root, path = ref.root, ref.path + (name,)
    keys = [(id(root), path)]
    while root.parent is not None:
        owner = root.parent
        root, path = owner.root, owner.path + path
        keys.append((id(root), path))
    return keys[::-1]


def narrow_slots(heap: dict[Slot, Value], slots: dict[Slot, Value]) -> dict[Slot, Value | None]:
    """Put what a test says of attributes into the heap; returns what they held before."""
    saved = {slot: heap.get(slot) for slot in slots}
    heap.update(slots)
    return saved


def restore_slots(heap: dict[Slot, Value], slots: dict[Slot, Value], saved: dict[Slot, Value | None]) -> None:
    for slot, value in slots.items():
        if heap.get(slot) is not value:
            continue  # assigned meanwhile
        if saved[slot] is None:
            del heap[slot]
        else:
            heap[slot] = saved[slot]  # type: ignore[assignment]


def adopt(slot: Ref, value: Value) -> None:
    """Make the objects in ``value`` that belong to nothing yet parts of ``slot`` (an attribute,
    or a key of a container that is itself an attribute, ``self.models["actor"]``), so that they
    are the same modules as what ``slot`` names from its outermost owner."""
    for stored in refs(value):
        if (
            stored.path
            or stored.root.kind not in (ObjKind.NEW, ObjKind.PARAM, ObjKind.CONTAINER)
            or stored.root.parent is not None
        ):
            continue
        if owned_by(slot, stored.root):
            continue
        stored.root.parent = slot
        if stored.root.kind is ObjKind.CONTAINER:
            for key, item in stored.root.items:
                if key is not None:
                    adopt(stored.child(key_element(key)), item)


def owned_by(slot: Ref, obj: Obj) -> bool:
    """Would making ``obj`` a child of ``slot`` create a cycle?"""
    owner: Obj | None = slot.root
    while owner is not None:
        if owner is obj:
            return True
        owner = owner.parent.root if owner.parent is not None else None
    return False
