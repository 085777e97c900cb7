"""Function summaries: what a call of a same-file function does, computed once per distinct input
and replayed at every later call with that input, so that a file of mutually calling helpers costs
time linear in its number of functions.

**The key** is everything the callee can observe (:func:`key`): the function, its bound receiver,
its arguments (constants keyed with their type: ``1`` is not ``True``), the caller's
:class:`~fsdp2_lint.analysis.model.Context` (branches, loops, guards, ``with`` blocks), the call's
depth (the frames above it, for the stacks of its events and the depth its guards record; the
functions and lambdas being expanded, for the depth bound), whether it has a call site, the star
imports seen, and the version of the shared state (:class:`~.state.World`). The shared state is what a
callee reads besides its arguments: the heap and the module's variables, both :class:`~.state.WatchedDict`
that count their writes, and the objects themselves, whose changes (a store, an augmented
assignment, an item added to a container, a torch call that adopts its arguments) count too. So a
summary is looked up only where nothing it could read has changed since it was made. Functions
whose variables come from an enclosing function (closures) and calls given a closure are not
keyed: they are expanded every time.

**The summary** holds the events the first expansion recorded and its return value. Replaying it
appends the same events with the indexes that follow the trace, the stack of the new call site
(the callee's frames below it are kept) and the same contexts, and returns the same value; values
that name an event of the call (parameters captured, a state dict taken) or a loop of the call
(``"*7"``) are renumbered as a fresh expansion would number them. A summary is kept only for a
call whose replay is exactly what expanding it again would record (:func:`summarize`):

- it wrote no shared state (no attribute or item stored, no global bound, no object changed):
  such a call's effect on later code is not in its events, so it is expanded each time;
- no object it created appears in its events or its result (a fresh expansion would create new
  ones: identity matters to rules), and no function it defined escapes;
- nothing it did depends on the index of the event before the call (a value captured there is
  ambiguous between an argument and the call's own start).

Depth and recursion are decided at the call as before (``MAX_CALL_DEPTH``, ``MAX_RECURSION``, on
the functions being expanded). Which functions those are is not in the key, only how many: a
summary made below one recursive call is replayed as it is below another, with the nested calls
its first expansion was allowed.

**The bound.** A function is expanded (rather than replayed) at most
``MAX_EXPANSIONS_PER_FUNCTION`` times per file; a file interprets at most ``MAX_STEPS``
statements and replays at most ``MAX_REPLAYED`` events (a replay that would pass it is not made).
A call past the bound is analysed like a call of a function of another file: its events are not
in the caller's trace, its result is unknown, and the function, if no call expanded it, is still
analysed as an entry point of its own. Entry points themselves always run.

Another project module whose own code cannot satisfy a rule (its tokens fail the prefilter) is
followed only for the values a call passes in (a model built in ``models.py``, a config read in
``config.py``), and only for ``MAX_VALUE_FLOW_STEPS`` statements per entry point: a framework's
trainer a test constructs is otherwise run to its end for nothing a rule can see. All other
modules together get ``MAX_FOREIGN_STEPS`` statements per file (those for values included): the
training code of a project takes a few thousand (torchtitan, VeOmni, verl: under 10,000), a
framework's god object constructed in each test of a file takes a hundred thousand. Past either
budget, a call the linted file's code makes into such a module is analysed like a call past the
bound.

A budget should not leave a value unknown that the analysis would otherwise know, to code it still
follows: a test on it would run both its arms, and the arm it rules out report what never runs. So
the budget for values is the entry point's own (one per file let the first entry points spend it,
and each later one, running its class's ``__init__`` again, lost the config objects it builds while
still following the modules that read them; an entry point that spends it alone still can); and the
budgets are checked only where the linted file's code calls into another module: a call that
started within them, and a module body, runs to its end with every call inside it followed
(``MAX_STEPS`` still bounds it), never cut short part-way with what its later calls return unknown.
Past a budget, a file runs no more of those modules than the one call running when it ran out and
the bodies of modules it loads later.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

import libcst as cst

from fsdp2_lint.analysis.model import (
    BoundMethod,
    Choice,
    Const,
    Context,
    Derived,
    Event,
    FsdpVersion,
    Function,
    FunctionInfo,
    Iter,
    Lambda,
    ModuleIter,
    Obj,
    Params,
    ParamSource,
    Partial,
    Ref,
    StateDict,
    Super,
    Tuple,
    Value,
    is_loop_element,
)

MAX_EXPANSIONS_PER_FUNCTION = 64  # fresh expansions of one function per file (torch's own sources reach it)
MAX_STEPS = 200_000  # statements interpreted per file
MAX_REPLAYED = 20_000  # events replayed per file (torch's sources and the fixtures replay 506 at most)
MAX_FOREIGN_STEPS = 30_000  # statements per file in other project modules
MAX_VALUE_FLOW_STEPS = 5_000  # of those, in modules followed only for the values passed in


@dataclass(frozen=True)
class Summary:
    """What one expansion recorded: ``events`` from index ``start``, made under the callee's
    frames ``stack``; its ``result``; the loop wildcards it numbered after ``loops_before``
    (``loops``). What its values name: ``objects``; the indexes of events before the call
    (``indexes``) and the numbers of loops before it (``outer_loops``); ``renumber``: whether they
    name events or loops of the call too."""

    events: tuple[Event, ...]
    start: int
    stack: tuple[cst.CSTNode, ...]
    result: Value
    loops_before: int
    loops: int
    objects: tuple[Obj, ...]
    indexes: frozenset[int]
    outer_loops: frozenset[int]
    renumber: bool


class Summaries:
    """A file's summary table and the bound on its calls, with what they cost so far."""

    def __init__(self) -> None:
        self.table: dict[tuple, Summary] = {}
        self.expansions: Counter[FunctionInfo] = Counter()  # fresh expansions per function
        self.hits = 0  # calls answered by replaying a summary
        self.replayed = 0  # events replayed
        self.blocks: dict[int, tuple[int, Summary]] = {}  # first event of a replay -> (its end, the summary)

    def start_entry(self) -> None:
        """Forget the summaries: they describe the previous entry point's trace and heap."""
        self.table.clear()
        self.blocks.clear()

    def exhausted(self, steps: int) -> bool:
        """Has the file spent its work, given the ``steps`` (statements) it interpreted?"""
        return steps > MAX_STEPS or self.replayed > MAX_REPLAYED

    def may_expand(self, info: FunctionInfo, steps: int) -> bool:
        """Whether ``info`` may be expanded once more; if so, the expansion is counted. An accessor
        (``return`` of an expression that calls nothing) costs too little to count."""
        if self.exhausted(steps):
            return False
        if info.is_accessor:
            return True
        if self.expansions[info] >= MAX_EXPANSIONS_PER_FUNCTION:
            return False
        self.expansions[info] += 1
        return True

    def may_replay(self, summary: Summary, steps: int) -> bool:
        """Whether ``summary`` may be replayed; if so, the replay is counted."""
        if self.exhausted(steps) or self.replayed + len(summary.events) > MAX_REPLAYED:
            return False
        self.hits += 1
        self.replayed += len(summary.events)
        return True


