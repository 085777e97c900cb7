"""Small helpers over libcst syntax trees, shared by the interpreter, the facts and the fixes."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence

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


def parent_links(module: cst.Module) -> dict[int, cst.CSTNode]:
    """The parent of every syntax node (by ``id``) but the module."""
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


class Layout:
    """Where each node of a module is in its code (what libcst's ``PositionProvider`` computes,
    without its per-token and per-node objects): ``position`` is libcst's syntactic range of a
    node, ``statement_lines`` the lines a statement occupies with the comment lines above it and
    its decorators.

    A part of the module (its header lines, one top-level statement, its footer lines) is laid out
    by a code-generation pass of its own, when a node in it is first asked about: a finding costs
    the statement it is in, not the file. Where a statement starts comes from CPython's parse of
    ``code`` (the module's text), so the statements before it are not generated; ``parents``, the
    parent links of the module's syntax nodes (those ``child_nodes`` reaches), say which statement
    a node is in."""

    def __init__(self, module: cst.Module, code: str, parents: Mapping[int, cst.CSTNode]) -> None:
        self._module = module
        self._parents = parents
        self._anchor_lines = _anchor_lines(module, code)
        self._parts: dict[int, int] | None = None
        self._spans: dict[int, tuple[int, int]] = {}  # a laid-out part -> its first token, its end marker
        self._state = _LayoutRecorder(default_indent=module.default_indent, default_newline=module.default_newline)
        self._starts: list[tuple[int, int]] = []  # (line, column) where each token recorded starts

    def holds(self, node: cst.CSTNode) -> bool:
        """Is ``node``, a syntax node, part of this module?"""
        return node is self._module or id(node) in self._parents

    def position(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._range(node, self._state.ranges)
        return CodeRange(CodePosition(*self._starts[start]), CodePosition(*self._starts[end]))

    def statement_lines(self, statement: cst.BaseStatement) -> tuple[int, int]:
        """(first, end) 1-based, end exclusive."""
        start, end = self._range(statement, self._state.statements)
        return self._starts[start][0], self._starts[end][0]

    def _range(self, node: cst.CSTNode, ranges: dict[int, tuple[int, int]]) -> tuple[int, int]:
        """The token indexes of ``node`` in ``ranges``, once the part that holds it is laid out."""
        if id(node) not in ranges:
            if self.holds(node):
                self._lay_out(self._part_of(node))
            else:  # whitespace or punctuation, which ``parents`` does not know: the parts in turn
                for part in range(self._footer + 1):
                    self._lay_out(part)
                    if id(node) in ranges:
                        break
        return ranges[id(node)]

    @property
    def _footer(self) -> int:
        """The parts: 0 the header lines, 1 to n the module's statements, n + 1 the footer lines."""
        return len(self._module.body) + 1

    def _part_of(self, node: cst.CSTNode) -> int:
        if node is self._module:
            return self._footer  # its range ends with the footer's
        if self._parts is None:
            module = self._module
            self._parts = {id(line): 0 for line in module.header} | {id(line): self._footer for line in module.footer}
            self._parts |= {id(statement): part for part, statement in enumerate(module.body, 1)}
        while (parent := self._parents[id(node)]) is not self._module:
            node = parent
        return self._parts[id(node)]

    def _lay_out(self, part: int) -> None:
        if part in self._spans:
            return
        module, state = self._module, self._state
        anchored = 0 < part < self._footer and self._anchor_lines is not None
        first_line = 1
        if part > 0 and not anchored:  # it starts where the part before it ends
            for earlier in range(len(self._spans), part) if self._anchor_lines is None else (part - 1,):
                self._lay_out(earlier)
            first_line = self._starts[self._spans[part - 1][1]][0]
        begin = len(state.tokens)
        for node in _part_nodes(module, part):
            node._codegen(state)
        if part == self._footer and not module.header and not module.body and not module.footer:
            if module.has_trailing_newline:
                state.add_token(state.default_newline)  # what libcst generates for an empty module
        if anchored:
            statement = module.body[part - 1]
            prefix = state.tokens[begin : _anchor_index(state.ranges, statement)]
            first_line = self._anchor_lines[part - 1] - sum(_line_breaks(token) for token in prefix)
        state.add_token("")  # its start is where the part ends
        self._spans[part] = (begin, len(state.tokens) - 1)
        self._note_starts(state.tokens[begin:], first_line)
        if part == self._footer:
            self._lay_out(0)
            state.ranges[id(module)] = (self._spans[0][0], self._spans[part][1])

    def _note_starts(self, tokens: list[str], line: int) -> None:
        """Where each of a part's tokens starts, the part starting at column 0 of ``line``."""
        starts, column = self._starts, 0
        for token in tokens:
            starts.append((line, column))
            breaks = _line_breaks(token)
            if breaks:
                line += breaks
                column = len(token) - max(token.rfind("\n"), token.rfind("\r")) - 1
            else:
                column += len(token)


def _part_nodes(module: cst.Module, part: int) -> Sequence[cst.CSTNode]:
    if part == 0:
        return module.header
    return module.footer if part == len(module.body) + 1 else (module.body[part - 1],)


def _anchor_index(ranges: dict[int, tuple[int, int]], statement: cst.BaseStatement) -> int:
    """The index of a statement's first token after its leading lines and decorators: where
    CPython starts it (libcst's syntactic range of it, or of its first small statement)."""
    first = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else statement
    return ranges[id(first)][0]


_BACKSLASH_LINE = re.compile(r"(?:^|(?<=[\r\n]))[ \t\f]*\\(?:\r\n|\r|\n)")


def _anchor_lines(module: cst.Module, code: str) -> list[int] | None:
    """The line each top-level statement of ``module`` starts on after its leading lines and
    decorators, from CPython's parser (in C: a fraction of a code-generation pass); None where its
    statements and libcst's may not match: then each statement is placed after the one before."""
    if _BACKSLASH_LINE.search(code):
        return None  # libcst drops some lines that hold only a backslash: its lines are not the file's
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequences are not ours to report
            body = ast.parse(code.removeprefix("\ufeff")).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a null byte
        return None
    lines, index = [], 0
    for statement in module.body:
        if index >= len(body):
            return None
        lines.append(body[index].lineno)
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return lines if index == len(body) else None


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
    # No pop_trailing_newline: the module's own code generation, which calls it for a file that
    # does not end with a newline, is not run, and libcst's positions count that newline.

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
