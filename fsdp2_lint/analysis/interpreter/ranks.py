"""Rank tests: what a comparison with this rank (``rank == 0``, ``local_rank in (0, -1)``) or with
the world size (``world_size > 1``) evaluates to (:func:`compare_rank`, :func:`compare_world_size`,
:func:`negate_rank`), and which ranks run each arm of a test of that kind (:func:`rank_guards`,
read by :func:`.guards.arms`)."""

from __future__ import annotations

import libcst as cst

from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Choice,
    Const,
    GuardRanks,
    RankDep,
    RankGuard,
    RankKind,
    Uniform,
    UniformKind,
    Value,
    const,
    elements,
)


def rank_kind(value: Value) -> str | None:
    """The rank kind of a value; for alternatives, the kind of the rank-dependent one when the
    others are constants (``return 0 if not dist.is_initialized() else dist.get_rank()``)."""
    if isinstance(value, RankDep):
        return value.kind
    if isinstance(value, Choice):
        kinds = {option.kind for option in value.options if isinstance(option, RankDep)}
        if len(kinds) == 1 and all(isinstance(option, (RankDep, Const)) for option in value.options):
            return kinds.pop()
    return None


def negate_rank(value: Value) -> Value:
    kind = rank_kind(value)
    negated = _NEGATED.get(kind) if kind is not None else None
    return RankDep(negated) if negated else UNKNOWN


_NEGATED = {
    RankKind.ZERO: RankKind.NONZERO,
    RankKind.NONZERO: RankKind.ZERO,
    RankKind.RANK: RankKind.ZERO,
    RankKind.MIXED: RankKind.MIXED,
}


def compare_world_size(left: Value, operator: cst.BaseCompOp, right: Value) -> Uniform | None:
    """``world_size > 1`` and the like: is the job distributed?"""
    if right == Uniform(UniformKind.SIZE) and left != Uniform(UniformKind.SIZE):
        left, right = right, left
        operator = _MIRRORED.get(type(operator), operator)
    number = const(right)
    if left != Uniform(UniformKind.SIZE) or not isinstance(number, int) or number not in (1, 2):
        return None
    distributed = {
        (cst.GreaterThan, 1): True,
        (cst.NotEqual, 1): True,
        (cst.GreaterThanEqual, 2): True,
        (cst.Equal, 1): False,
        (cst.LessThanEqual, 1): False,
        (cst.LessThan, 2): False,
    }.get((type(operator), number))
    return None if distributed is None else Uniform(UniformKind.DIST if distributed else UniformKind.SINGLE)


def compare_rank(left: Value, operator: cst.BaseCompOp, right: Value) -> Value:
    if rank_kind(right) is RankKind.RANK and rank_kind(left) is not RankKind.RANK:
        left, right = right, left
        operator = _MIRRORED.get(type(operator), operator)
    if rank_kind(left) is not RankKind.RANK:
        return RankDep(RankKind.MIXED) if rank_kind(left) or rank_kind(right) else UNKNOWN
    if isinstance(operator, (cst.Is, cst.IsNot)):  # `rank is not None`: was a rank given? (every rank agrees)
        return UNKNOWN
    number = const(right)
    if isinstance(operator, (cst.In, cst.NotIn)):
        members = [const(item) for item in elements(right)]
        kind = RankKind.ZERO if 0 in members and all(m in (0, -1) for m in members) else RankKind.MIXED
        return RankDep(kind if isinstance(operator, cst.In) else negate_rank(RankDep(kind)).kind)  # type: ignore[union-attr]
    if not isinstance(number, int) or isinstance(number, bool):
        return RankDep(RankKind.MIXED)
    distributed = {  # rank -1 stands for "not launched distributed" (RANK unset)
        (cst.NotEqual, -1): True,
        (cst.GreaterThan, -1): True,
        (cst.GreaterThanEqual, 0): True,
        (cst.Equal, -1): False,
        (cst.LessThan, 0): False,
        (cst.LessThanEqual, -1): False,
    }.get((type(operator), number))
    if distributed is not None:
        return Uniform(UniformKind.DIST if distributed else UniformKind.SINGLE)
    zero_test = {
        cst.Equal: number == 0,
        cst.LessThan: number == 1,
        cst.LessThanEqual: number == 0,
    }.get(type(operator))
    nonzero_test = {
        cst.NotEqual: number == 0,
        cst.GreaterThan: number == 0,
        cst.GreaterThanEqual: number == 1,
    }.get(type(operator))
    if zero_test:
        return RankDep(RankKind.ZERO)
    if nonzero_test:
        return RankDep(RankKind.NONZERO)
    return RankDep(RankKind.MIXED)


_MIRRORED = {
    cst.LessThan: cst.GreaterThan(),
    cst.GreaterThan: cst.LessThan(),
    cst.LessThanEqual: cst.GreaterThanEqual(),
    cst.GreaterThanEqual: cst.LessThanEqual(),
}


def rank_guards(
    node: cst.CSTNode, test: cst.BaseExpression, kind: str | None, depth: int
) -> tuple[RankGuard | None, RankGuard | None]:
    """The ranks that run the true and the false arm of a branching ``node`` whose test has the
    given rank kind."""
    arms = {
        RankKind.ZERO: (GuardRanks.ZERO, GuardRanks.NONZERO),
        RankKind.RANK: (GuardRanks.NONZERO, GuardRanks.ZERO),
        RankKind.NONZERO: (GuardRanks.NONZERO, GuardRanks.ZERO),
        RankKind.ZERO_SUBSET: (GuardRanks.ZERO, None),
        RankKind.SUBSET: (GuardRanks.SUBSET, None),
        RankKind.MIXED: (GuardRanks.SUBSET, GuardRanks.SUBSET),
    }.get(kind, (None, None))  # type: ignore[arg-type]
    return tuple(  # type: ignore[return-value]
        RankGuard(test, ranks, depth, (id(node), arm)) if ranks else None for arm, ranks in enumerate(arms)
    )
