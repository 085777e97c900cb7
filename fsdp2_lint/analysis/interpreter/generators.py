"""Generators used as context managers (``@contextlib.contextmanager``): ``with cm(...) as x:
body`` runs the generator's code before its ``yield`` at the entry, binds ``x`` to what it
yields, runs the body, then the code after the ``yield`` (and the ``finally:`` around it) at the
exit, as Python does.

:func:`split_at_yield` cuts a generator's body in two at its one ``yield``: where the ``yield`` is
a statement of the body, of a ``try:`` block (the ``except``/``else``/``finally`` go after it), or
of ``if``/``elif``/``else`` arms (one ``yield`` per arm: the same test picks the arm on both sides,
an arm without one runs whole before). Other shapes (a ``yield`` in a loop or a ``with``, several
in one block) are not cut: the call runs the whole body at the entry, as any other call does.

An object of a class with ``__enter__``/``__exit__`` (``__aenter__``/``__aexit__`` for ``async
with``) is entered the same way: ``__enter__`` runs at the entry, ``x`` is bound to what it
returns, and the ``with`` calls ``__exit__`` at its exit (:class:`Exiting`).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from fsdp2_lint.analysis.interpreter.state import Frame
from fsdp2_lint.analysis.model import UNKNOWN, Context, FunctionInfo, Symbol, Value
from fsdp2_lint.analysis.syntax import child_nodes, statements

CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})


@dataclass(frozen=True)
class Split:
    """A generator's body cut at its ``yield``: ``before`` ends with the statement that yields."""

    before: list[cst.CSTNode]
    after: list[cst.CSTNode]


@dataclass
class Suspended:
    """A generator stopped at its ``yield`` by a ``with``: what its exit resumes."""

    info: FunctionInfo
    frame: Frame
    ctx: Context
    after: list[cst.CSTNode]


@dataclass
class Exiting:
    """An object a ``with`` entered through its class's ``__enter__``: the ``with`` item ``node``
    calls the method ``name`` (``__exit__``, ``__aexit__``) on it at the exit."""

    manager: Value
    node: cst.CSTNode
    name: str


def special_methods(asynchronous: bool) -> tuple[str, str]:
    """The methods a ``with`` (``async with``) calls on the object it enters and exits."""
    return ("__aenter__", "__aexit__") if asynchronous else ("__enter__", "__exit__")


def is_context_manager(info: FunctionInfo, decorators: tuple[Value, ...]) -> bool:
    """Is ``info`` decorated with ``contextlib.contextmanager`` (a decorator whose value is
    unknown, in a function whose ``def`` never ran, by its name)?"""
    for value, decorator in zip(decorators, info.node.decorators, strict=False):
        if isinstance(value, Symbol) and value.qname in CONTEXT_MANAGERS:
            return True
        if value is UNKNOWN and _decorator_name(decorator) in ("contextmanager", "asynccontextmanager"):
            return True
    return False


def split_at_yield(body: list[cst.CSTNode]) -> Split | None:
    """``body`` cut at its one ``yield``, or None where it has none or a shape that is not cut."""
    holding = [index for index, stmt in enumerate(body) if _yields(stmt)]
    if len(holding) != 1:
        return None
    index = holding[0]
    inner = _split_statement(body[index])
    if inner is None:
        return None
    return Split([*body[:index], *inner.before], [*inner.after, *body[index + 1 :]])


def _split_statement(stmt: cst.CSTNode) -> Split | None:
    if isinstance(stmt, cst.SimpleStatementLine):  # `yield`, `yield value`, `x = yield value`
        return Split([stmt], []) if len(stmt.body) == 1 and _yields(stmt) == 1 else None
    if isinstance(stmt, cst.BaseSmallStatement):  # the body of a one-line `if c: yield`
        return Split([stmt], []) if _yields(stmt) == 1 else None
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        return _split_try(stmt)
    if isinstance(stmt, cst.If):
        return _split_if(stmt)
    return None


def _split_try(stmt: cst.Try | cst.TryStar) -> Split | None:
    if any(_yields(part) for part in (*stmt.handlers, stmt.orelse, stmt.finalbody) if part is not None):
        return None
    inner = split_at_yield(statements(stmt.body))
    if inner is None:
        return None
    return Split(inner.before, [stmt.with_changes(body=_block(inner.after))])


def _split_if(stmt: cst.If) -> Split | None:
    """Both halves keep the test; an arm without a ``yield`` runs whole in the first half."""
    then = split_at_yield(statements(stmt.body)) if _yields(stmt.body) else Split(statements(stmt.body), [])
    if then is None:
        return None
    orelse: Split | None = Split([], [])
    if isinstance(stmt.orelse, cst.If):
        orelse = _split_if(stmt.orelse)
    elif stmt.orelse is not None:
        block = statements(stmt.orelse.body)
        orelse = split_at_yield(block) if _yields(stmt.orelse) else Split(block, [])
    if orelse is None:
        return None
    return Split(
        [stmt.with_changes(body=_block(then.before), orelse=_orelse(stmt.orelse, orelse.before))],
        [stmt.with_changes(body=_block(then.after), orelse=_orelse(stmt.orelse, orelse.after))],
    )


def _orelse(original: cst.If | cst.Else | None, half: list[cst.CSTNode]) -> cst.If | cst.Else | None:
    if isinstance(original, cst.If):  # `elif`: its half is one `if` statement
        return half[0]
    return None if original is None else cst.Else(body=_block(half))


def _block(body: list[cst.CSTNode]) -> cst.IndentedBlock:
    return cst.IndentedBlock(body=body)


def _yields(node: cst.CSTNode) -> int:
    """The ``yield``s in ``node`` that belong to its function (not to a nested one)."""
    if isinstance(node, cst.Yield):
        return 1 + sum(_yields(child) for child in child_nodes(node))
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return 0
    return sum(_yields(child) for child in child_nodes(node))


def _decorator_name(decorator: cst.Decorator) -> str:
    target = decorator.decorator
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return target.value if isinstance(target, cst.Name) else ""


def entered_calls(item: cst.BaseExpression) -> frozenset[int]:
    """The ids of the calls whose value a ``with`` item enters: the item, or the arms of a
    conditional one (``cm(x) if x is not None else nullcontext()``)."""
    if isinstance(item, cst.Call):
        return frozenset({id(item)})
    if isinstance(item, cst.IfExp):
        return entered_calls(item.body) | entered_calls(item.orelse)
    return frozenset()
