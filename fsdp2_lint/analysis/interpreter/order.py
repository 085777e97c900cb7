"""The order a walk over a model's modules visits them in, reversed: ``reversed(model.modules())``,
``walk[::-1]``, ``list.reverse()`` and a list a loop filled from a walk, reversed (FSDP002 asks
whether a loop shards the root before its blocks)."""

from __future__ import annotations

from fsdp2_lint.analysis.model import Choice, ModuleIter, Obj, ObjKind, Order, Ref, Value


def reversed_order(value: Value) -> Value:
    """``reversed(value)``, ``value[::-1]``: a walk over modules visits them in the other order."""
    if isinstance(value, ModuleIter):
        return ModuleIter(value.ref, value.self_included, value.named, _flipped(value.order))
    if isinstance(value, Ref) and value.root.kind is ObjKind.CONTAINER and not value.path:
        return Ref(Obj.container(reversed_items(value.root.items), value.root.node))
    return value


def reversed_items(items: list[tuple[object, Value]]) -> list[tuple[object, Value]]:
    """A list a loop filled from a walk (``out.append(m)``) holds the walk's modules in its order."""
    return [(key, _reversed_walk(item)) for key, item in reversed(items)]


def _reversed_walk(value: Value) -> Value:
    if isinstance(value, Choice):
        return Choice(tuple(_reversed_walk(option) for option in value.options), value.sequential)
    if isinstance(value, Ref) and value.order is not None:
        return Ref(value.root, value.path, _flipped(value.order))
    return value


def _flipped(order: Order) -> Order:
    return Order.REV if order is Order.PRE else Order.PRE