# --- the key -----------------------------------------------------------------------------------


def key(
    fn: Function, args: tuple, kwargs: dict, ctx: Context, depth: tuple, site: bool, world: int, stars: int, module_envs
) -> tuple | None:
    """What the call of ``fn`` can observe, or None for a call that is never summarised.
    ``depth``: the frames, functions and lambdas above the call."""
    if fn.closure is not None and fn.closure not in module_envs:
        return None
    inputs = (fn.bound, *args, *kwargs.values())
    if not all(_closure_free(value, module_envs) for value in inputs if value is not None):
        return None
    token = (
        fn.info,
        fn.bound,
        fn.owner,
        tuple(_typed(arg) for arg in args),
        tuple((name, _typed(value)) for name, value in kwargs.items()),
        ctx,
        depth,
        site,
        world,
        stars,
    )
    try:
        hash(token)
    except TypeError:  # a constant Python cannot hash
        return None
    return token


def _typed(value: Value) -> object:
    """``value`` for a key: constants with their type, so that ``1``, ``1.0`` and ``True`` differ."""
    if isinstance(value, Const):
        return (Const, type(value.value), value.value)
    if isinstance(value, (Tuple, Choice)):
        items = value.items if isinstance(value, Tuple) else value.options
        return (type(value), tuple(_typed(item) for item in items), getattr(value, "sequential", None))
    return value


def _closure_free(value: Value, module_envs) -> bool:
    """No function in ``value`` sees variables of an enclosing function (values compare without them)."""
    for option in _values_in(value):
        if isinstance(option, (Function, Lambda)) and option.closure is not None and option.closure not in module_envs:
            return False
    return True


# --- recording ---------------------------------------------------------------------------------


