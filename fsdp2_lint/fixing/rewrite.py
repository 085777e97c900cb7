"""A fix as a rule proposes it: syntax nodes to replace, imports to add, and its applicability. The
engine applies it (:mod:`fsdp2_lint.fixing.apply`) and reports it as the text edits it amounts to
(:class:`~fsdp2_lint.diagnostics.Fix`, :mod:`fsdp2_lint.fixing.text_edits`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from fsdp2_lint.diagnostics import Applicability

if TYPE_CHECKING:
    import libcst as cst

# Each node to replace, with what replaces it: a node, ``cst.FlattenSentinel`` of several statements,
# or ``cst.RemoveFromParent()``. libcst nodes hash by identity, so each key is that very node.
Replacements = Mapping["cst.CSTNode", Union["cst.CSTNode", "cst.FlattenSentinel", "cst.RemovalSentinel"]]


@dataclass(frozen=True)
class NeededImport:
    """``from module import name``, or ``import module`` when ``name`` is None."""

    module: str
    name: str | None


@dataclass(frozen=True)
class Rewrite:
    """A mechanical repair: ``replacements`` of syntax nodes (libcst round-trips everything else)
    and the ``imports`` they need (see :func:`fsdp2_lint.fixing.builders.reference`). Safe ones keep
    the program's meaning and ``--fix`` applies them; unsafe ones change behaviour a reviewer
    should see (``--unsafe-fixes``)."""

    description: str
    replacements: Replacements
    applicability: Applicability = Applicability.SAFE
    imports: tuple[NeededImport, ...] = ()
