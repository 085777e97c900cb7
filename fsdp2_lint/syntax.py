"""Small helpers over libcst syntax trees, shared by the interpreter, the facts and the fixes."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState  # the state libcst's own code generation uses


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


def statement_spans(module: cst.Module) -> dict[int, tuple[int, int]]:
    """The lines of every statement (by ``id``), the comment lines above it and its decorators
    included: (first, end) 1-based, end exclusive. One code-generation pass, as libcst's own
    position metadata makes."""
    state = _SpanRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    tokens = state.tokens
    breaks = [0]
    for token in tokens:
        breaks.append(breaks[-1] + _line_breaks(token))
    spans = {}
    for key, (start, end) in state.spans.items():
        end = min(end, len(tokens))  # the module drops the newline a file does not end with
        partial = end > start and _line_breaks(tokens[end - 1][-1:]) == 0
        spans[key] = (breaks[start] + 1, breaks[end] + 1 + partial)
    return spans


def generate(module: cst.Module, nodes: Iterable[cst.CSTNode], indent: Iterable[str]) -> str:
    """The code of ``nodes`` as it reads inside blocks indented by ``indent`` (the indentation of
    each enclosing block, outermost first): what the whole module's code holds there."""
    state = CodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline, indent_tokens=list(indent)
    )
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)


@dataclasses.dataclass
class _SpanRecorder(CodegenState):
    """Code generation that notes where each statement's tokens start and end."""

    starts: dict[int, int] = dataclasses.field(default_factory=dict)
    spans: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.starts[id(node)] = len(self.tokens)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.spans[id(node)] = (self.starts.pop(id(node)), len(self.tokens))


def _line_breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def source_lines(text: str) -> list[str]:
    """The lines as Python and editors count them (ends kept): only \\n, \\r\\n and \\r end a line,
    not the form feeds and other separators ``str.splitlines`` also breaks at."""
    return _LINE.findall(text)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
