"""Small helpers over libcst syntax trees, shared by the interpreter, the facts and the fixes."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property

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


# Definitions whose bodies are not the enclosing function's own code.
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def own_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes under ``node`` that its own code holds: not those of functions, classes or lambdas
    defined in it (the definitions themselves are yielded)."""
    stack = list(child_nodes(node))
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, _SCOPES):
            stack.extend(child_nodes(current))


def is_zero(node: cst.BaseExpression) -> bool:
    """Is ``node`` the literal ``0``?"""
    return isinstance(node, cst.Integer) and int(node.evaluated_value) == 0


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
# Whether a type is a syntax node: ``CSTNode`` is an abstract base class, and ``isinstance`` against
# one costs a tenth of a microsecond more than this look-up, a third of the parent links' time.
_IS_NODE: dict[type, bool] = {}
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
        if _is_node(value):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (item for item in value if _is_node(item))


def _is_node(value: object) -> bool:
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


# The parent links under each top-level statement (or header or footer line) of a module, by the
# statement's ``id``: the statement itself (kept alive, so that no other node takes its ``id``) and its links.
StatementLinks = dict[int, tuple[cst.CSTNode, dict[int, cst.CSTNode]]]


def parent_links(module: cst.Module, kept: StatementLinks | None = None) -> dict[int, cst.CSTNode]:
    """The parent of every syntax node (by ``id``) but the module. ``kept``: the links under the
    top-level statements of the module's earlier trees, reused for the statements it shares with
    them (an edit's partial re-parse keeps the others' nodes), and filled in with its own."""
    if kept is None:
        return _links_under(module)
    parents: dict[int, cst.CSTNode] = {}
    for part in child_nodes(module):
        parents[id(part)] = module
        if id(part) not in kept:
            kept[id(part)] = (part, _links_under(part))
        parents.update(kept[id(part)][1])
    return parents


def _links_under(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [root]
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
    by a code-generation pass of its own when a node in it is first asked about: a finding costs
    the statement it is in, not the file. ``parents``, the parent links of the module's syntax
    nodes (those ``child_nodes`` reaches), say which statement holds a node; ``code``, the
    module's text, where a statement starts, without generating the statements above it."""

    def __init__(self, module: cst.Module, code: str, parents: Mapping[int, cst.CSTNode]) -> None:
        self._module = module
        self._code = code
        self._parents = parents
        self._parts: dict[int, int] | None = None
        self._spans: dict[int, tuple[int, int]] = {}  # a laid-out part: its first token, its end marker
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
        """Generate a part's code and note where its tokens start; an empty token marks its end."""
        if part in self._spans:
            return
        module, state = self._module, self._state
        begin = len(state.tokens)
        for node in _part_nodes(module, part):
            node._codegen(state)
        if part == self._footer and module.has_trailing_newline and not (module.header or module.body or module.footer):
            state.add_token(state.default_newline)  # what libcst generates for an empty module
        state.add_token("")
        end = len(state.tokens) - 1
        self._spans[part] = (begin, end)
        self._starts.extend([(0, 0)] * (len(state.tokens) - len(self._starts)))  # placed below
        first_line = 1 if part == 0 else self._found_line(begin, end) or self._parsed_line(part, begin)
        if first_line is None:  # it starts where the part before it ends
            self._lay_out_in_turn(part - 1)
            first_line = self._starts[self._spans[part - 1][1]][0]
        self._starts[begin : end + 1] = _token_starts(state.tokens[begin : end + 1], first_line)
        if part == self._footer:
            self._lay_out(0)
            state.ranges[id(module)] = (self._spans[0][0], end)

    def _lay_out_in_turn(self, part: int) -> None:
        """Lay out ``part`` and the parts before it not yet laid out, first to last (each then
        finds the one before it laid out: no recursion down the file)."""
        earliest = part
        while earliest > 0 and earliest - 1 not in self._spans:
            earliest -= 1
        for earlier in range(earliest, part + 1):
            self._lay_out(earlier)

    def _found_line(self, begin: int, end: int) -> int | None:
        """The line a part starts on where its code is found once in the module's text. libcst
        gives back the text it parsed, so the part's code is there, where the part is; found once,
        nowhere else. Not in a text with a form feed (libcst drops some) nor where libcst drops lines."""
        code = self._code
        if "\f" in code or self._drops_lines:
            return None
        part_code = "".join(self._state.tokens[begin:end])
        offset = code.find(part_code)
        if offset < 0 or code.find(part_code, offset + 1) >= 0:
            return None
        return 1 + code.count("\n", 0, offset) + code.count("\r", 0, offset) - code.count("\r\n", 0, offset)

    def _parsed_line(self, part: int, begin: int) -> int | None:
        """The line a statement part starts on from CPython's parse of the module's text: the
        line of its first token after its leading lines and decorators, less the line breaks
        generated before that token."""
        if part == self._footer or self._anchor_lines is None:
            return None
        statement = self._module.body[part - 1]
        before = self._state.tokens[begin : _anchor_index(self._state.ranges, statement)]
        return self._anchor_lines[part - 1] - sum(_line_breaks(token) for token in before)

    @cached_property
    def _drops_lines(self) -> bool:
        """Does libcst drop line breaks of this text (some lines that hold only a backslash)?"""
        return _BACKSLASH_LINE.search(self._code) is not None

    @cached_property
    def _anchor_lines(self) -> list[int] | None:
        return None if self._drops_lines else _anchor_lines(self._module, self._code)


def _token_starts(tokens: list[str], line: int) -> list[tuple[int, int]]:
    """(line, column) where each token starts, the first at column 0 of ``line``."""
    starts, column = [], 0
    for token in tokens:
        starts.append((line, column))
        breaks = _line_breaks(token)
        if breaks:
            line += breaks
            column = len(token) - max(token.rfind("\n"), token.rfind("\r")) - 1
        else:
            column += len(token)
    return starts


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
    decorators, from CPython's parser; None where its statements and libcst's may not match."""
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
