"""Small helpers over libcst syntax trees, shared by the interpreter, the facts and the fixes."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import libcst as cst


def statements(block: cst.BaseSuite | cst.Module) -> list[cst.CSTNode]:
    body = block.body
    return list(body) if isinstance(body, (list, tuple)) else [body]


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LAYOUT_FIELDS = re.compile(
    r"^(whitespace|lpar|rpar|comma|semicolon|colon|equal|star|dot|lbracket|rbracket|lbrace|rbrace)"
)


def child_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The syntax children of a node, without whitespace and punctuation. libcst's own
    ``children`` property rebuilds the node to find them, which costs more than the parse."""
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _CHILD_FIELDS[type(node)] = tuple(
            f.name for f in dataclasses.fields(node) if not _LAYOUT_FIELDS.match(f.name)
        )
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (item for item in value if isinstance(item, cst.CSTNode))
