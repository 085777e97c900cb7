"""How deep a file's syntax tree can nest, estimated from its tokens before anything is parsed.

libcst's native parser recurses once per level of the tree it builds, and its time and memory grow
with the square of the depth: 8,000 `and` terms written over short lines overflow its stack (a
segmentation fault), 8,000 unary minus signs take 3.5 GB and 20 s, a `+` chain runs for a minute
and then crashes. CPython keeps such chains flat or refuses them, so the depth is estimated from
the tokens, across lines, without recursion.

The estimate is an upper bound of the tree's depth for the forms that nest: within one
comma-separated item of one bracket level, every operator, keyword operator (``and``, ``not``,
``lambda``, ``if``/``else``, ...), attribute dot, string literal (adjacent literals nest) and
bracket (a call or subscript wraps what precedes it) can add a level; a bracket adds its own
contents' depth; indented blocks add theirs. Commas, semicolons and the ends of logical lines
start a new item. Strings and comments are skipped, except f-strings, whose replacement fields
are code and are scanned the same way.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize

# the levels one bracket or one indented block adds: `[[x]]` is List > Element > List > Element
_BRACKET_LEVELS = 3
_BLOCK_LEVELS = 3

_TOKEN = re.compile(
    r"""
    (?=[rRbBuUfF'"\#\\\r\n()\[\]{},;*/<>\-:+%@&|^~=!.aoniefl])  # only where a token below can start: a fifth faster
    (?:(?P<string>(?:[rRbBuUfF]{1,2})?(?:
        '''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''
      | \"\"\"[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*\"\"\"
      | '[^'\\\r\n]*(?:\\[\s\S][^'\\\r\n]*)*'
      | "[^"\\\r\n]*(?:\\[\s\S][^"\\\r\n]*)*"))
    | (?P<comment>\#[^\r\n]*)
    | (?P<continuation>\\(?:\r\n|\r|\n))
    | (?P<newline>(?:\r\n|\r|\n)(?P<indent>[ \t\f]*))
    | (?P<open>[(\[{])
    | (?P<close>[)\]}])
    | (?P<separator>[,;])
    | (?P<operator>\*\*|//|<<|>>|->|:=|[-+*/%@&|^~<>=!.]|\b(?:and|or|not|lambda|if|else|for|in|is|await)\b))
    """,
    re.VERBOSE,
)
_FSTRING = re.compile(r"[rRbBuU]?[fF]|[fF][rR]")
# Texts whose depth is remembered: a lint asks about its file three times (is it heavy, may it be
# parsed, as a project module too), and about each module its analysis follows.
_REMEMBERED = 8


class _Level:
    """One bracket level (or the file's top level): the depth of its deepest item so far, and what
    the current item has gathered: its operators and its deepest bracket."""

    __slots__ = ("deepest", "operators", "inner")

    def __init__(self) -> None:
        self.deepest = self.operators = self.inner = 0

    def end_item(self) -> None:
        self.deepest = max(self.deepest, self.operators + self.inner)
        self.operators = self.inner = 0


@functools.lru_cache(maxsize=_REMEMBERED)
def nesting_depth(data: bytes) -> int:
    """An upper bound of the depth of the syntax tree libcst builds for ``data`` (see the module
    docstring); 0 for bytes that do not decode, which the parser then rejects on its own."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return 0
    return _text_depth(text, indented=True)


def _text_depth(text: str, indented: bool) -> int:
    levels = [_Level()]
    indents = [0]
    deepest = 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        level = levels[-1]
        if kind == "string":
            level.operators += 1
            if _FSTRING.fullmatch(text, match.start(), _quote_start(match)):
                level.inner = max(level.inner, _text_depth(_fstring_fields(match), indented=False))
        elif kind == "operator":
            level.operators += 1
        elif kind == "open":
            level.operators += 1
            levels.append(_Level())
        elif kind == "close" and len(levels) > 1:
            _close(levels)
        elif kind == "separator":
            level.end_item()
        elif kind == "newline" and len(levels) == 1:
            level.end_item()
            deepest = max(deepest, level.deepest + _BLOCK_LEVELS * (len(indents) - 1))
            level.deepest = 0
            if indented and text[match.end() : match.end() + 1] not in ("\r", "\n", "#"):
                _indent(indents, match.group("indent"))
    while len(levels) > 1:  # unclosed brackets: what they hold counts all the same
        _close(levels)
    levels[0].end_item()
    return max(deepest, levels[0].deepest + _BLOCK_LEVELS * (len(indents) - 1))


def _close(levels: list[_Level]) -> None:
    inner = levels.pop()
    inner.end_item()
    levels[-1].inner = max(levels[-1].inner, inner.deepest + _BRACKET_LEVELS)


def _fstring_fields(match: re.Match[str]) -> str:
    """The text between an f-string's quotes: its replacement fields are code."""
    literal = match.group()[_quote_start(match) - match.start() :]
    quote = 3 if literal[:3] in ("'''", '"""') else 1
    return literal[quote:-quote]


def _quote_start(match: re.Match[str]) -> int:
    literal = match.group()
    return match.start() + len(literal) - len(literal.lstrip("rRbBuUfF"))


def _indent(indents: list[int], whitespace: str) -> None:
    """Track the indentation stack as Python's tokenizer does (a tab moves to the next multiple of 8)."""
    width = len(whitespace.expandtabs(8))
    while width < indents[-1]:
        indents.pop()
    if width > indents[-1]:
        indents.append(width)
