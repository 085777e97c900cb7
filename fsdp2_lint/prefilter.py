"""Which selected rules can fire on a file, decided from its bytes before anything is parsed.

Each rule declares, in conjunctive normal form, the tokens a file must contain for the rule to
fire (``Rule.requires``). Parsing with libcst costs tens of milliseconds a file, so a file whose
bytes cannot satisfy any selected rule is never parsed. Two stages, both exact:

1. the raw bytes, each token searched at most once per file (rules share tokens);
2. for files that pass, the same check on the code without its comments and its docstrings (string
   literals that are a whole statement): license headers, comments and docstrings mention
   "distributed", "checkpoint" or "rank" far more often than code calls them, and none of them
   changes what the interpreter sees.

In a project, a file is judged with the modules its analysis can read (its import closure): a
token counts when the code of any of them holds it, each module's code stripped on its own, and
each module's tokens found once per run (:class:`TokenFacts`) however many files import it.

A token is a substring, or a :class:`Word`: an identifier that contains a substring and that a
predicate accepts (``local_rank`` counts as a rank, ``maintain`` or ``ranking`` do not). A word
that only a name in the code can stand for (a collective the interpreter resolves) may be declared
``in_strings=False``: in the second stage it counts only outside string literals, so a docstring's
or a log message's "all_reduce" admits nothing.
What the prefilter reads of a rule is its ``requires`` (:class:`Gated`); it imports nothing of ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

# The second stage's patterns, compiled by `re` (and kept in its cache) when a file first reaches
# that stage: a run whose files the first stage rejects compiles none.
# A string literal (any quotes; prefixes are identifier characters and need no matching) or a
# comment. Scanning left to right, a `#` inside a string is consumed by the string first.
_STRING_OR_COMMENT = (  # loops unrolled: docstrings are long
    rb'"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""'
    rb"|'''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''"
    rb'|"[^"\\\r\n]*(?:\\[\s\S][^"\\\r\n]*)*"'
    rb"|'[^'\\\r\n]*(?:\\[\s\S][^'\\\r\n]*)*'"
    rb"|#[^\r\n]*"
)
_FSTRING_PREFIX = rb"[fF][rR]?$|[rR][fF]$"


_IDENTIFIER = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True)
class Word:
    """A token present when some identifier-like word of the text contains ``core`` and
    ``accepts`` takes the whole word (a set of words, or a predicate). Non-ASCII letters end a
    word: the identifiers the interpreter classifies are ASCII, so such a word is never one of them.
    Rules give a set, or a function of a module that imports no parser: the rule index
    (``fsdp2_lint.rules._index``) names it without importing the rule.

    ``in_strings=False``: once comments are stripped, the word counts only in the code outside
    string literals (an f-string counts as code: its fields are). A string becomes a name only
    through a call that reads it (``getattr(dist, "barrier")``), so a rule that declares such
    words also requires, in a group of their own, one of them or the name of each such call."""

    core: str
    accepts: frozenset[str] | Callable[[str], bool]
    in_strings: bool = True

    def occurs_in(self, text: bytes) -> bool:
        core = self.core.encode()
        accepts = self.accepts.__contains__ if isinstance(self.accepts, frozenset) else self.accepts
        start = text.find(core)
        while start != -1:
            left, right = start, start + len(core)
            while left and text[left - 1] in _IDENTIFIER:
                left -= 1
            while right < len(text) and text[right] in _IDENTIFIER:
                right += 1
            if accepts(text[left:right].decode("ascii")):
                return True
            start = text.find(core, right)
        return False


Token = str | Word


class Gated(Protocol):
    """What the prefilter reads of a rule (a :class:`fsdp2_lint.rule.Rule` class): the tokens it
    requires, in conjunctive normal form."""

    requires: tuple[tuple[Token, ...], ...]


G = TypeVar("G", bound=Gated)


class Tokens:
    """Token presence in one text, each token searched for at most once. ``bare`` is the text
    without its string literals, where a word declared ``in_strings=False`` is looked for (by
    default the text itself: the first stage, which keeps every word a file's bytes hold)."""

    def __init__(self, text: bytes, bare: bytes | None = None) -> None:
        self.text = text
        self.bare = text if bare is None else bare
        self.found: dict[Token, bool] = {}

    def has(self, token: Token) -> bool:
        present = self.found.get(token)
        if present is None:
            if isinstance(token, Word):
                present = token.occurs_in(self.text if token.in_strings else self.bare)
            else:
                present = token.encode() in self.text
            self.found[token] = present
        return present

    def satisfies(self, rule: Gated) -> bool:
        # groups whose tokens earlier rules looked up come first: a known miss costs no scan
        groups = sorted(rule.requires, key=lambda group: sum(token not in self.found for token in group))
        return all(any(self.has(token) for token in group) for group in groups)


def applicable_rules(
    rules: Sequence[G], data: bytes, imported: Sequence[bytes] = (), facts: TokenFacts | None = None
) -> list[G]:
    """The rules among ``rules`` that can report something in a file with these bytes, whose
    analysis also reads the code of ``imported`` (the project modules it imports, directly or not):
    a token counts when the code of any of them holds it. ``facts`` remembers each module's tokens
    for the next file that imports it (or reads it alone)."""
    if imported or facts is not None:
        return _applicable_across(rules, [data, *imported], facts or TokenFacts())
    raw = Tokens(data)
    passing = [rule for rule in rules if raw.satisfies(rule)]
    if not passing:
        return passing
    code, bare = code_and_bare(data)
    if code is data and bare is data:
        return passing
    stripped = Tokens(code, bare)
    return [rule for rule in passing if stripped.satisfies(rule)]


class TokenFacts:
    """Which of a set of tokens each text's code holds (comments aside), each text scanned once per
    set: a module many files import is read once, not once per file. Texts are told apart by
    content."""

    def __init__(self) -> None:
        self._present: dict[frozenset[Token], dict[bytes, frozenset[Token]]] = {}

    def present(self, tokens: frozenset[Token], data: bytes) -> frozenset[Token]:
        known = self._present.setdefault(tokens, {})
        found = known.get(data)
        if found is None:
            found = known[data] = _present_in_code(tokens, data)
        return found


def _applicable_across(rules: Sequence[G], texts: Sequence[bytes], facts: TokenFacts) -> list[G]:
    # Each text's code is judged alone: Python tokenizes each module alone, so no comment or string
    # runs on into the next one.
    tokens = frozenset(token for rule in rules for group in rule.requires for token in group)
    present = frozenset().union(*(facts.present(tokens, text) for text in texts))
    return [rule for rule in rules if all(any(token in present for token in group) for group in rule.requires)]


def _present_in_code(tokens: frozenset[Token], data: bytes) -> frozenset[Token]:
    """The tokens in the code of ``data``: in its bytes first, then (only if some are) in its code
    without comments. No token holds a line break, so one in the code is in the bytes too, and a
    rule these tokens satisfy is one both stages of :func:`applicable_rules` admit."""
    raw = Tokens(data)
    found = [token for token in tokens if raw.has(token)]
    code, bare = code_and_bare(data) if found else (data, data)
    if code is data and bare is data:
        return frozenset(found)
    stripped = Tokens(code, bare)
    return frozenset(token for token in found if stripped.has(token))


def code_and_bare(data: bytes) -> tuple[bytes, bytes]:
    """The code of ``data`` (its bytes without comments and without the string literals that are a
    whole statement, as docstrings are), and the bytes without comments and without any string
    literal, each replaced by a space. An f-string is kept in both: its fields are code. Both are
    ``data`` itself when a string cannot be delimited with certainty (an f-string whose replacement
    field reuses its own quote, Python 3.12+, would make the scan mistake code for a comment), or
    when there is nothing to remove. A module that reads ``__doc__`` keeps its docstrings."""
    code: list[bytes] = []
    bare: list[bytes] = []
    start = bare_start = counted = depth = 0
    docstrings = b"__doc__" not in data
    fstring_prefix = re.compile(_FSTRING_PREFIX)
    for match in re.finditer(_STRING_OR_COMMENT, data):
        literal = match.group()
        if docstrings:  # the brackets open before this string or comment
            depth += _brackets(data, counted, match.start())
            counted = match.end()
        if literal[:1] == b"#":
            code.append(data[start : match.start()])
            start = match.end()
            bare.append(data[bare_start : match.start()])
            bare_start = match.end()
            continue
        if fstring_prefix.search(data, max(0, match.start() - 2), match.start()):
            if _open_field(literal):
                return data, data
            continue
        bare.append(data[bare_start : match.start()])
        bare.append(b" ")
        bare_start = match.end()
        if docstrings and depth == 0:
            begin = _prefix_start(data, match.start())
            if _whole_statement(data, begin, match.end()):
                code.append(data[start:begin])
                start = match.end()
    if code:
        code.append(data[start:])
    if bare:
        bare.append(data[bare_start:])
    return (b"".join(code) if code else data), (b"".join(bare) if bare else data)


_OPENING, _CLOSING = (b"(", b"[", b"{"), (b")", b"]", b"}")
_STRING_PREFIX = frozenset(b"rRbBuU")
_STATEMENT_END = rb"[ \t\f]*(?:[\r\n#;]|\Z)"


def _brackets(data: bytes, start: int, end: int) -> int:
    """How many more brackets open than close in ``data[start:end]`` (code: no string, no comment)."""
    piece = data[start:end]
    return sum(map(piece.count, _OPENING)) - sum(map(piece.count, _CLOSING))


def _prefix_start(data: bytes, quote: int) -> int:
    """Where the string literal whose quote is at ``quote`` starts: before its prefix (``rb"..."``)."""
    begin = quote
    while begin > max(0, quote - 2) and data[begin - 1] in _STRING_PREFIX:
        begin -= 1
    return begin


def _whole_statement(data: bytes, begin: int, end: int) -> bool:
    """Is the string literal ``data[begin:end]``, outside any bracket, a statement of its own: the
    first thing on its line, which does not continue the line before (``\\``), and the last
    thing on it (a comment or ``;`` may follow)? Such a string is evaluated and thrown away."""
    line = data.rfind(b"\n", 0, begin) + 1
    if data[line:begin].strip(b" \t\f"):
        return False
    before = line - 2  # the last byte of the line before, if any
    if before >= 0 and data[before] == 13:  # \r\n
        before -= 1
    if before >= 0 and data[before] == 92:  # a backslash: this line continues that one
        return False
    return re.compile(_STATEMENT_END).match(data, end) is not None


def _open_field(literal: bytes) -> bool:
    """Does an f-string literal end inside a replacement field (``f"{d["`` of ``f"{d["k"]}"``)?"""
    text = literal.replace(b"{{", b"").replace(b"}}", b"")
    return text.count(b"{") > text.count(b"}")
