"""The interpreter's state: variable environments (:class:`Env`), call frames (:class:`Frame`), the
heap (attribute slots, keyed by :data:`Slot`, split per branch arm: :class:`Heap`), what a test
establishes in a branch arm (:class:`Arm`), what a block's outcome means for the statements after
it (:class:`Continuation`), and what one entry point's run produced (:class:`EntryRun`).

:class:`Evaluator` is the part of the interpreter that the analyses beside the evaluator
(:mod:`.flow`, :mod:`.guards`, :mod:`.torch_api`) use: they receive the evaluator and never import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from fsdp2_lint.analysis.conditions import Condition
from fsdp2_lint.analysis.model import (
    ClassInfo,
    Context,
    Event,
    FunctionInfo,
    Obj,
    ObjKind,
    RankGuard,
    Ref,
    Value,
    key_element,
    refs,
)

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


@dataclass(frozen=True, eq=False)
class Arm:
    """What a test establishes in one arm of a branch (produced by :func:`.guards.arms`, applied
    by :mod:`.flow`). A new path fact is one field here, its producer in :mod:`.guards` and the
    consumers that read it (through :class:`~fsdp2_lint.analysis.model.Context` or the state)."""

    branch: tuple[int, int]  # (id of the if/while/conditional/comprehension node, arm index)
    rank_guard: RankGuard | None = None  # the ranks the arm runs on
    narrowing: dict[str, Value] = field(default_factory=dict)  # variables rebound in the arm only
    type_facts: dict[str, Value] = field(default_factory=dict)  # variables rebound, still true after
    slots: dict[Slot, Value] = field(default_factory=dict)  # attributes rebound in the arm only
    not_fsdp2: tuple[Ref, ...] = ()  # modules the test proves are no FSDP2 modules
    distinct: tuple[tuple[Value, Value], ...] = ()  # values (modules) the test proves are different objects
    fsdp2_tested: tuple[Ref, ...] = ()  # modules the test requires to be FSDP2 modules
    dtensor_tested: tuple[Value, ...] = ()  # values the test requires to be DTensors
    not_dtensor: tuple[Value, ...] = ()  # values (parameters, gradients) the test proves are no DTensors
    conditions: tuple[tuple[Condition, bool], ...] = ()  # the fixed conditions the arm holds, with their truth
    against_default: bool = False  # the arm a constant test on a defaulted parameter rules out
    # The `if`s (their ids) whose other arm ends in `continue`/`break`/`return`: this arm is how the
    # code goes on past them.
    skipped: tuple[int, ...] = ()
    # The skipped `if`s whose exiting arm runs when a value is None or empty (`if batch is None:
    # continue`): a skip on this rank's own data (:mod:`fsdp2_lint.analysis.emptiness`).
    data_skips: tuple[cst.If, ...] = ()
    # The `if` (or conditional expression) whose arm this is, when the arm runs only where a value is
    # not None and not empty (`if pixel_values is not None:`): code that runs on the ranks that have data.
    data_arms: tuple[cst.If | cst.IfExp, ...] = ()

    def path_only(self) -> Arm:
        """Only which arm this is: what remains of an arm that is one of several ways to a point."""
        return Arm(self.branch)


@dataclass(frozen=True, eq=False)
class Continuation:
    """What an ``if`` whose one arm always exits means for the statements after it: they run in
    the other arm, and in the arms of ``if``s nested in it that exit the same way (``arms``,
    outermost first)."""

    arms: tuple[Arm, ...]


def joined(continuations: list[Continuation]) -> Continuation:
    """The statements after a block in which several ``if``s exit early run in all their other arms."""
    return Continuation(tuple(arm for c in continuations for arm in c.arms))


@dataclass(eq=False)
class ModuleScope:
    """One module the run reads: the linted file, or a project module it reached. ``name`` is its
    dotted module name ("" when it is not known); ``package`` where its relative imports start."""

    name: str
    package: str
    module: cst.Module
    env: Env
    path: object = None  # the file (a Path), None for the linted text of no known file
    star_imports: list[str] = field(default_factory=list)
    free_names: dict[str, Value] = field(default_factory=dict)  # names it never binds, one object each
    functions: list[FunctionInfo] = field(default_factory=list)
    mentions_dtensor: bool = False  # does its source spell `DTensor` anywhere?
    relevant: bool = True  # may its code matter to a rule (its tokens pass the prefilter)?


@dataclass
class Frame:
    env: Env
    scope: ModuleScope
    stack: tuple[cst.CSTNode, ...] = ()
    self_ref: Ref | None = None
    cls: ClassInfo | None = None
    returns: list[tuple[Value, Context]] = field(default_factory=list)  # each return's value and context
    global_names: set[str] = field(default_factory=set)
    defaulted: set[str] = field(default_factory=set)  # parameters the call left to their default
    # Heap writes of arms that always exit (`if c: self.m = a; return`): they hold again where the
    # exit leads, joined into the heap when the enclosing function, loop body or block ends.
    escaped: list[dict[Slot, Value]] = field(default_factory=list)
    yielded: list[Value] = field(default_factory=list)  # what a generator's `yield`s gave
    # The assignment that bound each local name, or None for a binding with no fixed site (in a
    # loop of this frame: a new value each iteration; a `for`, `with` or import target); names the
    # frame did not bind since the call are the parameters of ``function``.
    bindings: dict[str, cst.CSTNode | None] = field(default_factory=dict)
    entry_loops: int = 0  # loops around the call: a binding inside more of them is in a loop here
    function: cst.CSTNode | None = None  # the function this frame runs (None: module code)


@dataclass(frozen=True)
class EntryRun:
    """What interpreting one entry point produced: its events in execution order, and ``self`` for
    a method analysed as an entry point."""

    entry: str
    events: list[Event]
    instance: Ref | None = None
    body_start: int = 0  # the first event other methods of the class may have run before


class Evaluator(Protocol):
    """The interpreter as the analyses beside it see it."""

    frame: Frame
    ctx: Context
    heap: Heap
    mutations: int  # stores and calls that may change a setting, so far (analysis/conditions.py)
    module_env: Env  # the variables of the module the running code is in
    dtensor_checks_of: dict[int, tuple[str, ...]]  # guards.dtensor_checks by id of the test
    # By id of a comparison of settings with a constant, at its latest evaluation: its number,
    # the heap slots of the settings it read, and the constant (interpreter/settings.py).
    settings_compared: dict[int, tuple[int, tuple[Slot, ...], Value]]
    # By id of an attribute read that ran a property, at its latest evaluation: the property, and
    # the number of the last comparison evaluated before it ran.
    properties_read: dict[int, tuple[FunctionInfo, int]]

    def now(self) -> int: ...
    def eval(self, node: cst.BaseExpression | None) -> Value: ...
    def exec_block(self, body: list[cst.CSTNode], exits: list[Continuation] | None = None) -> bool: ...
    def loop_body(self, node: cst.CSTNode, body: cst.BaseSuite, orelse: cst.Else | None) -> None: ...
    def element_of(self, value: Value, lazy: bool) -> Value: ...
    def call_value(self, callee: Value, args: tuple, kwargs: dict, node: cst.Call) -> Value: ...
    def new_object(self, event: Event, qname: str | None) -> Value: ...
    def unbound(self, name: str) -> Value: ...
    def resolved(self, value: Value) -> Value: ...
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


class World:
    """The version of the state a callee can read besides its arguments; it changes on each write."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0

    def changed(self) -> None:
        self.version += 1


