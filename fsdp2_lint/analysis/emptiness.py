"""Tests of a value's emptiness: ``batch is None``, ``not batch``, ``len(batch) == 0``,
``x.numel() == 0``, ``x.size(0) == 0``, ``x.shape[0] == 0`` (and their negations, joined by
``or``/``and``). A skip on such a test (``if batch is None: continue``) is taken on the ranks whose
own data are missing or empty (FSDP012). Syntax only."""

from __future__ import annotations

import re

import libcst as cst

from fsdp2_lint.analysis.syntax import is_zero

# Names of objects that hold a run's settings (`args`, `cfg`, `train_config`, `opts`): what is read
# from them is the same on every rank, so a None test on it tests a setting, not this rank's data.
_SETTINGS_OBJECT = re.compile(r"(?:\w*_)?(?:args|arguments|cfg|config|conf|opts|options|hparams|settings|flags)")
# Comparisons of a size with an integer, and whether the true arm means "empty".
_EMPTY_WHEN = {
    (cst.Equal, 0): True,
    (cst.LessThanEqual, 0): True,
    (cst.LessThan, 1): True,
    (cst.NotEqual, 0): False,
    (cst.GreaterThan, 0): False,
    (cst.GreaterThanEqual, 1): False,
}


def exits_when_empty(test: cst.BaseExpression, exit_on_true: bool, truthiness: bool = True) -> bool:
    """Is the exiting arm of ``test`` (its true arm when ``exit_on_true``) taken when a tested
    value is None or empty? ``a or b`` exits on its true arm when either does; ``a and b`` on its
    false arm when either does. ``truthiness``: a plain truth test of a name or an item
    (``not batch``) counts too (a setting is tested that way as often as data are)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return exits_when_empty(test.expression, not exit_on_true, truthiness)
    if isinstance(test, cst.BooleanOperation):
        either = isinstance(test.operator, cst.Or) if exit_on_true else isinstance(test.operator, cst.And)
        return either and (
            exits_when_empty(test.left, exit_on_true, truthiness)
            or exits_when_empty(test.right, exit_on_true, truthiness)
        )
    empty = _true_means_empty(test, truthiness)
    return empty is not None and empty == exit_on_true


def _true_means_empty(test: cst.BaseExpression, truthiness: bool) -> bool | None:
    """True: the test holds when the value is None/empty; False: when it is not; None: no emptiness test."""
    if truthiness and isinstance(test, (cst.Name, cst.Subscript)) and _data(test):  # `if batch:`, `if batch["x"]:`
        return False
    if _size(test):  # `if len(batch):`, `if x.numel():`
        return False
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    left, right, operator = test.left, target.comparator, target.operator
    if isinstance(operator, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)) and _is_none(right) and _data(left):
        return isinstance(operator, (cst.Is, cst.Equal))
    if _size(left) and isinstance(right, cst.Integer):
        return _EMPTY_WHEN.get((type(operator), int(right.evaluated_value)))
    return None


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _data(node: cst.BaseExpression) -> bool:
    """A name, or an item or attribute read from one (``batch``, ``batch["pixel_values"]``,
    ``batch.input_ids``); nothing read from ``self`` (the object's settings and submodules) or from
    a settings object (``args.probe_freq``, ``train_cfg.eval_every``: the same on every rank), not a
    constant."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return (
        isinstance(node, cst.Name)
        and node.value not in ("self", "cls", "None", "True", "False")
        and not _SETTINGS_OBJECT.fullmatch(node.value)
    )


def _size(node: cst.BaseExpression) -> bool:
    """``len(x)``, ``x.numel()``, ``x.size(0)``, ``x.shape[0]``, ``x.nelement()`` of a data value."""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute):
        return node.value.attr.value == "shape" and _data(node.value.value) and _first_index(node)
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Name):
        return func.value == "len" and len(node.args) == 1 and _data(node.args[0].value)
    if isinstance(func, cst.Attribute) and _data(func.value):
        if func.attr.value in ("numel", "nelement"):
            return not node.args
        if func.attr.value == "size":
            return len(node.args) == 1 and is_zero(node.args[0].value)
    return False


def _first_index(node: cst.Subscript) -> bool:
    return len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and is_zero(node.slice[0].slice.value)
