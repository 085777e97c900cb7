"""The abstract domain of the analysis: the values and objects the interpreter
(:mod:`fsdp2_lint.analysis.interpreter`) computes with, the same-file functions and classes they
refer to (:class:`FunctionInfo`, :class:`ClassInfo`), the events it records (:class:`Event`) with
their :class:`Context` (branches, loops, guards), and the relations between them that rules ask
about (:func:`canonical`, :func:`may_overlap`, :func:`report_node`, ...).

A module (or any runtime object) is an :class:`Obj` with identity; what a script names is a
:class:`Ref`: an object plus an access path (``model.layers[0]`` is ``Ref(model_obj,
("layers", "[0]"))``). Paths may contain wildcards because loops and variable subscripts name
*some* child: ``"*"`` is exactly one unknown attribute or key, ``"**"`` is any number of levels
(zero included), so iterating ``model.modules()`` yields ``Ref(model_obj, ("**",))``.
A loop numbers the wildcard it introduces (``"*7"``): every path through the same loop
variable then names the same element, so ``blk`` is known to be the parent of ``blk.attn``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from enum import Enum
from functools import cached_property, lru_cache

import libcst as cst

from fsdp2_lint.analysis.conditions import Condition, exclusive
from fsdp2_lint.analysis.kinds import GradTag, GuardRanks, IterKind, Order, RankKind, UniformKind
from fsdp2_lint.analysis.syntax import dotted, runs_no_code, sole_return

ANY = "*"
ANY_DEPTH = "**"
MAX_OPTIONS = 8


def is_any(element: str) -> bool:
    """One unknown attribute or key (``*`` or a loop's numbered ``*7``)."""
    return element[:1] == "*" and element[1:2] != "*"


def is_loop_element(element: str) -> bool:
    """An element a loop numbered (``*7``): each element of what the loop iterates in turn."""
    return is_any(element) and element[1:].isdigit()


def is_any_depth(element: str) -> bool:
    return element[:2] == "**"


def getter_element(getter: str) -> str:
    """The module a submodule getter returns (``model.get_input_embeddings()``): one unknown
    attribute, as ``*``, named after the getter so that two getters' modules are told apart."""
    return ANY + getter


def is_wildcard(element: str) -> bool:
    """An unknown element: one attribute or key (:func:`is_any`), or any depth of them."""
    return element[:1] == "*"


class ObjKind(Enum):
    """How an object came to be."""

    NEW = "new"  # the result of a call (``event`` is the call)
    PARAM = "param"  # a parameter of an analysed entry point, or a name the file never binds
    SELF = "self"  # ``self`` of a method analysed as an entry point
    CLASS = "class"  # a same-file class's namespace: what its body and ``Cls.x = ...`` assign
    CONTAINER = "container"  # a list, dict or set the code builds; ``items`` holds what was put in it
    OPTIMIZER = "optimizer"  # ``params`` holds the parameters it was given
    DDP = "ddp"  # a DistributedDataParallel wrapper; ``wrapped`` is the module it wraps
    FSDP1 = "fsdp1"  # a FullyShardedDataParallel (FSDP1) wrapper; ``wrapped`` likewise
    WRAPPER = "wrapper"  # a DDP or FSDP1 wrapper a type test revealed, around a module we do not know


class EventKind(Enum):
    """What an :class:`Event` records."""

    CALL = "call"  # a call of a function that is not same-file code; ``qname`` its resolved name (or None)
    METHOD = "method"  # ``receiver.name(...)``
    INVOKE = "invoke"  # calling an object, ``receiver(...)`` (a module's forward)
    ATTR = "attr"  # reading ``receiver.name`` (also ``getattr(receiver, "name")``)
    STORE = "store"  # ``receiver.name = value`` / ``receiver[key] = value``
    INPLACE = "inplace"  # ``receiver op= value`` (augmented assignment)
    RETURN = "return"  # a function returning ``result``


class Value:
    """Base of every abstract value."""

    __slots__ = ()


class _Unknown(Value):
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


_SERIALS = itertools.count()


def next_serial() -> int:
    """A number greater than every object's made so far (and smaller than every later one's)."""
    return next(_SERIALS)


class Obj:
    """An abstract runtime object. Identity is the Python object's identity.

    ``kind`` says how it came to be (:class:`ObjKind`). What the object is made of is given when it
    is made; what changes later is heap state: a container's ``items`` grow as the code puts things
    in it, ``parent`` is set when the object is stored as part of another, and ``label`` when it is
    first bound to a name.
    """

    __slots__ = (
        "kind",
        "label",
        "qname",
        "cls",
        "declared",
        "node",
        "items",
        "params",
        "event",
        "parent",
        "wrapped",
        "serial",
    )

    def __init__(
        self,
        kind: ObjKind,
        label: str | None = None,
        *,
        qname: str | None = None,
        cls: ClassInfo | None = None,
        node: cst.CSTNode | None = None,
        event: Event | None = None,
        params: Params | None = None,
        wrapped: Value | None = None,
        items: list[tuple[object, Value]] | None = None,
        declared: Value | None = None,
    ) -> None:
        self.kind = kind
        self.label = label
        self.qname = qname  # resolved name of the callable that created it
        self.cls = cls  # same-file class it is an instance of
        self.declared = declared  # the class a parameter's annotation names (`model: Model`), if any
        self.node = node
        self.items: list[tuple[object, Value]] = [] if items is None else items  # contents: (key or None, value)
        self.params = params  # optimizers: the parameters captured
        self.event = event  # the call event that created it (its arguments)
        # Set when the object is stored as an attribute of another (``self.model = model``):
        # from then on it is the same module as ``owner.attr`` (see :func:`canonical`).
        self.parent: Ref | None = None
        self.wrapped = wrapped  # DDP / FSDP1 wrappers: the module they wrap
        self.serial = next_serial()  # creation order: what a call created was made after it started

    @classmethod
    def container(cls, items: list[tuple[object, Value]], node: cst.CSTNode | None = None) -> Obj:
        """A list, dict or set holding ``items`` (key or None, value)."""
        return cls(ObjKind.CONTAINER, node=node, items=items)

    def __repr__(self) -> str:
        return f"<{self.kind.value} {self.label}>"


@dataclass(frozen=True)
class Ref(Value):
    """An object reached through an access path from a root object."""

    root: Obj
    path: tuple[str, ...] = ()
    order: Order | None = None  # for refs produced by iterating modules() / reversed(...)

    def child(self, element: str) -> Ref:
        return Ref(self.root, self.path + (element,))

    @property
    def text(self) -> str:
        parts = [self.root.label or "<expression>"]
        for element in self.path:
            if is_any_depth(element):
                parts.append(".<submodule>")
            elif is_any(element):
                parts.append("[*]")
            elif element.startswith("["):
                parts.append(element)
            else:
                parts.append("." + element)
        return "".join(parts)


@dataclass(frozen=True)
class ParamSource:
    """Parameters of ``ref`` as they were at ``captured_at`` (an event index).

    ``captured_at`` is ``None`` for a lazy iterator (``m.parameters()``) that reads the module's
    parameters only when something consumes it.
    """

    ref: Ref
    captured_at: int | None


@dataclass(frozen=True)
class Params(Value):
    """Parameters (one, an iterator, a list, param groups) and where they came from.
    ``named``: ``named_parameters()``, whose elements are (name, parameter) pairs."""

    sources: frozenset[ParamSource]
    named: bool = False

    def materialized(self, index: int) -> Params:
        return Params(
            frozenset(ParamSource(s.ref, index if s.captured_at is None else s.captured_at) for s in self.sources),
            self.named,
        )

    def __or__(self, other: Params) -> Params:
        return Params(self.sources | other.sources, self.named and other.named)


@dataclass(frozen=True)
class ModuleIter(Value):
    """``m.modules()`` (``self_included``), ``m.children()``; ``named`` yields (name, module)."""

    ref: Ref
    self_included: bool
    named: bool
    order: Order = Order.PRE


@dataclass(frozen=True)
class StateDict(Value):
    """A state dict taken at event ``at``: of a module (``owner`` a Ref), of an optimizer
    (``owner`` an optimizer Obj), or from the distributed-state-dict helpers. ``full``: True for
    gathered full tensors, False for DTensor shards, None when the options are not known."""

    owner: Ref | Obj
    at: int
    full: bool | None = False


@dataclass(frozen=True)
class Loaded(Value):
    """What ``torch.load`` / safetensors ``load_file`` read from a file (or a part of it).
    ``per_rank``: the path varies with the rank, so each rank reads its own shard file."""

    per_rank: bool


@dataclass(frozen=True)
class Const(Value):
    value: object


@dataclass(frozen=True)
class RankDep(Value):
    """A value that differs across ranks, in the way ``kind`` says (:class:`RankKind`)."""

    kind: RankKind


@dataclass(frozen=True)
class Uniform(Value):
    """A value every rank agrees on that tells a distributed run from a single process
    (:class:`UniformKind`: a distributed-run test, its negation, or the world size)."""

    kind: UniformKind


@dataclass(frozen=True)
class FsdpVersion(Value):
    """What a version probe, ``fsdp_version(model)``, returns: 1 for an FSDP1 wrapper, 2 for an FSDP2
    module. Once compared (``== 1``, ``!= 2``), ``fsdp1_arm`` is the arm of the test (0: true, 1:
    false) in which ``model`` is no FSDP2 module, ``fsdp2_arm`` the arm in which it is one, where the
    test says (``isinstance(model, FSDPModule)`` too, kept in a variable like any other value)."""

    model: Value
    fsdp1_arm: int | None = None
    fsdp2_arm: int | None = None


@dataclass(frozen=True)
class Derived(Value):
    """A tensor computed from parameters' gradients. ``tags`` (:class:`GradTag`): ``GRAD`` always;
    ``LOCAL`` once ``.to_local()`` reduced it to this rank's shard, ``FULL`` once ``.full_tensor()``
    gathered it. ``steps``: the indexes of the events that computed it, so a rule can tell a
    per-parameter norm from the total built on it. ``params``: the parameters whose ``.grad`` it
    was computed from, where known (a DTensor while their module is sharded)."""

    tags: frozenset[GradTag]
    steps: frozenset[int] = frozenset()
    params: Params | None = None


@dataclass(frozen=True)
class Tuple(Value):
    items: tuple[Value, ...]


@dataclass(frozen=True)
class Choice(Value):
    """One of several values. ``sequential``: all of them, one after the other (a loop over a
    literal list), rather than exclusive alternatives (branches)."""

    options: tuple[Value, ...]
    sequential: bool = False


@dataclass(frozen=True)
class Symbol(Value):
    """A name resolved through imports, e.g. ``torch.distributed.fsdp.fully_shard``."""

    qname: str


@dataclass(frozen=True)
class Function(Value):
    info: FunctionInfo
    closure: object = field(default=None, compare=False)  # the Env the def statement ran in
    bound: Ref | None = None  # the instance for a bound method
    owner: ClassInfo | None = None  # the class a class method was looked up on (`Sub.create()`)


@dataclass(frozen=True)
class Class(Value):
    info: ClassInfo


@dataclass(frozen=True)
class BoundMethod(Value):
    """A method of an object read without calling it, e.g. ``f = model.forward``."""

    receiver: Value
    name: str


@dataclass(frozen=True)
class Partial(Value):
    """``functools.partial(func, *args, **kwargs)``: calling it calls ``func`` with these first."""

    func: Value
    args: tuple[Value, ...]
    kwargs: tuple[tuple[str, Value], ...]


@dataclass(frozen=True)
class Super(Value):
    """``super()`` inside a method of ``cls``, bound to the instance ``receiver``."""

    receiver: Ref
    cls: ClassInfo = field(compare=False)


@dataclass(frozen=True)
class Iter(Value):
    """``enumerate(x)`` / ``zip(a, b)`` / ``x.items()`` / ``x.values()`` (:class:`IterKind`):
    iterating yields tuples of elements, or the values."""

    kind: IterKind
    parts: tuple[Value, ...]


@dataclass(frozen=True)
class Lambda(Value):
    node: cst.Lambda  # compared by identity: one value per lambda expression
    closure: object = field(default=None, compare=False)  # the Env it was created in


def options(value: Value) -> tuple[Value, ...]:
    """The alternatives of a value, flattening nested choices."""
    if isinstance(value, Choice):
        out: list[Value] = []
        for option in value.options:
            out.extend(options(option))
        return tuple(out)
    return (value,)


def choice(values: list[Value] | tuple[Value, ...], sequential: bool = False) -> Value:
    unique: list[Value] = []
    for option in (option for value in values for option in options(value)):
        if option not in unique:
            unique.append(option)
            if len(unique) == MAX_OPTIONS:  # the rest is cut anyway: comparing it costs quadratic time
                break
    if not unique:
        return UNKNOWN
    if len(unique) == 1:
        return unique[0]
    return Choice(tuple(unique), sequential)


def refs(value: Value) -> Iterator[Ref]:
    for option in options(value):
        if isinstance(option, Ref):
            yield option


def walk_contents(value: Value, seen: set[int] | None = None) -> Iterator[Value]:
    """The value and everything reachable inside it: choices, tuples, container items."""
    seen = set() if seen is None else seen
    for option in options(value):
        yield option
        if isinstance(option, Tuple):
            for item in option.items:
                yield from walk_contents(item, seen)
        elif isinstance(option, Ref) and not option.path and option.root.kind is ObjKind.CONTAINER:
            if id(option.root) in seen:
                continue
            seen.add(id(option.root))
            for _, item in option.root.items:
                yield from walk_contents(item, seen)


def const(value: Value) -> object:
    """The Python value of a constant, ``NotImplemented`` for anything else."""
    return value.value if isinstance(value, Const) else NotImplemented


def is_container(value: Value) -> bool:
    return isinstance(value, Ref) and value.root.kind is ObjKind.CONTAINER and not value.path


def container_items(value: Value) -> list[tuple[object, Value]] | None:
    if is_container(value):
        return list(value.root.items)  # type: ignore[union-attr]
    if isinstance(value, Tuple):
        return [(None, item) for item in value.items]
    return None


def elements(value: Value) -> list[Value]:
    items = container_items(value)
    if items is not None:
        return [item for _, item in items]
    if isinstance(value, Params):
        return [value]
    return [UNKNOWN]


def mapping_items(value: Value) -> list[tuple[object, Value]]:
    """The items that merging ``value`` into a dict adds (``d.update(value)``, ``{**value}``,
    ``d |= value``): a dict's items under their own keys, so that reading a key later finds what
    was merged under it, not every item of the dict; of any other value, its elements under
    unknown keys."""
    items: list[tuple[object, Value]] = []
    for option in options(value):
        if is_container(option):
            items.extend(option.root.items)  # type: ignore[union-attr]
        else:
            items.extend((None, item) for item in elements(option))
    return items


def keyword_items(kwargs: dict[str, Value]) -> list[tuple[object, Value]]:
    """The items ``dict(**kwargs)`` / ``d.update(**kwargs)`` adds: each keyword under its name, a
    ``**mapping`` whose keys are unknown as :func:`mapping_items`."""
    items: list[tuple[object, Value]] = [(key, value) for key, value in kwargs.items() if key != UNKNOWN_KEYWORDS]
    if UNKNOWN_KEYWORDS in kwargs:
        items.extend(mapping_items(kwargs[UNKNOWN_KEYWORDS]))
    return items


def key_element(key: object) -> str:
    """The path element of a container key (``None``: unknown)."""
    return ANY if key is None else f"[{key!r}]" if isinstance(key, str) else f"[{key}]"


# --- path relations -------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _intersects(p: tuple[str, ...], q: tuple[str, ...]) -> bool:
    """Do the two path patterns name at least one common concrete path?"""
    if not p:
        return all(is_any_depth(e) for e in q)
    if not q:
        return all(is_any_depth(e) for e in p)
    a, b = p[0], q[0]
    if is_any_depth(a):  # matches nothing more, or swallows q's first element
        return _intersects(p[1:], q) or _intersects(p, q[1:])
    if is_any_depth(b):
        return _intersects(p, q[1:]) or _intersects(p[1:], q)
    if is_any(a) or is_any(b) or a == b:
        return _intersects(p[1:], q[1:])
    return False


def is_exact(ref: Ref) -> bool:
    """Does the path name one module exactly (no loop element or wildcard in it)?"""
    return not any(is_any(e) or is_any_depth(e) for e in ref.path)


def may_be_same(a: Ref, b: Ref) -> bool:
    return a.root is b.root and _intersects(a.path, b.path)


def may_contain(outer: Ref, inner: Ref) -> bool:
    """May ``outer`` be ``inner`` or one of its ancestors?"""
    return outer.root is inner.root and _intersects(outer.path + (ANY_DEPTH,), inner.path)


def may_overlap(a: Ref, b: Ref) -> bool:
    """May the two module subtrees share a module (one contains the other)?"""
    return may_contain(a, b) or may_contain(b, a)


def is_strict_ancestor(outer: Ref, inner: Ref) -> bool:
    """Is ``outer`` certainly a proper ancestor of ``inner``?

    Requires an ``outer`` path that names one module (concrete, or a loop's numbered wildcard)
    and that ``inner`` extends by at least one level.
    """
    if outer.root is not inner.root or any(e == ANY or is_any_depth(e) for e in outer.path):
        return False
    n = len(outer.path)
    if inner.path[:n] != outer.path:
        return False
    return any(not is_any_depth(element) for element in inner.path[n:])


@dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    cls: ClassInfo | None

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def qualname(self) -> str:
        return f"{self.cls.name}.{self.name}" if self.cls else self.name

    @cached_property
    def decorator_names(self) -> frozenset[str]:
        """The last component of each decorator's name (``property``, ``setter``, ``no_grad``)."""
        found = set()
        for decorator in self.node.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            found.add(dotted(target).rpartition(".")[2])
        return frozenset(found)

    @property
    def is_property(self) -> bool:
        """Does reading the attribute run it (``@property``, ``@cached_property``)?"""
        return bool(self.decorator_names & {"property", "cached_property"})

    @cached_property
    def is_accessor(self) -> bool:
        """Is its body (a docstring aside) one ``return`` of an expression that calls nothing
        (``return self._a if self._a is not None else self._b``)? Expanding it costs the size of
        that expression, whatever the arguments."""
        returned = sole_return(self.node)
        return returned is not None and runs_no_code(returned)


@dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    bases: tuple[Value, ...] = ()  # filled when the class statement is interpreted
    attributes: set[str] = field(default_factory=set)  # what its body assigns, filled then too

    @property
    def name(self) -> str:
        return self.node.name.value

    def mro(self) -> Iterator[ClassInfo]:
        """This class, then its same-file bases depth-first (enough for single inheritance)."""
        yield self
        for base in self.bases:
            if isinstance(base, Class) and base.info is not self:
                yield from base.info.mro()

    def method(self, name: str) -> FunctionInfo | None:
        for cls in self.mro():
            if name in cls.methods:
                return cls.methods[name]
        return None

    def defines(self, name: str) -> bool:
        """Does the class, or a base class of the project's, define ``name`` (a method, a property
        or a class attribute)?"""
        return any(name in cls.methods or name in cls.attributes for cls in self.mro())

    def external_bases(self) -> Iterator[str]:
        """Resolved names of the bases defined outside this file (e.g. ``torch.optim.Optimizer``)."""
        for cls in self.mro():
            for base in cls.bases:
                if isinstance(base, Symbol):
                    yield base.qname


@dataclass(frozen=True)
class RankGuard:
    """Code that runs on some ranks only: under ``node`` (an ``if`` test, an early exit, a
    ``@rank_zero_only`` function), on ``ranks`` (:class:`GuardRanks`).
    ``depth`` is the call depth of the guarded code: ``event.frames()[depth]`` is the statement
    inside the guard that (directly or through helpers) produced an event."""

    node: cst.CSTNode
    ranks: GuardRanks
    depth: int = 0
    arm: tuple[int, int] | None = None  # (id of the `if`, arm index) for the two arms of one test


@dataclass(frozen=True)
class Context:
    """Where an event happens. Shared by all events of a block, so cheap to keep per event."""

    branches: tuple[tuple[int, int], ...] = ()  # (id of an if/try node, arm index)
    # (condition, truth) for each test this code runs under whose value cannot change between two
    # tests (:class:`Condition`): two `if`s on one setting, `if tie:` and `if not tie:`, exclude each other.
    conditions: tuple[tuple[Condition, bool], ...] = ()
    rank_guard: RankGuard | None = None
    no_grad: bool = False
    meta_device: bool = False
    loops: tuple[cst.CSTNode, ...] = ()
    forward_of: tuple[Ref, ...] = ()  # modules whose forward() this code runs inside
    managers: tuple[Value, ...] = ()  # values of the enclosing `with` items
    # Modules a type test proved are no FSDP2 modules here (`isinstance(m, FSDPModule)` failed, or
    # `m` is a DDP/FSDP1 wrapper): in this arm nothing in them is sharded, whatever else ran.
    not_fsdp2: tuple[Ref, ...] = ()
    # Pairs of values (modules, or choices of them) an identity test proves are different objects here.
    distinct: tuple[tuple[Value, Value], ...] = ()
    # Values a type test (`isinstance(x, DTensor)`, `hasattr(x, "full_tensor")`) requires to be
    # DTensors here: the code runs only if they are.
    dtensor_tested: tuple[Value, ...] = ()
    # Modules a type test (`isinstance(m, FSDPModule)`) requires to be FSDP2 modules here: the code
    # runs only if they were sharded before it.
    fsdp2_tested: tuple[Ref, ...] = ()
    # Values a type test proves are no DTensors here (the other arm of `isinstance(x, DTensor)`,
    # also of `isinstance(p.grad, DTensor)` for a parameter `p`): a parameter, or a gradient.
    not_dtensor: tuple[Value, ...] = ()
    # What encloses this code in its own function (a function's body starts afresh, see `in_function`):
    if_nodes: tuple[int, ...] = ()  # ids of the `if`s and conditional expressions it is in (their test or an arm)
    # The source of each `x` an `isinstance(x, ...DTensor...)` checks in the test of an `if` it is in.
    dtensor_checks: tuple[str, ...] = ()
    # In the arm of a test on a parameter the call left to its default that the default rules out
    # (`if use_barriers:` with `use_barriers=False`): it runs only for callers that pass the argument.
    against_default: bool = False
    asserted: bool = False  # in an `assert`, or in a call of an `assert...` function (`self.assertLess(...)`)
    # Through calls too: ids of the `if`s and conditional expressions whose test is being evaluated.
    testing: tuple[int, ...] = ()
    # Ids of the `if`s this code runs past whose other arm ends in `continue`, `break` or `return`
    # (`if torch.isnan(loss): continue`): the code runs only on the paths that did not skip it.
    skipped: tuple[int, ...] = ()
    # Those of the `skipped` ifs that skip on this rank's own data: the exiting arm runs when a value
    # is None or empty (`if batch is None: continue`, `if len(batch) == 0: return` in a step function).
    data_skips: tuple[cst.If, ...] = ()
    # The `if`s and conditional expressions this code runs in an arm of that runs only when a value is
    # not None and not empty (`if pixel_values is not None: feats = self.vision(pixel_values)`).
    data_arms: tuple[cst.If | cst.IfExp, ...] = ()

    def with_(self, **changes: object) -> Context:
        """This context with some fields changed: ``dataclasses.replace``, without its cost (the
        interpreter derives a context for every branch and call)."""
        if not changes.keys() <= _CONTEXT_FIELDS:
            raise TypeError(f"Context has no field {sorted(changes.keys() - _CONTEXT_FIELDS)}")
        changed = object.__new__(Context)
        changed.__dict__.update(self.__dict__, **changes)
        changed.__dict__.pop("arms", None)  # derived from the fields: computed afresh
        return changed

    @cached_property
    def arms(self) -> dict[int, int]:
        """``branches`` as a map: the arm each branch node runs."""
        return dict(self.branches)

    def in_function(self) -> Context:
        """The context a called function's body starts from: what encloses the call site does not
        enclose the body."""
        if not (self.if_nodes or self.dtensor_checks or self.asserted):
            return self
        return self.with_(if_nodes=(), dtensor_checks=(), asserted=False)


_CONTEXT_FIELDS = frozenset(field.name for field in fields(Context))

# The key of ``Event.kwargs`` under which a ``**mapping`` whose keys are unknown is kept.
UNKNOWN_KEYWORDS = "**"


@dataclass(eq=False)
class Event:
    """One thing the code does, in execution order.

    ``kind`` (:class:`EventKind`) says what it records. ``result`` is set once the call it
    records has been evaluated: the event is recorded first, so that it precedes the events of
    the call it records. ``stack`` holds the call sites through which this event was reached from the entry point.
    """

    index: int
    kind: EventKind
    node: cst.CSTNode
    stack: tuple[cst.CSTNode, ...]
    ctx: Context
    name: str | None = None
    qname: str | None = None
    receiver: Value | None = None
    args: tuple[Value, ...] = ()
    kwargs: dict[str, Value] = field(default_factory=dict)
    result: Value | None = None

    def arg(self, position: int, keyword: str | None = None) -> Value | None:
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        return self.args[position] if position < len(self.args) else None

    def may_pass(self, keyword: str) -> bool:
        """Is ``keyword`` given, or may it be, inside a ``**mapping`` whose keys are unknown?"""
        return keyword in self.kwargs or UNKNOWN_KEYWORDS in self.kwargs

    @cached_property
    def targets(self) -> tuple[Ref, ...]:
        """For ``fully_shard`` calls: the modules sharded, in the order they are sharded."""
        first = self.arg(0, "module")
        return () if first is None else _modules_in(first)

    @cached_property
    def groups(self) -> tuple[tuple[Ref, ...], ...]:
        """For ``fully_shard`` calls: the modules of each group the call makes. One call makes one
        group; a call in a loop over a literal list (``for m in [a, b]: fully_shard(m)``) makes one
        per item."""
        first = self.arg(0, "module")
        if first is None:
            return ()
        items = first.options if isinstance(first, Choice) and first.sequential else (first,)
        return tuple(group for group in map(_modules_in, items) if group)

    def frames(self) -> tuple[cst.CSTNode, ...]:
        return self.stack + (self.node,)

    def exclusive_with(self, other: Event) -> bool:
        """Can the two events never happen in the same run (different arms of one branch, or
        incompatible facts about one tested setting: :mod:`fsdp2_lint.analysis.conditions`)?"""
        mine = dict(self.ctx.branches)
        if any(node in mine and mine[node] != arm for node, arm in other.ctx.branches):
            return True
        return exclusive(self.ctx.conditions, other.ctx.conditions)


def _modules_in(value: Value) -> tuple[Ref, ...]:
    modules = (ref for item in walk_contents(value) for ref in refs(item) if ref.root.kind is not ObjKind.CONTAINER)
    return tuple(dict.fromkeys(modules))


# --- one module, one name ----------------------------------------------------------------------


def canonical(ref: Ref) -> Ref:
    """The same module named from its outermost owner (``self.model`` for a model stored there)."""
    root, path = ref.root, ref.path
    while root.parent is not None:
        owner = root.parent
        root, path = owner.root, owner.path + path
    return ref if root is ref.root else Ref(root, path, ref.order)


def strict_ancestor(outer: Ref, inner: Ref) -> bool:
    return is_strict_ancestor(canonical(outer), canonical(inner))


def may_be_wrapper(value: Value | None) -> bool:
    """May the value be a DDP or FSDP1 wrapper? (Those have `no_sync`, `.module`, ...; code that
    receives either a wrapper or an FSDP2 model usually checks which one it has.)"""
    return value is not None and any(
        isinstance(option, Ref) and option.root.wrapped is not None and not option.path for option in options(value)
    )


# Bases that say nothing about who drives an object's life cycle.
_PLAIN_BASES = ("torch.", "builtins.", "abc.", "typing.")


def framework_owned(ref: Ref) -> bool:
    """Is the module held by an object whose class builds on a base class from outside torch
    (``LightningModule``, a project's ``BaseTrainer``)? Code the file does not show then drives
    it: Lightning, for one, materialises a meta-device model itself after ``configure_model``."""
    cls = canonical(ref).root.cls
    return cls is not None and any(not base.startswith(_PLAIN_BASES) for base in cls.external_bases())


def report_node(event: Event, cause: Event) -> cst.CSTNode:
    """Where to report ``event`` when ``cause`` makes it wrong: in the innermost frame the two
    share, so a misordered pair of helper calls is reported at the caller's call of the helper,
    not inside a helper that is correct on its own."""
    mine, theirs = event.frames(), cause.frames()
    for depth, node in enumerate(mine):
        if depth >= len(theirs) or theirs[depth] is not node:
            return node
    return event.node
