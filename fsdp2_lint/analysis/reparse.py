"""An edited module parsed again from its top-level statements around the edit (libcst has no
incremental parser, and its parse of a 2,000-line buffer takes most of an editor's lint).

The text that differs from the previous one lies in a run of top-level statements. Those are parsed
again with one unchanged statement on each side, and spliced between the previous tree's other
statements, which are reused as they are. Where that cannot be shown to give what a parse of the
whole text gives, ``None`` says to parse it whole:

- The statement before the edit and the one after it must come out of the part's parse exactly as
  they were (``deep_equals``): then the part starts and ends where a top-level statement does in the
  new text too (nothing opened in the edit runs on into the text after it, no comment line changed
  owner), and the statements around it parse as before.
- The module's own settings must be those of the whole text: its encoding and line ending are read
  from its first two lines (the edit must come after them), and its indentation from its first
  indented block: the part's blocks must have the previous indentation, and where the part holds
  none, the first block must come before it, or not be among the statements it replaces.
- A part that does not parse leaves the error to the parse of the whole text.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from fsdp2_lint.analysis.syntax import child_nodes

# What an indented block can be under: only compound statements and their clauses hold one.
_CLAUSES = (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


@dataclass
class Parsed:
    """A module's tree and the text it was parsed from; ``lengths``, where known, the length of its
    header's code and of each top-level statement's (its leading lines included)."""

    module: cst.Module
    text: str
    lengths: list[int] | None = None

    def statement_lengths(self) -> list[int] | None:
        """The lengths, laid out once (code generation of the whole tree); None where libcst's code
        generation does not give the text back (it drops a few odd spellings, such as a backslash on
        a line of its own), so where a statement starts is not known."""
        if self.lengths is None:
            code = self.module.code_for_node
            codes = ["".join(map(code, self.module.header)), *map(code, self.module.body)]
            self.lengths = [len(written) for written in codes] if _written_at(self.text, 0, codes) else []
        return self.lengths or None


def reparsed(previous: Parsed, text: str, parse: Callable[[str], cst.Module]) -> Parsed | None:
    """``text`` parsed, the statements of ``previous`` outside the edit reused; None when only a
    parse of the whole text can tell (see the module's docs)."""
    old, body = previous.text, previous.module.body
    if old == text or len(body) < 2:
        return None
    lengths = previous.statement_lengths()
    if lengths is None:
        return None
    starts = _starts(lengths)  # starts[k]: where statement k begins; starts[-1]: where the body ends
    prefix = _common_prefix(old, text)
    if prefix <= _second_line_end(old):
        return None  # the encoding or the line ending may have changed
    changed_end = len(old) - _common_suffix(old, text, len(old) - prefix, len(text) - prefix)
    before = bisect.bisect_right(starts, prefix) - 2  # the statement before the one edited
    if before < 0:
        return None
    holder = bisect.bisect_right(starts, changed_end) - 1  # the statement at the edit's first unchanged character
    after = holder if starts[holder] >= changed_end else holder + 1
    at_end = after >= len(body)
    old_end = len(old) if at_end else starts[after + 1]
    new_end = old_end + len(text) - len(old)
    try:
        part = parse(text[starts[before] : new_end])
    except Exception:  # noqa: BLE001 - a part that does not parse: the whole text's parse says why
        return None
    statements = _spliced(part, body[before], None if at_end else body[after])
    if statements is None:
        return None
    indent = _default_indent(previous.module, before, after, part)
    if indent is None:
        return None
    module = previous.module.with_changes(
        body=(*body[:before], *statements, *body[min(after, len(body)) + 1 :]),
        footer=part.footer if at_end else previous.module.footer,
        has_trailing_newline=part.has_trailing_newline if at_end else previous.module.has_trailing_newline,
        default_indent=indent,
    )
    written = [module.code_for_node(statement) for statement in statements[1 : None if at_end else -1]]
    if not _written_at(text, starts[before + 1], written):
        return None
    kept_after = [] if at_end else lengths[after + 1 :]  # the statement after the edit, and those below it
    return Parsed(module, text, [*lengths[: before + 2], *map(len, written), *kept_after])


def _spliced(
    part: cst.Module, before: cst.BaseStatement, after: cst.BaseStatement | None
) -> list[cst.BaseStatement] | None:
    """The part's statements, the unchanged ones around the edit as they were (the previous
    tree's nodes); None unless those came out of the part's parse as they were."""
    if len(part.body) < (2 if after is not None else 1):
        return None
    first = part.body[0]
    first = first.with_changes(leading_lines=(*part.header, *first.leading_lines))  # its comments above
    if not first.deep_equals(before):
        return None
    if after is None:
        return [before, *part.body[1:]]
    if part.footer or not part.has_trailing_newline or not part.body[-1].deep_equals(after):
        return None
    return [before, *part.body[1:-1], after]


def _default_indent(module: cst.Module, before: int, after: int, part: cst.Module) -> str | None:
    """The whole text's indentation (its first indented block's, libcst's ``default_indent``), when
    it is the previous one's, which the reused statements' blocks are written against, and the
    part's, which its blocks are written against; None when it may not be."""
    if any(map(_holds_block, part.body)):
        return module.default_indent if part.default_indent == module.default_indent else None
    if any(map(_holds_block, module.body[:before])):
        return module.default_indent
    return None if any(map(_holds_block, module.body[before : after + 1])) else module.default_indent


def _holds_block(statement: cst.CSTNode) -> bool:
    """Does the statement hold an indented block (a line that indents)?"""
    pending = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.IndentedBlock):
            return True
        if isinstance(node, _CLAUSES):
            pending.extend(child_nodes(node))
    return False


def _written_at(text: str, start: int, codes: Sequence[str]) -> bool:
    """Are ``codes`` what ``text`` holds one after the other from ``start``?"""
    for code in codes:
        if not text.startswith(code, start):
            return False
        start += len(code)
    return True


def _starts(lengths: Sequence[int]) -> list[int]:
    starts = []
    total = 0
    for length in lengths:
        total += length
        starts.append(total)
    return starts


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (halving: string comparisons run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, a_limit: int, b_limit: int) -> int:
    """The length of the longest common suffix, at most ``a_limit`` and ``b_limit`` characters."""
    low, high = 0, min(a_limit, b_limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _second_line_end(text: str) -> int:
    first = text.find("\n")
    second = text.find("\n", first + 1) if first >= 0 else -1
    return len(text) if second < 0 else second