def summarize(interp, start: int, stack: tuple, result: Value, before: tuple[int, int, int]) -> Summary | None:
    """The summary of the expansion that recorded ``interp.events[start:]`` and returned
    ``result``, or None when replaying it would not record what expanding it again would. ``before``: the world version and the loops numbered
    when it started, and a serial below those of the objects it made."""
    world_before, loops_before, first_serial = before
    if interp.world.version != world_before:
        return None  # it wrote shared state
    named = _Named(interp.module_envs)
    events = interp.events
    index = start
    while index < len(events):  # a replay inside it is read from its summary
        block = interp.summaries.blocks.get(index)
        if block is not None:
            index, summary = block
            named.summary(summary)
            continue
        for value in _event_values(events[index]):
            named.value(value)
        index += 1
    named.value(result)
    if named.closures or start - 1 in named.indexes:
        return None  # a function it defined; or the event before the call: an argument's, or the call's start?
    if any(not _preexisting(interp, obj, first_serial) for obj in named.objects.values()):
        return None  # it created an object that a fresh expansion would create anew
    renumber = named.renumber or any(i >= start for i in named.indexes) or any(n > loops_before for n in named.loops)
    return Summary(
        tuple(events[start:]),
        start,
        stack,
        result,
        loops_before,
        interp.loops_seen - loops_before,
        tuple(named.objects.values()),
        frozenset(i for i in named.indexes if i < start),
        frozenset(n for n in named.loops if n <= loops_before),
        renumber,
    )


class _Named:
    """What the values of an expansion name: objects, event indexes, loop numbers, closures."""

    def __init__(self, module_envs) -> None:
        self.module_envs = module_envs
        self.objects: dict[int, Obj] = {}
        self.indexes: set[int] = set()
        self.loops: set[int] = set()
        self.closures = False
        self.renumber = False  # a replay inside names events or loops of its own
        self.seen: set[int] = set()

    def value(self, value: Value) -> None:
        for option in _values_in(value):
            if id(option) in self.seen:
                continue
            self.seen.add(id(option))
            if (
                isinstance(option, (Function, Lambda))
                and option.closure is not None
                and option.closure not in self.module_envs
            ):
                self.closures = True
            self.indexes.update(_indexes(option))
            for ref in _refs_of(option):
                self.objects[id(ref.root)] = ref.root
                self.loops.update(_loop_number(element) for element in ref.path)
            if isinstance(option, StateDict) and isinstance(option.owner, Obj):
                self.objects[id(option.owner)] = option.owner

    def summary(self, summary: Summary) -> None:
        """Take in a replay of ``summary`` (what its values name before the call is unchanged)."""
        self.objects.update((id(obj), obj) for obj in summary.objects)
        self.indexes.update(summary.indexes)
        self.loops.update(summary.outer_loops)
        self.renumber = self.renumber or summary.renumber


def replay(interp, summary: Summary, stack: tuple) -> Value:
    """Record ``summary``'s events as a call whose callee runs under the frames ``stack`` would,
    and return its result."""
    first = len(interp.events)
    shift = _Renumber(summary, first, interp.loops_seen) if summary.renumber else None
    cut = len(summary.stack)
    for event in summary.events:
        if shift is None:
            clone = Event(
                len(interp.events), event.kind, event.node, stack + event.stack[cut:], event.ctx, event.name,
                event.qname, event.receiver, event.args, event.kwargs, event.result,
            )  # fmt: skip
        else:
            clone = Event(
                len(interp.events),
                event.kind,
                event.node,
                stack + event.stack[cut:],
                shift.context(event.ctx),
                event.name,
                event.qname,
                shift.value(event.receiver),
                tuple(shift.value(arg) for arg in event.args),
                {name: shift.value(value) for name, value in event.kwargs.items()},
                shift.value(event.result),
            )
        interp.events.append(clone)
    if summary.events:  # what an empty one's result names is read where the caller uses it
        interp.summaries.blocks[first] = (len(interp.events), summary)
    interp.loops_seen += summary.loops
    return summary.result if shift is None else shift.value(summary.result)


