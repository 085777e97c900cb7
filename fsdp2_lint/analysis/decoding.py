"""Loops that may end early on what their own body computed from a call: a decode loop's
``if (nxt == eos).all(): break``, or ``while not done:`` with ``done`` set from the tokens the model
just produced (FSDP012). Syntax only: the caller says which call is the model's forward.

A name is *computed from* the call when an assignment in the loop body binds it from the call's
result, or from a name computed from it (also through ``done |= ...`` and ``buf[i] = ...``). Sizes
(``x.shape``, ``x.size(1)``, ``len(x)``) do not count: a sequence grown one token a step has the
same length on every rank whose prompt had the same length.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import libcst as cst

from fsdp2_lint.analysis.syntax import child_nodes

_SIZE_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device"})
_SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim"})


def exits_on_result(
    loop: cst.For | cst.While, calls: Collection[cst.CSTNode]
) -> list[tuple[cst.If | cst.While, cst.BaseExpression]]:
    """The tests that may end ``loop`` early (its ``while`` test; the test of an ``if`` in its own
    body, not a nested loop's, one of whose arms ends in ``break`` or ``return``) that read a name
    the loop body computes from the result of one of ``calls`` (nodes in the body, or anywhere):
    each with its ``if`` or ``while``."""
    bound = _bound_by(loop, {id(call) for call in calls})
    if not bound:
        return []
    computed = _computed_from(loop, bound)
    return [(statement, statement.test) for statement in _exits(loop) if _reads(statement.test) & computed]


def _body_nodes(node: cst.CSTNode, into_loops: bool = True) -> Iterator[cst.CSTNode]:
    """The nodes under ``node`` that its own code runs: not those of functions, classes or lambdas
    defined in it (nor, unless ``into_loops``, of nested loops)."""
    for child in child_nodes(node):
        yield child
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if not into_loops and isinstance(child, (cst.For, cst.While)):
            continue
        yield from _body_nodes(child, into_loops)


def _assignments(loop: cst.For | cst.While) -> Iterator[tuple[list[cst.BaseExpression], cst.BaseExpression]]:
    """(targets, value) of each assignment in the loop body."""
    for node in _body_nodes(loop.body):
        if isinstance(node, cst.Assign):
            yield [target.target for target in node.targets], node.value
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None:
            yield [node.target], node.value
        elif isinstance(node, cst.NamedExpr):
            yield [node.target], node.value


def _bound_by(loop: cst.For | cst.While, calls: set[int]) -> set[str]:
    """The names the assignments in the loop body bind from a value that holds one of ``calls`` (ids)."""
    return {
        name
        for targets, value in _assignments(loop)
        if id(value) in calls or any(id(node) in calls for node in _body_nodes(value))
        for target in targets
        for name in _target_names(target)
    }


def _computed_from(loop: cst.For | cst.While, bound: set[str]) -> set[str]:
    """``bound`` and the names the loop body computes from them, to a fixed point (an assignment
    late in the body feeds one early in the next step)."""
    computed = set(bound)
    assignments = list(_assignments(loop))
    grew = True
    while grew:
        grew = False
        for targets, value in assignments:
            if _reads(value) & computed:
                new = {name for target in targets for name in _target_names(target)} - computed
                computed |= new
                grew = grew or bool(new)
    return computed


def _target_names(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target binds or fills: ``a``, ``a, b``, ``buf[i]`` (``buf``); not an
    attribute of an object (``self.cache``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _target_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
        return {target.value.value}
    return set()


def _reads(node: cst.CSTNode) -> set[str]:
    """The names an expression reads for their values: not an attribute's or a keyword's name, not
    a value read only for its size (:data:`_SIZE_ATTRIBUTES`, :data:`_SIZE_METHODS`, ``len``)."""
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, cst.Attribute):
        return set() if node.attr.value in _SIZE_ATTRIBUTES else _reads(node.value)
    if isinstance(node, cst.Call) and _reads_size(node):
        return set()
    if isinstance(node, cst.Arg):
        return _reads(node.value)
    if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        return set()
    return {name for child in child_nodes(node) for name in _reads(child)}


def _reads_size(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "len"
    return isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS


def _exits(loop: cst.For | cst.While) -> Iterator[cst.If | cst.While]:
    if isinstance(loop, cst.While):
        yield loop
    for node in _body_nodes(loop.body, into_loops=False):
        if isinstance(node, cst.If) and (_ends_loop(node.body) or _ends_loop(node.orelse)):
            yield node


def _ends_loop(block: cst.CSTNode | None) -> bool:
    """Does the arm end in ``break`` or ``return``?"""
    if isinstance(block, cst.Else):
        block = block.body
    if not isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) or not block.body:
        return False
    last = block.body[-1]
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        last = last.body[-1]
    return isinstance(last, (cst.Break, cst.Return))
