"""Small helpers over libcst syntax trees, shared by the interpreter, the facts and the fixes."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterable, Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState  # the state libcst's own code generation uses
from libcst.metadata import CodePosition, CodeRange


def statements(block: cst.BaseSuite | cst.Module) -> list[cst.CSTNode]:
    body = block.body
    return list(body) if isinstance(body, (list, tuple)) else [body]


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def sole_return(function: cst.FunctionDef) -> cst.BaseExpression | None:
    """The expression a function returns when its body (a docstring aside) is that one ``return``."""
    body = list(statements(function.body))
    if body and _is_docstring(body[0]):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    statement = body[0].body[0]
    return statement.value if isinstance(statement, cst.Return) else None


# Expressions that run code of their own when evaluated.
_CODE_RUNNING = (cst.Call, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Await, cst.Yield)


def runs_no_code(expression: cst.CSTNode) -> bool:
    """Does evaluating ``expression`` run no code of its own (no call, lambda, comprehension)?"""
    stack = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, _CODE_RUNNING):
            return False
        stack.extend(child_nodes(node))
    return True


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


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


class Layout:
    """Where each node of a module is in its code, from one code-generation pass (what libcst's
    ``PositionProvider`` computes, without its per-token and per-node objects): ``position`` is
    libcst's syntactic range of a node, ``statement_lines`` the lines a statement occupies with the
    comment lines above it and its decorators."""

    def __init__(self, module: cst.Module) -> None:
        state = _LayoutRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(state)
        self._ranges = state.ranges
        self._statements = state.statements
        self._tokens = state.tokens
        self._starts: list[tuple[int, int]] | None = None

    def holds(self, node: cst.CSTNode) -> bool:
        """Is ``node`` part of this module?"""
        return id(node) in self._ranges

    def position(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._ranges[id(node)]
        return CodeRange(CodePosition(*self._start_of(start)), CodePosition(*self._start_of(end)))

    def statement_lines(self, statement: cst.BaseStatement) -> tuple[int, int]:
        """(first, end) 1-based, end exclusive."""
        start, end = self._statements[id(statement)]
        return self._start_of(start)[0], self._start_of(end)[0]

    def _start_of(self, index: int) -> tuple[int, int]:
        """(line, column) where the token at ``index`` starts (1-based line, 0-based column)."""
        if self._starts is None:
            starts, line, column = [], 1, 0
            for token in self._tokens:
                starts.append((line, column))
                breaks = _line_breaks(token)
                if breaks:
                    line += breaks
                    column = len(token) - max(token.rfind("\n"), token.rfind("\r")) - 1
                else:
                    column += len(token)
            starts.append((line, column))
            self._starts = starts
        return self._starts[index]


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
class _LayoutRecorder(CodegenState):
    """Code generation that notes token indexes: each node's syntactic range (or, for a node that
    records none, the range of all its tokens, as libcst does) and each statement's tokens."""

    ranges: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    statements: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    _open: list[int] = dataclasses.field(default_factory=list)

    def pop_trailing_newline(self) -> None:
        """Keep the newline a file does not end with: libcst's positions count it (a statement
        on the last line ends at the start of the next)."""

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._open.pop()
        self.ranges.setdefault(id(node), (start, len(self.tokens)))
        if isinstance(node, cst.BaseStatement):
            self.statements[id(node)] = (start, len(self.tokens))

    @contextlib.contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        start = len(self.tokens)
        try:
            yield
        finally:
            end = len(self.tokens)
            if start_node is not None:
                start = self.ranges[id(start_node)][0]
            if end_node is not None:
                end = self.ranges[id(end_node)][1]
            self.ranges[id(node)] = (start, end)


def _line_breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def source_lines(text: str) -> list[str]:
    """The lines as Python and editors count them (ends kept): only \\n, \\r\\n and \\r end a line,
    not the form feeds and other separators ``str.splitlines`` also breaks at."""
    return _LINE.findall(text)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
