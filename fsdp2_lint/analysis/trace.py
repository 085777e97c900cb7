"""A :class:`Trace`: the events of one entry point in execution order, with the questions rules ask
of them ("was this module sharded before this event?") instead of walking the syntax tree.

Same-file helpers and methods are expanded in place (a call to ``shard_model(model)`` contributes
the ``fully_shard`` events it contains, with ``model`` bound to the caller's object).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.model import (
    Class,
    ClassInfo,
    Event,
    EventKind,
    Obj,
    ObjKind,
    Params,
    Ref,
    Symbol,
    Value,
    canonical,
    may_be_same,
    may_be_wrapper,
    may_contain,
    may_overlap,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted


@dataclass(eq=False)
class Trace:
    """The events of one entry point, with indexes that rules query."""

    entry: str
    events: list[Event]
    instance: Ref | None = None  # `self` of a method analysed as an entry point
    # Attributes other methods of the class shard, each with the `fully_shard` calls that do.
    assumed_shards: dict[Ref, list[Event]] = field(default_factory=dict)
    # Attributes of the instance that other methods of the class set to an optimizer over sharded parameters.
    assumed_optimizers: list[Ref] = field(default_factory=list)
    body_start: int = 0  # a method's: its first event after its class's `__init__` (past the end for `__init__`)

    @property
    def assumed_sharded(self) -> list[Ref]:
        """The attributes other methods of the class shard."""
        return list(self.assumed_shards)

    @cached_property
    def shards(self) -> list[Event]:
        """The ``fully_shard`` calls that can run: not those under ``isinstance(m, FSDPModule)``
        (re-sharding parts of a model already sharded) where ``m`` is a model this run built and
        never sharded before."""
        calls = self.calls(apis.FULLY_SHARD)
        return [
            call for call in calls if not any(self._never_sharded(ref, call, calls) for ref in call.ctx.fsdp2_tested)
        ]

    @cached_property
    def sharded_targets(self) -> frozenset[Ref]:
        """What the ``fully_shard`` calls that can run shard, each named from its outermost owner."""
        return frozenset(canonical(target) for shard in self.shards for target in shard.targets)

    def _never_sharded(self, ref: Ref, at: Event, shards: list[Event]) -> bool:
        """Is ``ref`` a module built in this run (not one the caller or the instance brings, which
        code we cannot see may have sharded) that no ``fully_shard`` before ``at`` applies to?"""
        if ref.root.kind is not ObjKind.NEW or (self.instance is not None and may_contain(self.instance, ref)):
            return False
        return not any(
            shard.index < at.index and any(may_be_same(canonical(target), ref) for target in shard.targets)
            for shard in shards
        )

    @cached_property
    def _by_qname(self) -> dict[str, list[Event]]:
        index: dict[str, list[Event]] = {}
        for event in self.events:
            if event.kind is EventKind.CALL and event.qname:
                index.setdefault(event.qname, []).append(event)
        return index

    @cached_property
    def _by_name(self) -> dict[str, list[Event]]:
        index: dict[str, list[Event]] = {}
        for event in self.events:
            if event.kind in (EventKind.METHOD, EventKind.ATTR) and event.name:
                index.setdefault(event.name, []).append(event)
        return index

    @cached_property
    def _calls_at(self) -> dict[int, list[Event]]:
        index: dict[int, list[Event]] = {}
        for event in self.events:
            if event.kind is EventKind.CALL:
                index.setdefault(id(event.node), []).append(event)
        return index

    @cached_property
    def _invocations_at(self) -> dict[int, list[Event]]:
        index: dict[int, list[Event]] = {}
        for event in self.events:
            if event.kind in (EventKind.METHOD, EventKind.INVOKE):
                index.setdefault(id(event.node), []).append(event)
        return index

    def invocations_at(self, node: cst.CSTNode) -> list[Event]:
        """The method calls and module calls (``m.f(...)``, ``m(...)``) recorded at ``node``."""
        return self._invocations_at.get(id(node), [])

    def other_callees(self, call: Event) -> set[str | None]:
        """What else the call may be calling: a callee bound differently on two paths
        (``from fsdp import MixedPrecision`` or ``... MixedPrecisionPolicy as MixedPrecision``)
        records one event per function, all at the same call."""
        return {event.qname for event in self._calls_at.get(id(call.node), ()) if event.qname != call.qname}

    def calls(self, *qnames: str) -> list[Event]:
        found = [event for qname in qnames for event in self._by_qname.get(qname, ())]
        return sorted(found, key=lambda event: event.index) if len(qnames) > 1 else found

    def methods(self, name: str, kind: EventKind = EventKind.METHOD) -> list[Event]:
        """``receiver.name(...)`` calls (``METHOD``) or ``receiver.name`` reads (``ATTR``)."""
        return [event for event in self._by_name.get(name, ()) if event.kind == kind]

    def of_kind(self, kind: EventKind) -> Iterator[Event]:
        return (event for event in self.events if event.kind == kind)

    @cached_property
    def optimizers(self) -> list[Event]:
        """Events that construct an optimizer (``event.result`` is the optimizer)."""
        return [
            event
            for event in self.events
            if isinstance(event.result, Ref)
            and event.result.root.kind is ObjKind.OPTIMIZER
            and event.result.root.event is event
        ]

    def mentions(self, obj: Obj, after: int = -1) -> Iterator[Event]:
        """Events after ``after`` that use ``obj``: as receiver, argument, stored or returned value."""
        return (event for event in self._by_object.get(id(obj), ()) if event.index > after)

    @cached_property
    def _by_object(self) -> dict[int, list[Event]]:
        """The events that use each object (by the id of its root), in order: each event's values are
        walked once, not once per object a rule asks about."""
        index: dict[int, list[Event]] = {}
        for event in self.events:
            values = (
                event.receiver,
                event.result if event.kind is EventKind.RETURN else None,
                *event.args,
                *event.kwargs.values(),
            )
            roots = {id(ref.root) for value in values if value is not None for ref in _refs_inside(value)}
            for root in roots:
                index.setdefault(root, []).append(event)
        return index

    def obtained(self, value: Value, before: Event) -> Event | None:
        """The last event before ``before`` whose result holds ``value``: where the code got it (a
        ``torch.load``, an attribute read of ``self.state``, a helper's return). A finding about a
        value handed to a helper goes in the innermost function that runs both this and the use."""
        for event in reversed(self.events[: before.index]):
            if event.result is not None and any(option == value for option in walk_contents(event.result)):
                return event
        return None

    def handed_off(self, modules: list[Ref], after: int, parameters: bool = False) -> Event | None:
        """The first event after ``after`` that gives one of ``modules`` to code this trace does
        not show: stored in an attribute or a container, returned from the entry point, or passed
        to a function or method outside torch and the builtins. ``parameters``: giving their
        parameters counts too (``reader.read_into(name, param)`` may write them)."""
        wanted = [canonical(module) for module in modules]
        gives = _gives_module_or_parameters if parameters else _touches
        for event in self.events[after + 1 :]:
            if event.kind is EventKind.STORE and _touches(event.receiver, wanted):
                continue  # a module storing its own parts (`self.layers = ...` in its __init__)
            if event.kind is EventKind.STORE or (event.kind is EventKind.RETURN and not event.stack):
                values = event.args if event.kind is EventKind.STORE else (event.result,)
            elif event.kind in (EventKind.CALL, EventKind.METHOD) and not (event.qname or "").startswith(
                ("torch.", "builtins.")
            ):
                values = (*event.args, *event.kwargs.values())
            else:
                continue
            if any(gives(value, wanted) for value in values):
                return event
        return None

    def optimizes_sharded(self, optimizer: Obj, at: Event | None = None) -> bool:
        """Was the optimizer given its parameters after their module was sharded (its state and
        parameters are DTensors)? False for an optimizer built outside this trace, and, seen from
        the event ``at``, for one whose modules a type test there proved unsharded."""
        if optimizer.params is None or optimizer.event is None or optimizer.event not in self.events:
            return False
        for source in optimizer.params.sources:
            if at is not None and _proved_unsharded(source.ref, at):
                continue
            captured = source.captured_at if source.captured_at is not None else optimizer.event.index
            if self.sharded_overlap(source.ref, self.events[min(captured + 1, len(self.events) - 1)]):
                return True
        return False

    def sharded_optimizer(self, ref: Ref, at: Event | None = None) -> bool:
        """Is ``ref`` an optimizer over sharded parameters: one this trace built, or an attribute
        of the instance that another method of the class set to one (``self.optimizer``)?"""
        if ref.root.kind is ObjKind.OPTIMIZER and not ref.path:
            return self.optimizes_sharded(ref.root, at)
        return any(may_be_same(slot, canonical(ref)) for slot in self.assumed_optimizers)

    # --- sharding questions ----------------------------------------------------------------

    def sharded_later(self, ref: Ref, event: Event) -> Event | None:
        """The first event after ``event`` that shards ``ref`` (or a module inside or around it),
        or gives it to an outside helper named for sharding (``prepare_fully_shard(model)``)."""
        whole = [canonical(ref)]
        for later in self.events[event.index + 1 :]:
            if later.kind is EventKind.CALL and later.qname == apis.FULLY_SHARD:
                if any(_touches(target, whole) for target in later.targets):
                    return later
            elif later.kind in (EventKind.CALL, EventKind.METHOD) and apis.is_sharding_helper(
                later.qname or later.name or ""
            ):
                if any(_touches(value, whole) for value in (*later.args, *later.kwargs.values())):
                    return later
        return None

    def shards_between(self, start: int, end: int, event: Event) -> Iterator[tuple[Event, Ref]]:
        """(shard event, sharded module) pairs strictly between two event indexes that can
        happen in the same run as ``event``."""
        for shard in self.shards:
            if start < shard.index < end and not shard.exclusive_with(event):
                for target in shard.targets:
                    if may_have_sharded(shard, canonical(target), event):
                        yield shard, canonical(target)

    def shards_before(self, event: Event, since: int = -1) -> Iterator[tuple[Event, Ref]]:
        return self.shards_between(since, event.index, event)

    def assumed_at(self, event: Event) -> list[Ref]:
        """The attributes other methods of the class may have sharded before ``event``: none while
        the class's ``__init__`` runs (no other method has yet), nor where each of their
        `fully_shard` calls excludes ``event`` (another arm of a setting, another strategy object)."""
        if event.index < self.body_start:
            return []
        return [ref for ref, shards in self.assumed_shards.items() if not all(map(event.exclusive_with, shards))]

    def _assumed_for(self, ref: Ref, event: Event) -> list[Ref]:
        """:meth:`assumed_at`, as far as ``ref`` goes: none for a module this method's own code
        built (``self.encoder = Encoder()``, then its load): another method's `fully_shard` of that
        attribute sharded the module it held, not this new one."""
        creation = ref.root.event
        built_here = (
            creation is not None
            and self.body_start <= creation.index < len(self.events)
            and self.events[creation.index] is creation
        )
        return [] if built_here else self.assumed_at(event)

    def is_fsdp_module(self, ref: Ref, event: Event) -> Event | bool:
        """Has ``fully_shard`` been applied to ``ref`` itself (maybe) before ``event``?

        Returns the shard event, or True for a module sharded by another method of the class.
        """
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event):
            if may_be_same(target, canonical(ref)):
                return shard
        return any(may_be_same(assumed, canonical(ref)) for assumed in self._assumed_for(ref, event))

    def holds_fsdp_module(self, ref: Ref, event: Event) -> Event | bool:
        """Has ``fully_shard`` been applied to ``ref`` or to a module inside it (maybe) before
        ``event``? (Copying ``ref`` then copies an FSDP module; a module that only an ancestor's
        ``fully_shard`` manages is a plain module holding DTensors.)"""
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event):
            if may_contain(canonical(ref), target):
                return shard
        return any(may_contain(canonical(ref), assumed) for assumed in self._assumed_for(ref, event))

    def inside_through_alias(self, outer: Ref, inner: Ref) -> bool:
        """Is ``inner`` inside ``outer`` through an object stored in two places? An object keeps the
        name of its first store (``self.draft = draft`` makes it ``self.draft``); a later store in an
        attribute under ``outer`` (``wrapper.draft = draft``, then ``self.wrapper = wrapper``) makes
        the same modules part of ``outer`` too."""
        whole, part = canonical(outer), canonical(inner)
        return any(
            any(may_contain(whole, canonical(owner).child(store.name)) for owner in refs(store.receiver))
            and any(may_contain(canonical(value), part) for value in refs(store.args[0]))
            for store in self.stores
        )

    @cached_property
    def stores(self) -> list[Event]:
        """The run's attribute stores (``owner.name = value``)."""
        return [event for event in self.of_kind(EventKind.STORE) if event.name and event.args]

    def is_managed(self, ref: Ref, event: Event) -> Event | bool:
        """Is ``ref`` or one of its ancestors sharded before ``event`` (its params are DTensors)?"""
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event):
            if may_contain(target, canonical(ref)):
                return shard
        return any(may_contain(assumed, canonical(ref)) for assumed in self._assumed_for(ref, event))

    def sharded_overlap(self, ref: Ref, event: Event, since: int = -1) -> Event | bool:
        """Is a module inside ``ref``'s subtree, or an ancestor of it, sharded after ``since``
        and before ``event`` (some of ``ref``'s parameters are DTensors by then)?"""
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event, since):
            if may_overlap(target, canonical(ref)):
                return shard
        if since >= 0:
            return False
        return any(may_overlap(assumed, canonical(ref)) for assumed in self._assumed_for(ref, event))