class _Renumber:
    """Moves the event indexes and loop numbers that a summary's values name from those of the
    expansion that made it to those of a new call (as a fresh expansion would number them)."""

    def __init__(self, summary: Summary, events: int, loops: int) -> None:
        self.start, self.offset = summary.start, events - summary.start
        self.loops_before, self.loop_offset = summary.loops_before, loops - summary.loops_before

    def index(self, index: int) -> int:
        return index + self.offset if index >= self.start else index

    def ref(self, ref: Ref) -> Ref:
        path = tuple(self.element(element) for element in ref.path)
        return ref if path == ref.path else Ref(ref.root, path, ref.order)

    def element(self, element: str) -> str:
        number = _loop_number(element)
        if number <= self.loops_before:
            return element
        return f"{element[: len(element) - len(str(number))]}{number + self.loop_offset}"

    def context(self, ctx: Context) -> Context:
        return replace(
            ctx,
            forward_of=tuple(self.ref(ref) for ref in ctx.forward_of),
            managers=tuple(self.value(value) for value in ctx.managers),
            not_fsdp2=tuple(self.ref(ref) for ref in ctx.not_fsdp2),
            distinct=tuple((self.value(a), self.value(b)) for a, b in ctx.distinct),
            fsdp2_tested=tuple(self.ref(ref) for ref in ctx.fsdp2_tested),
            dtensor_tested=tuple(self.value(value) for value in ctx.dtensor_tested),
            not_dtensor=tuple(self.value(value) for value in ctx.not_dtensor),
        )

    def value(self, value):
        if isinstance(value, Ref):
            return self.ref(value)
        if isinstance(value, Choice):
            return Choice(tuple(self.value(option) for option in value.options), value.sequential)
        if isinstance(value, Tuple):
            return Tuple(tuple(self.value(item) for item in value.items))
        if isinstance(value, Params):
            sources = (
                ParamSource(self.ref(s.ref), None if s.captured_at is None else self.index(s.captured_at))
                for s in value.sources
            )
            return Params(frozenset(sources), value.named)
        if isinstance(value, ModuleIter):
            return replace(value, ref=self.ref(value.ref))
        if isinstance(value, StateDict):
            owner = self.ref(value.owner) if isinstance(value.owner, Ref) else value.owner
            return StateDict(owner, self.index(value.at), value.full)
        if isinstance(value, Derived):
            params = self.value(value.params) if value.params is not None else None
            return Derived(value.tags, frozenset(self.index(step) for step in value.steps), params)
        if isinstance(value, FsdpVersion):
            return replace(value, model=self.value(value.model))
        if isinstance(value, Partial):
            kwargs = tuple((name, self.value(item)) for name, item in value.kwargs)
            return Partial(self.value(value.func), tuple(self.value(arg) for arg in value.args), kwargs)
        if isinstance(value, BoundMethod):
            return BoundMethod(self.value(value.receiver), value.name)
        if isinstance(value, Iter):
            return Iter(value.kind, tuple(self.value(part) for part in value.parts))
        if isinstance(value, Super):
            return Super(self.ref(value.receiver), value.cls)
        if isinstance(value, Function) and value.bound is not None:
            return replace(value, bound=self.ref(value.bound))
        return value


# --- walking values ----------------------------------------------------------------------------


def _event_values(event: Event) -> Iterator[Value]:
    if event.receiver is not None:
        yield event.receiver
    yield from event.args
    yield from event.kwargs.values()
    if event.result is not None:
        yield event.result
    ctx = event.ctx
    yield from (
        *ctx.forward_of,
        *ctx.managers,
        *ctx.not_fsdp2,
        *(value for pair in ctx.distinct for value in pair),
        *ctx.fsdp2_tested,
        *ctx.dtensor_tested,
        *ctx.not_dtensor,
    )


def _values_in(value: Value) -> Iterator[Value]:
    """``value`` and the values inside it (not through objects)."""
    stack = [value]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, Choice):
            stack.extend(current.options)
        elif isinstance(current, Tuple):
            stack.extend(current.items)
        elif isinstance(current, Partial):
            stack.extend((current.func, *current.args, *(item for _, item in current.kwargs)))
        elif isinstance(current, BoundMethod):
            stack.append(current.receiver)
        elif isinstance(current, Iter):
            stack.extend(current.parts)
        elif isinstance(current, Super):
            stack.append(current.receiver)
        elif isinstance(current, FsdpVersion):
            stack.append(current.model)
        elif isinstance(current, Derived) and current.params is not None:
            stack.append(current.params)
        elif isinstance(current, Function) and current.bound is not None:
            stack.append(current.bound)


def _refs_of(value: Value) -> Iterator[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, Params):
        yield from (source.ref for source in value.sources)
    elif isinstance(value, ModuleIter):
        yield value.ref
    elif isinstance(value, StateDict) and isinstance(value.owner, Ref):
        yield value.owner


def _indexes(value: Value) -> Iterator[int]:
    if isinstance(value, Params):
        yield from (source.captured_at for source in value.sources if source.captured_at is not None)
    elif isinstance(value, StateDict):
        yield value.at
    elif isinstance(value, Derived):
        yield from value.steps


def _loop_number(element: str) -> int:
    return int(element.lstrip("*")) if is_loop_element(element) or _is_deep_loop(element) else -1


def _is_deep_loop(element: str) -> bool:
    return element[:2] == "**" and element[2:].isdigit()


def _preexisting(interp, obj: Obj, first_serial: int) -> bool:
    """Was ``obj`` there before the call (made before it started, or made by it only as the one
    object a name defined elsewhere or a class namespace always stands for)? A call that wrote no
    shared state cannot have put an object it made anywhere a later call could reach it, so the
    objects in its events and result are the ones it was given or found."""
    if obj.serial < first_serial:
        return True
    lazily_made = (
        *(name.root for scope in interp.scopes for name in scope.free_names.values() if isinstance(name, Ref)),
        *interp.class_objs.values(),
    )
    return any(made is obj for made in lazily_made)
