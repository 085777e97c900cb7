"""FSDP version tests, and the evaluation of what a type test tests against.

``fsdp_version(model) == 1`` (a helper that tells an FSDP1 wrapper from an FSDP2 module) and
``isinstance(model, FSDPModule)`` evaluate to an :class:`FsdpVersion`: the model, with the arm that
rules FSDP2 out and the arm that requires it. :mod:`.guards` reads them per arm.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter.state import Evaluator
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Const,
    FsdpVersion,
    Ref,
    Symbol,
    Tuple,
    Value,
    canonical,
    const,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted


def peek(interp: Evaluator, node: cst.BaseExpression) -> Value:
    """Evaluate a side-effect-free name, attribute or literal (the types or names a type test
    tests against)."""
    if isinstance(node, cst.Name):  # a name imported from a project module is what that module binds
        return interp.resolved(interp.frame.env.lookup(node.value) or interp.unbound(node.value))
    if isinstance(node, cst.Attribute):
        base = peek(interp, node.value)
        if isinstance(base, Symbol):
            return interp.resolved(Symbol(apis.canonical(f"{base.qname}.{node.attr.value}")))
        return UNKNOWN
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return Tuple(tuple(peek(interp, element.value) for element in node.elements))
    if isinstance(node, cst.SimpleString):
        return Const(node.evaluated_value)
    return UNKNOWN


def is_version_probe(node: cst.Call) -> bool:
    """``fsdp_version(model)``, ``utils.get_fsdp_version(model)``: a helper that tells an FSDP1
    wrapper (1) from an FSDP2 module (2), which code supporting both uses to pick an API."""
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
    return name.lstrip("_").removeprefix("get_") == "fsdp_version" and len(positional) == len(node.args) == 1


# (operator, number) -> the arm (0: true, 1: false) in which the version is not 2
_FSDP1_ARM = {
    (cst.Equal, 1): 0,
    (cst.NotEqual, 1): 1,
    (cst.Equal, 2): 1,
    (cst.NotEqual, 2): 0,
    (cst.LessThan, 2): 0,
    (cst.LessThanEqual, 1): 0,
    (cst.GreaterThan, 1): 1,
    (cst.GreaterThanEqual, 2): 1,
}


def compare_fsdp_version(left: Value, operator: cst.BaseCompOp, right: Value) -> Value | None:
    """``fsdp_version(model) == 1`` and the like: the test, with the arm that rules FSDP2 out."""
    if not (isinstance(left, FsdpVersion) and left.fsdp1_arm is None):
        return None
    arm = _FSDP1_ARM.get((type(operator), const(right)))
    return None if arm is None else replace(left, fsdp1_arm=arm)


def negate_fsdp_version(value: Value) -> Value | None:
    if isinstance(value, FsdpVersion) and value.fsdp1_arm is not None:
        fsdp2_arm = None if value.fsdp2_arm is None else 1 - value.fsdp2_arm
        return replace(value, fsdp1_arm=1 - value.fsdp1_arm, fsdp2_arm=fsdp2_arm)
    return None


def fsdp2_type_test(interp: Evaluator, node: cst.Call, args: tuple[Value, ...]) -> Value | None:
    """``isinstance(model, FSDPModule)`` (evaluated to ``args``) as a version test: in its false
    arm no FSDP2 module; in its true arm one, unless the test admits other types too."""
    if not (dotted(node.func) == "isinstance" and len(args) == 2):
        return None
    kinds = [option for option in walk_contents(peek(interp, node.args[1].value)) if not isinstance(option, Tuple)]
    if not any(isinstance(option, Symbol) and option.qname == apis.FSDP_MODULE for option in kinds):
        return None
    only_fsdp2 = all(isinstance(option, Symbol) and option.qname == apis.FSDP_MODULE for option in kinds)
    return FsdpVersion(args[0], fsdp1_arm=1, fsdp2_arm=0 if only_fsdp2 else None)


def version_not_fsdp2(value: Value, arm: int) -> tuple[Ref, ...]:
    """The model a version test (evaluated to ``value``) proves no FSDP2 module in ``arm``."""
    if isinstance(value, FsdpVersion) and value.fsdp1_arm == arm:
        return tuple(canonical(ref) for ref in refs(value.model))
    return ()


def version_fsdp2(value: Value, arm: int) -> tuple[Ref, ...]:
    """The model a type test (evaluated to ``value``) requires to be an FSDP2 module in ``arm``."""
    if isinstance(value, FsdpVersion) and value.fsdp2_arm == arm:
        return tuple(canonical(ref) for ref in refs(value.model))
    return ()