def fsdp2_model(trace: Trace, event: Event, value: Value | None) -> bool:
    """Is the value a model sharded with ``fully_shard`` (at ``event``) and never an FSDP1/DDP
    wrapper? The question FSDP1-API rules ask of the model they are given."""
    if value is None or may_be_wrapper(value):
        return False
    return any(trace.sharded_overlap(ref, event) for ref in refs(value))


def may_have_sharded(shard: Event, target: Ref, event: Event) -> bool:
    """May ``shard`` have sharded ``target`` (canonical), seen from ``event``? Not where an identity
    test ``event`` runs under proves the module ``shard`` was given is not ``target``
    (``fully_shard(inner)``, then ``if model is not inner: fully_shard(model)``)."""
    return not proved_distinct(shard.arg(0, "module"), target, event)


def proved_distinct(a: Value | None, b: Value | None, event: Event) -> bool:
    """Does an identity test ``event`` runs under prove ``a`` and ``b`` (each a value as given, or
    one module) are different objects?"""
    return any(
        _matches(one, a) and _matches(other, b) for pair in event.ctx.distinct for one, other in (pair, pair[::-1])
    )


def _matches(recorded: Value, value: Value | None) -> bool:
    if recorded == value:
        return True
    return isinstance(recorded, Ref) and isinstance(value, Ref) and canonical(recorded) == canonical(value)


