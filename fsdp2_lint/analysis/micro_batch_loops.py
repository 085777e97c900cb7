"""Loops whose number of iterations follows this rank's own token counts (FSDP012): one over a
packing of the rank's data under a token budget, or a ``range`` of a count divided out of its token
total. Names are followed through the function the loop is in (:mod:`.microbatches` reads the
syntax), and calls into the functions the interpreter ran for them, in whichever module."""

from __future__ import annotations

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.microbatches import (
    bindings,
    comprehended,
    converted,
    divides_tokens,
    iterated,
    packed_lists,
    range_count,
    split_sections,
)
from fsdp2_lint.analysis.syntax import own_nodes
from fsdp2_lint.analysis.trace import Trace

_MAX_DEPTH = 12  # names bound to each other in a cycle end here


def counted_by_tokens(facts: FileFacts, trace: Trace, loop: cst.For) -> bool:
    """Does the loop run once per micro-batch of a packing under a token budget, or a count
    divided out of a token total? Names are followed through the function the loop is in, and calls
    into the functions the interpreter ran for them."""
    function = facts.enclosing(loop, cst.FunctionDef) or facts.text_of(loop).module
    return any(_packs(facts, trace, node, function) for node in iterated(loop.iter))


def _packs(facts: FileFacts, trace: Trace, node: cst.BaseExpression, function: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``node`` a packing of this rank's data under a token budget (or a range over a count of them)?"""
    count = range_count(node)
    if count is not None:
        return _token_count(facts, trace, count, function, depth)
    if depth > _MAX_DEPTH:
        return False
    inner = split_sections(node) or comprehended(node)
    if inner is not None:  # as many pieces as a packing has elements
        return _packs(facts, trace, inner, function, depth + 1)
    if isinstance(node, cst.Name):
        if node.value in packed_lists(function):
            return True
        return any(_packs(facts, trace, value, function, depth + 1) for value in bindings(function, node.value))
    if isinstance(node, cst.Call):
        return any(packed_lists(callee) for callee in _callees(facts, trace, node))
    return False


def _token_count(facts: FileFacts, trace: Trace, node: cst.BaseExpression, function: cst.CSTNode, depth: int) -> bool:
    """Is ``node`` a count of micro-batches divided out of this rank's token total, or the length of
    a packing (``len(micro_batches)``)?"""
    if divides_tokens(node, function):
        return True
    if depth > _MAX_DEPTH:
        return False
    if isinstance(node, cst.Name):
        return any(_token_count(facts, trace, value, function, depth + 1) for value in bindings(function, node.value))
    if not isinstance(node, cst.Call):
        return False
    number = converted(node)
    if number is not None:
        return _token_count(facts, trace, number, function, depth + 1)
    if isinstance(node.func, cst.Name) and node.func.value == "len" and len(node.args) == 1:
        return _packs(facts, trace, node.args[0].value, function, depth + 1)
    return any(
        ret.value is not None and (divides_tokens(ret.value, callee) or _length_of_packing(ret.value, callee))
        for callee in _callees(facts, trace, node)
        for ret in own_nodes(callee)
        if isinstance(ret, cst.Return)
    )


def _length_of_packing(node: cst.BaseExpression, function: cst.CSTNode) -> bool:
    """``len(packs)`` of a list ``function`` packs under a token budget."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"):
        return False
    return (
        len(node.args) == 1
        and isinstance(node.args[0].value, cst.Name)
        and (node.args[0].value.value in packed_lists(function))
    )


def _callees(facts: FileFacts, trace: Trace, call: cst.Call) -> list[cst.CSTNode]:
    """The functions the interpreter ran under ``call`` (the callee, and what it called in turn)."""
    found: dict[int, cst.CSTNode] = {}
    for event in trace.events:
        if any(site is call for site in event.stack):
            function = facts.enclosing(event.node, cst.FunctionDef)
            if function is not None:
                found.setdefault(id(function), function)
    return list(found.values())
