"""The small vocabularies of the abstract domain (:mod:`.model`): how a rank-dependent value
differs across ranks, which ranks a guard lets through, what a uniform value says, what an
iterator yields, the order of a module walk, and what a gradient-derived tensor is."""

from __future__ import annotations

from enum import Enum


class RankKind(Enum):
    """How a rank-dependent value (:class:`RankDep`) differs across ranks."""

    RANK = "rank"  # the rank number
    ZERO = "zero"  # a condition true on rank 0 only
    NONZERO = "nonzero"  # a condition true on every rank but 0
    ZERO_SUBSET = "zero_subset"  # a condition true on rank 0 at most (``is_main and other``)
    SUBSET = "subset"  # a condition true on some ranks (``rank_flag and other``)
    MIXED = "mixed"  # any other rank-dependent value


class GuardRanks(Enum):
    """The ranks that run code under a :class:`RankGuard`."""

    ZERO = "zero"
    NONZERO = "nonzero"
    SUBSET = "subset"


class UniformKind(Enum):
    """What a value every rank agrees on (:class:`Uniform`) says about the run."""

    DIST = "dist"  # true when distributed: ``dist.is_initialized()``, ``world_size > 1``
    SINGLE = "single"  # true in a single process: the negation of DIST
    SIZE = "size"  # the world size itself


class IterKind(Enum):
    """What iterating an :class:`Iter` yields."""

    ENUMERATE = "enumerate"  # (index, element)
    ZIP = "zip"  # a tuple of one element of each part
    ITEMS = "items"  # (key, value) pairs of a container, a state dict or a checkpoint
    VALUES = "values"  # the values of a state dict or a checkpoint


class Order(Enum):
    """The order in which a module walk visits a tree."""

    PRE = "pre"  # parents before their children (``modules()``)
    REV = "rev"  # children before their parents (``reversed(list(model.modules()))``, ``apply``)


class GradTag(Enum):
    """What a gradient-derived tensor (:class:`Derived`) is."""

    GRAD = "grad"  # computed from parameters' gradients (always present)
    LOCAL = "local"  # reduced to this rank's shard by ``.to_local()``
    FULL = "full"  # gathered into a plain tensor by ``.full_tensor()``