def read_by_name(module: Ref) -> bool:
    """Is ``module`` an attribute read by name (``model.encoder``), not an item
    (``model.layers[0]``) or the root? Such a name may hold a bound method as well as a module."""
    return bool(module.path) and module.path[-1].isidentifier()


def plain_attribute(holder: Ref) -> bool:
    """Is ``holder`` (``obj.name``) certainly no parameter, buffer or module: an attribute of an
    instance of a project class that is no ``nn.Module`` (a config: ``model_args.norm_eps``), or
    that its class declares a plain scalar (``eps: float = 1e-6``)?"""
    if len(holder.path) != 1 or holder.root.cls is None:
        return False
    cls = holder.root.cls
    return _declares_scalar(cls, holder.path[0]) or plain_class(cls)


def plain_class(cls: ClassInfo) -> bool:
    """Is the project class certainly no ``nn.Module`` (a config, an enum, a named tuple): are
    the bases it and its project bases name all plain ones?"""
    return all(
        isinstance(base, Class) or (isinstance(base, Symbol) and base.qname in _PLAIN_BASES)
        for each in cls.mro()
        for base in each.bases
    )


# Bases of classes that are no nn.Module: plain objects, configs, enums, named tuples.
_PLAIN_BASES = frozenset(
    {"builtins.object", "abc.ABC", "typing.Generic", "typing.NamedTuple", "typing.Protocol", "enum.Enum"}
)
_SCALARS = frozenset({"int", "float", "bool", "str", "complex"})