class WatchedDict(dict):
    """A dict (the heap, the module's variables) whose writes change the :class:`World`."""

    __slots__ = ("world",)

    def __init__(self, world: World, *args: object) -> None:
        super().__init__(*args)
        self.world = world

    def __setitem__(self, key, value) -> None:
        self.world.changed()
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self.world.changed()
        super().__delitem__(key)

    def update(self, *args, **kwargs) -> None:
        self.world.changed()
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self.world.changed()
        super().clear()

    def pop(self, *args):
        self.world.changed()
        return super().pop(*args)

    def setdefault(self, key, default=None):
        self.world.changed()
        return super().setdefault(key, default)

    def popitem(self):
        self.world.changed()
        return super().popitem()

    def __ior__(self, other):
        self.world.changed()
        return super().__ior__(other)


class Heap(WatchedDict):
    """Attribute slots, keyed by :data:`Slot`. Each arm of a branch writes to it in turn: the
    writes an arm makes are logged (:meth:`open_arm`), and :meth:`close_arm` takes them back out,
    so that the next arm starts from the heap before the branch and :mod:`.flow` can join the arms.
    Reads are plain dict reads; only writes inside an arm pay for the log.

    Not split per arm: objects mutated in place (container ``items`` appended to, an object's
    ``parent`` set by :func:`adopt`, a wrapper's ``wrapped``): an arm sees what the other arm put
    in a container, and after the branch the container holds what either put in it.
    """

    __slots__ = ("_log",)

    def __init__(self, world: World, slots: dict[Slot, Value] | None = None) -> None:
        super().__init__(world, slots or {})
        self._log: list[tuple[Slot, Value | None]] | None = None  # (slot, what it held before)

    def __setitem__(self, slot: Slot, value: Value) -> None:
        if self._log is not None:
            self._log.append((slot, self.get(slot)))
        super().__setitem__(slot, value)

    def update(self, slots: dict[Slot, Value]) -> None:  # type: ignore[override]
        for slot, value in slots.items():
            self[slot] = value

    def open_arm(self) -> list[tuple[Slot, Value | None]] | None:
        """Start logging an arm's writes; returns the enclosing arm's log, for :meth:`close_arm`."""
        outer, self._log = self._log, []
        return outer

    def close_arm(self, outer: list[tuple[Slot, Value | None]] | None) -> dict[Slot, Value]:
        """Undo the arm's writes and return them (the slots it wrote, with what they hold at its
        end); writes from here on go to the enclosing arm's log."""
        log, self._log = self._log or [], None
        writes = {slot: self[slot] for slot, _ in log}
        for slot, before in reversed(log):
            if before is None:
                del self[slot]
            else:
                super().__setitem__(slot, before)
        self._log = outer
        return writes


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
