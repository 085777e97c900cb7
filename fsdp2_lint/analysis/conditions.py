"""Correlated conditions: two tests of one setting, keyed by what they test, not by the ``if``.

Like mypy's binder or pyright's code-flow narrowing, each arm of a test records facts of the form
(atom, truth) where the *atom* is a canonical key of the tested expression: the name it starts from
as bound at that point (the assignment that bound it, or the function whose parameter it is, so a
new binding is a new atom), the attributes read from it (``cfg.fsdp.use_fsdp2``) and, for
attribute reads, how many heap mutations (stores, calls the analysis cannot see into) happened
before the test, so that a store to ``cfg.x`` or a call that may change ``cfg`` between two tests
makes them two atoms. A comparison with a constant (``x == "full"``, ``x is None``) is an atom with
that constant: ``x == 1`` and ``x == 2`` cannot both hold. ``not``, ``and`` and ``or`` are handled
by whoever splits the test (an ``and`` tells nothing of its false arm, an ``or`` nothing of its
true arm). When in doubt, a test is no atom, and nothing is exclusive.

This module is syntax only: :func:`parts` reads a test, :func:`implied_tests` what a property's
truth implies; the interpreter decides whether the name's binding is fixed and builds the
:class:`Condition`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from fsdp2_lint.analysis.syntax import own_nodes


class _Truth:
    """The `equals` of a plain truth test (``if x:``)."""

    def __repr__(self) -> str:
        return "TRUTH"


TRUTH = _Truth()
_NONE = ("none", None)  # the key of the constant None


@dataclass(frozen=True)
class Condition:
    """A test whose truth is fixed where it is read: ``name`` as bound by one binding (``site``:
    the assignment, or the function whose parameter it is), the attributes ``path`` read from it
    after ``state`` heap mutations, compared with ``equals`` (a constant's key) or tested for its
    truth (:data:`TRUTH`). A new binding, or a mutation before an attribute read, is a new atom."""

    name: str
    site: cst.CSTNode
    path: tuple[str, ...] = ()
    state: int = 0
    equals: object = TRUTH
    calls: tuple[int, ...] = ()  # ids of the call sites through which the binding's function runs

    @cached_property
    def atom(self) -> tuple:
        """What identifies the tested setting (``equals`` aside): two tests of one atom see one value."""
        return (self.name, id(self.site), self.calls, self.path, self.state)


def excludes(first: Condition, first_truth: bool, second: Condition, second_truth: bool) -> bool:
    """Can ``first`` having ``first_truth`` and ``second`` having ``second_truth`` never both hold?"""
    if first.atom != second.atom:
        return False
    if first.equals == second.equals:
        return first_truth != second_truth
    if first.equals is TRUTH or second.equals is TRUTH:
        plain, plain_truth, compared, compared_truth = (
            (first, first_truth, second, second_truth)
            if first.equals is TRUTH
            else (second, second_truth, first, first_truth)
        )
        del plain
        # `x == c` holds: x is c, whose truth is known (`x is None` and `if x:`).
        return compared_truth and _truth_of(compared.equals) != plain_truth
    return first_truth and second_truth  # equal to two different constants


def exclusive(mine: tuple[tuple[Condition, bool], ...], theirs: tuple[tuple[Condition, bool], ...]) -> bool:
    return any(excludes(a, at, b, bt) for a, at in mine for b, bt in theirs)


def _truth_of(key: object) -> bool:
    assert isinstance(key, tuple)
    return bool(key[1])


def constant_key(node: cst.BaseExpression) -> tuple | None:
    """The key of a constant a setting is compared with: a string, an integer (not a bool: ``1 ==
    True``), or None. Different keys are different values."""
    if isinstance(node, cst.Name) and node.value == "None":
        return _NONE
    if isinstance(node, cst.SimpleString):
        try:
            return ("str", node.evaluated_value)
        except Exception:  # noqa: BLE001 - an f-string-like prefix we do not evaluate
            return None
    if isinstance(node, cst.Integer):
        return ("int", int(node.evaluated_value))
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return ("int", -int(node.expression.evaluated_value))
    return None


def subject(node: cst.BaseExpression) -> tuple[str, tuple[str, ...]] | None:
    """``cfg.fsdp.use_fsdp2`` as ``("cfg", ("fsdp", "use_fsdp2"))``; a bare name with no path."""
    path: list[str] = []
    while isinstance(node, cst.Attribute):
        path.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name) or node.value in ("None", "True", "False"):
        return None
    return node.value, tuple(reversed(path))


def parts(test: cst.BaseExpression) -> tuple[cst.BaseExpression, object, bool] | None:
    """The tested expression, what it is compared with (:data:`TRUTH` or a constant's key) and the
    truth of the comparison in the test's true arm: ``x != 2`` is ``(x, 2, False)``, ``bool(x)``
    is ``(x, TRUTH, True)``. None for anything else."""
    while isinstance(test, cst.Call) and _is_bool_call(test):
        test = test.args[0].value
    if isinstance(test, (cst.Name, cst.Attribute)):
        return test, TRUTH, True
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator = target.operator
    if isinstance(operator, (cst.Equal, cst.NotEqual)):
        polarity = isinstance(operator, cst.Equal)
    elif isinstance(operator, (cst.Is, cst.IsNot)):
        polarity = isinstance(operator, cst.Is)
    else:
        return None
    left, right = test.left, target.comparator
    for tested, constant in ((left, right), (right, left)):
        key = constant_key(constant)
        if key is None or constant_key(tested) is not None:
            continue
        if isinstance(operator, (cst.Is, cst.IsNot)) and key != _NONE:
            return None  # `x is 1`: identity of a non-singleton
        if isinstance(tested, (cst.Name, cst.Attribute)):
            return tested, key, polarity
    return None


def _is_bool_call(node: cst.Call) -> bool:
    return (
        isinstance(node.func, cst.Name)
        and node.func.value == "bool"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    )


def constant_of(key: object) -> object:
    """The Python value of a constant's key (:func:`constant_key`)."""
    assert isinstance(key, tuple)
    return key[1]


def implied_tests(function: cst.FunctionDef) -> tuple[cst.BaseExpression, ...]:
    """The tests that hold whenever ``function`` returns something true: the operands of the
    ``and`` it returns (``return a and b``), also through a local name built once (``ok = a and
    b``) and only narrowed after that (``ok = ok and c``). Nothing when it returns in more than
    one place, or binds the name any other way."""
    returns = [node for node in own_nodes(function.body) if isinstance(node, cst.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return ()
    returned = returns[0].value
    if not isinstance(returned, cst.Name):
        return _conjuncts(returned)
    name = returned.value
    bindings = [node for node in own_nodes(function.body) if _binds(node, name)]
    built = [node.value for node in bindings if isinstance(node, cst.Assign) and not _narrows(node.value, name)]
    if len(built) != 1 or not all(isinstance(node, cst.Assign) for node in bindings):
        return ()
    return _conjuncts(built[0])


def _binds(node: cst.CSTNode, name: str) -> bool:
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (cst.For, cst.CompFor)):
        targets = [node.target]
    elif isinstance(node, cst.AsName):
        targets = [node.name]
    return any(any(isinstance(n, cst.Name) and n.value == name for n in (t, *own_nodes(t))) for t in targets)


def _narrows(value: cst.BaseExpression, name: str) -> bool:
    """``name and ...``: a value that is true only when the name already was."""
    first = _conjuncts(value)[0]
    return isinstance(first, cst.Name) and first.value == name and len(_conjuncts(value)) > 1


def _conjuncts(node: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return (node,)