def _declares_scalar(cls: ClassInfo, name: str) -> bool:
    return any(
        isinstance(line, cst.AnnAssign)
        and isinstance(line.target, cst.Name)
        and line.target.value == name
        and dotted(line.annotation.annotation) in _SCALARS
        for each in cls.mro()
        for statement in each.node.body.body
        if isinstance(statement, cst.SimpleStatementLine)
        for line in statement.body
    )


def _proved_unsharded(ref: Ref, event: Event) -> bool:
    target = canonical(ref)
    return any(may_contain(proved, target) for proved in event.ctx.not_fsdp2)


def _touches(value: Value | None, modules: list[Ref]) -> bool:
    return value is not None and any(
        may_overlap(canonical(ref), module) for ref in _refs_inside(value) for module in modules
    )


def _gives_module_or_parameters(value: Value | None, modules: list[Ref]) -> bool:
    return _touches(value, modules) or _holds_parameters_of(value, modules)


def _holds_parameters_of(value: Value | None, modules: list[Ref]) -> bool:
    params = [option for option in walk_contents(value) if isinstance(option, Params)] if value is not None else []
    return any(may_overlap(canonical(s.ref), module) for p in params for s in p.sources for module in modules)


def _refs_inside(value: Value) -> Iterator[Ref]:
    for option in walk_contents(value):
        if isinstance(option, Ref):
            yield option


