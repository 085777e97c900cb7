"""The facts every rule reads, computed once per file by :mod:`fsdp2_lint.interp`.

A file is interpreted abstractly from each *entry point* (the module body, and every function
or method that no code in the file calls). Each entry point yields a :class:`Trace`: the
ordered list of what that code does (events, :class:`fsdp2_lint.values.Event`), with same-file
helpers and methods expanded in place (a call to ``shard_model(model)`` contributes the
``fully_shard`` events it contains, with ``model`` bound to the caller's object). Rules ask a
trace questions such as "was this module sharded before this event?" instead of walking the
syntax tree themselves. :class:`FileFacts` holds a file's traces and an index of its syntax
(positions, source text, parents and enclosing statements).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst
from libcst.metadata import CodeRange

from fsdp2_lint import names
from fsdp2_lint.syntax import Layout, child_nodes, dotted, source_lines
from fsdp2_lint.values import (
    Event,
    Obj,
    Ref,
    Value,
    is_strict_ancestor,
    may_be_same,
    may_contain,
    may_overlap,
    options,
    refs,
    walk_contents,
)


def report_node(event: Event, cause: Event) -> cst.CSTNode:
    """Where to report ``event`` when ``cause`` makes it wrong: in the innermost frame the two
    share, so a misordered pair of helper calls is reported at the caller's call of the helper,
    not inside a helper that is correct on its own."""
    mine, theirs = event.frames(), cause.frames()
    for depth, node in enumerate(mine):
        if depth >= len(theirs) or theirs[depth] is not node:
            return node
    return event.node


@dataclass(eq=False)
class Trace:
    """The events of one entry point, with indexes that rules query."""

    entry: str
    events: list[Event]
    instance: Ref | None = None  # `self` of a method analysed as an entry point
    assumed_sharded: list[Ref] = field(default_factory=list)  # sharded by other methods of the class
    # Attributes of the instance that other methods of the class set to an optimizer over sharded parameters.
    assumed_optimizers: list[Ref] = field(default_factory=list)

    @cached_property
    def shards(self) -> list[Event]:
        return self.calls(names.FULLY_SHARD)

    @cached_property
    def _by_qname(self) -> dict[str, list[Event]]:
        index: dict[str, list[Event]] = {}
        for event in self.events:
            if event.kind == "call" and event.qname:
                index.setdefault(event.qname, []).append(event)
        return index

    @cached_property
    def _by_name(self) -> dict[str, list[Event]]:
        index: dict[str, list[Event]] = {}
        for event in self.events:
            if event.kind in ("method", "attr") and event.name:
                index.setdefault(event.name, []).append(event)
        return index

    def calls(self, *qnames: str) -> list[Event]:
        found = [event for qname in qnames for event in self._by_qname.get(qname, ())]
        return sorted(found, key=lambda event: event.index) if len(qnames) > 1 else found

    def methods(self, name: str, kind: str = "method") -> list[Event]:
        """``receiver.name(...)`` calls (``kind="method"``) or ``receiver.name`` reads (``"attr"``)."""
        return [event for event in self._by_name.get(name, ()) if event.kind == kind]

    def of_kind(self, kind: str) -> Iterator[Event]:
        return (event for event in self.events if event.kind == kind)

    @cached_property
    def optimizers(self) -> list[Event]:
        """Events that construct an optimizer (``event.result`` is the optimizer)."""
        return [
            event
            for event in self.events
            if isinstance(event.result, Ref)
            and event.result.root.kind == "optimizer"
            and event.result.root.event is event
        ]

    def mentions(self, obj: Obj, after: int = -1) -> Iterator[Event]:
        """Events after ``after`` that use ``obj``: as receiver, argument, stored or returned value."""
        for event in self.events[after + 1 :]:
            values = (
                event.receiver,
                event.result if event.kind == "return" else None,
                *event.args,
                *event.kwargs.values(),
            )
            if any(ref.root is obj for value in values if value is not None for ref in _refs_inside(value)):
                yield event

    def handed_off(self, modules: list[Ref], after: int) -> Event | None:
        """The first event after ``after`` that gives one of ``modules`` to code this trace does
        not show: stored in an attribute or a container, returned from the entry point, or passed
        to a function or method outside torch and the builtins."""
        wanted = [canonical(module) for module in modules]
        for event in self.events[after + 1 :]:
            if event.kind == "store" and _touches(event.receiver, wanted):
                continue  # a module storing its own parts (`self.layers = ...` in its __init__)
            if event.kind == "store" or (event.kind == "return" and not event.stack):
                values = event.args if event.kind == "store" else (event.result,)
            elif event.kind in ("call", "method") and not (event.qname or "").startswith(("torch.", "builtins.")):
                values = (*event.args, *event.kwargs.values())
            else:
                continue
            if any(_touches(value, wanted) for value in values):
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
        if ref.root.kind == "optimizer" and not ref.path:
            return self.optimizes_sharded(ref.root, at)
        return any(may_be_same(slot, canonical(ref)) for slot in self.assumed_optimizers)

    # --- sharding questions ----------------------------------------------------------------

    def sharded_later(self, ref: Ref, event: Event) -> Event | None:
        """The first event after ``event`` that shards ``ref`` (or a module inside or around it),
        or gives it to an outside helper named for sharding (``prepare_fully_shard(model)``)."""
        whole = [canonical(ref)]
        for later in self.events[event.index + 1 :]:
            if later.kind == "call" and later.qname == names.FULLY_SHARD:
                if any(_touches(target, whole) for target in later.targets):
                    return later
            elif later.kind in ("call", "method") and names.is_sharding_helper(later.qname or later.name or ""):
                if any(_touches(value, whole) for value in (*later.args, *later.kwargs.values())):
                    return later
        return None

    def shards_between(self, start: int, end: int, event: Event) -> Iterator[tuple[Event, Ref]]:
        """(shard event, sharded module) pairs strictly between two event indexes that can
        happen in the same run as ``event``."""
        for shard in self.shards:
            if start < shard.index < end and not shard.exclusive_with(event):
                for target in shard.targets:
                    yield shard, canonical(target)

    def shards_before(self, event: Event, since: int = -1) -> Iterator[tuple[Event, Ref]]:
        return self.shards_between(since, event.index, event)

    def is_fsdp_module(self, ref: Ref, event: Event) -> Event | bool:
        """Has ``fully_shard`` been applied to ``ref`` itself (maybe) before ``event``?

        Returns the shard event, or True for a module sharded by another method of the class.
        """
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event):
            if may_be_same(target, canonical(ref)):
                return shard
        return any(may_be_same(assumed, canonical(ref)) for assumed in self.assumed_sharded)

    def is_managed(self, ref: Ref, event: Event) -> Event | bool:
        """Is ``ref`` or one of its ancestors sharded before ``event`` (its params are DTensors)?"""
        if _proved_unsharded(ref, event):
            return False
        for shard, target in self.shards_before(event):
            if may_contain(target, canonical(ref)):
                return shard
        return any(may_contain(assumed, canonical(ref)) for assumed in self.assumed_sharded)

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
        return any(may_overlap(assumed, canonical(ref)) for assumed in self.assumed_sharded)


def fsdp2_model(trace: Trace, event: Event, value: Value | None) -> bool:
    """Is the value a model sharded with ``fully_shard`` (at ``event``) and never an FSDP1/DDP
    wrapper? The question FSDP1-API rules ask of the model they are given."""
    if value is None or may_be_wrapper(value):
        return False
    return any(trace.sharded_overlap(ref, event) for ref in refs(value))


def _proved_unsharded(ref: Ref, event: Event) -> bool:
    target = canonical(ref)
    return any(may_contain(proved, target) for proved in event.ctx.not_fsdp2)


def may_be_wrapper(value: Value | None) -> bool:
    """May the value be a DDP or FSDP1 wrapper? (Those have `no_sync`, `.module`, ...; code that
    receives either a wrapper or an FSDP2 model usually checks which one it has.)"""
    return value is not None and any(
        isinstance(option, Ref) and option.root.wrapped is not None and not option.path for option in options(value)
    )


def _touches(value: Value | None, modules: list[Ref]) -> bool:
    return value is not None and any(
        may_overlap(canonical(ref), module) for ref in _refs_inside(value) for module in modules
    )


def _refs_inside(value: Value) -> Iterator[Ref]:
    for option in walk_contents(value):
        if isinstance(option, Ref):
            yield option


def canonical(ref: Ref) -> Ref:
    """The same module named from its outermost owner (``self.model`` for a model stored there)."""
    root, path = ref.root, ref.path
    while root.parent is not None:
        owner = root.parent
        root, path = owner.root, owner.path + path
    return ref if root is ref.root else Ref(root, path, ref.order)


# Bases that say nothing about who drives an object's life cycle.
_PLAIN_BASES = ("torch.", "builtins.", "abc.", "typing.")


def framework_owned(ref: Ref) -> bool:
    """Is the module held by an object whose class builds on a base class from outside torch
    (``LightningModule``, a project's ``BaseTrainer``)? Code the file does not show then drives
    it: Lightning, for one, materialises a meta-device model itself after ``configure_model``."""
    cls = canonical(ref).root.cls
    return cls is not None and any(not base.startswith(_PLAIN_BASES) for base in cls.external_bases())


def strict_ancestor(outer: Ref, inner: Ref) -> bool:
    return is_strict_ancestor(canonical(outer), canonical(inner))


class FileFacts:
    """Everything rules know about one file."""

    def __init__(self, path: str, source: bytes, module: cst.Module, traces: list[Trace]) -> None:
        self.path = path
        self.source = source
        self.module = module
        self.traces = traces

    @cached_property
    def layout(self) -> Layout:
        # Computed only for files that have findings: it costs a code-generation pass.
        return Layout(self.module)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self.layout.position(node)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @cached_property
    def module_code(self) -> str:
        return self.module.code

    @cached_property
    def code_lines(self) -> list[str]:
        """The module's lines as Python and editors count them, line ends kept (its code is the
        decoded file: libcst round-trips it)."""
        return source_lines(self.source.decode(self.module.encoding))

    @cached_property
    def parents(self) -> dict[int, cst.CSTNode]:
        """The parent of every syntax node (by ``id``) but the module."""
        parents: dict[int, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            for child in child_nodes(node):
                parents[id(child)] = node
                stack.append(child)
        return parents

    def statement_of(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, cst.Module | cst.IndentedBlock] | None:
        """The statement that contains ``node`` and the block (module or indented block) it is in."""
        current = node
        while id(current) in self.parents:
            parent = self.parents[id(current)]
            if isinstance(current, cst.BaseStatement) and isinstance(parent, (cst.Module, cst.IndentedBlock)):
                return current, parent
            current = parent
        return None

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        """The nearest ancestor of ``node`` of the given syntax type."""
        current = self.parents.get(id(node))
        while current is not None and not isinstance(current, kind):
            current = self.parents.get(id(current))
        return current

    def expects_exception(self, node: cst.CSTNode) -> bool:
        """Is ``node`` inside ``with pytest.raises(...)`` or ``with self.assertRaises...(...)`` (or a
        name bound to one in the same function): code a test runs to watch it fail, on purpose?"""
        block = self.enclosing(node, cst.With)
        while block is not None:
            if any(self._expectation(item.item, block) for item in block.items):  # type: ignore[attr-defined]
                return True
            block = self.enclosing(block, cst.With)
        return False

    def _expectation(self, item: cst.BaseExpression, block: cst.CSTNode) -> bool:
        if isinstance(item, cst.Call):
            return dotted(item.func).rpartition(".")[2] in _EXPECTS_EXCEPTION
        if not isinstance(item, cst.Name):
            return False
        scope = self.enclosing(block, cst.FunctionDef) or self.module
        return any(
            isinstance(value, cst.Call) and self._expectation(value, block) for value in _assigned(scope, item.value)
        )

    def events(self) -> Iterator[tuple[Trace, Event]]:
        for trace in self.traces:
            for event in trace.events:
                yield trace, event


# Context managers that expect the code they hold to raise (pytest, unittest).
_EXPECTS_EXCEPTION = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def _assigned(scope: cst.CSTNode, name: str) -> Iterator[cst.BaseExpression]:
    """The values assigned to ``name`` anywhere in ``scope`` (in any branch)."""
    stack = [scope]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign) and any(
            isinstance(target.target, cst.Name) and target.target.value == name for target in node.targets
        ):
            yield node.value
        stack.extend(child_nodes(node))