def share_class_sharding(traces: list[Trace]) -> None:
    """A method that no code in the file calls runs at an order we cannot see, so modules that
    other methods of its class shard (``self.model``) are taken as sharded from its start, and
    attributes they set to an optimizer over sharded parameters (``self.optimizer``) as holding one."""
    sharded: dict[ClassInfo, list[tuple[Event, tuple[str, ...]]]] = {}
    optimizers: dict[ClassInfo, list[tuple[Trace, tuple[str, ...]]]] = {}
    for trace in traces:
        instance = trace.instance
        if instance is None:
            continue
        for shard in trace.shards:
            for target in shard.targets:
                target = canonical(target)
                if target.root is instance.root:
                    sharded.setdefault(instance.root.cls, []).append((shard, target.path))
        for store in trace.of_kind(EventKind.STORE):
            for owner in refs(store.receiver):
                owner = canonical(owner)
                if owner.root is instance.root and any(trace.sharded_optimizer(ref) for ref in refs(store.args[0])):
                    optimizers.setdefault(instance.root.cls, []).append((trace, owner.path + (store.name,)))
    for trace in traces:
        instance = trace.instance
        if instance is None:
            continue
        # a `fully_shard` this trace runs itself (in `__init__`, run before the method) is seen in order
        own = {shard.node for shard in trace.shards}
        shards: dict[tuple[str, ...], list[Event]] = {}
        for shard, path in sharded.get(instance.root.cls, ()):
            if shard.node not in own:
                shards.setdefault(path, []).append(shard)
        trace.assumed_shards = {Ref(instance.root, path): shards[path] for path in sorted(shards)}
        paths = {path for owner, path in optimizers.get(instance.root.cls, ()) if owner is not trace}
        trace.assumed_optimizers = [Ref(instance.root, path) for path in sorted(paths)]
