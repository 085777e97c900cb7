"""A document's text as the protocol sees it.

The engine counts lines and characters (code points); LSP positions are 0-based and count columns
in the negotiated encoding, UTF-16 code units by default, so a character outside the Basic
Multilingual Plane before a violation is two columns to the editor. Lines break at ``\\n``,
``\\r\\n`` and ``\\r`` only: ``str.splitlines`` also breaks at form feeds and other separators
that Python source may contain, which would shift every later line.
"""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from collections.abc import Callable

from lsprotocol import types

LINE_BREAK = re.compile(r"\r\n|\r|\n")
UTF16 = types.PositionEncodingKind.Utf16.value
_UNIT_COUNTERS: dict[str, Callable[[str], int]] = {
    types.PositionEncodingKind.Utf8.value: lambda text: len(text.encode("utf-8", "surrogatepass")),
    UTF16: lambda text: len(text.encode("utf-16-le", "surrogatepass")) // 2,
    types.PositionEncodingKind.Utf32.value: len,
}


class DocumentText:
    """One version of a document's text, with conversions between engine and client positions."""

    def __init__(self, source: str, encoding: str = UTF16) -> None:
        """``encoding``: the negotiated position encoding (``PositionEncodingKind`` or its value)."""
        self.source = source
        self.encoding = getattr(encoding, "value", encoding)
        self.lines = LINE_BREAK.split(source)
        self._units = _UNIT_COUNTERS.get(self.encoding, _UNIT_COUNTERS[UTF16])

    @classmethod
    def decoded(cls, data: bytes, encoding: str = UTF16) -> DocumentText:
        """The text of a file's bytes, decoded as the engine decodes them (its coding cookie, else
        UTF-8); a byte that does not decode is one character."""
        try:
            codec = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
            return cls(data.decode(codec, "replace"), encoding)
        except (SyntaxError, LookupError):
            return cls(data.decode("utf-8", "replace"), encoding)

    def position(self, line: int, column: int) -> types.Position:
        """The client position of the engine's 1-based ``line`` and character ``column``; a line
        past the last one (a fix's edit that runs to the end of the file) is the end of the text."""
        if line > len(self.lines):
            return types.Position(line=len(self.lines) - 1, character=self._units(self.lines[-1]))
        text = self.lines[line - 1] if line > 0 else ""
        return types.Position(line=max(line - 1, 0), character=self._units(text[: max(column - 1, 0)]))

    def range(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        return types.Range(start=self.position(line, column), end=self.position(end_line, end_column))

    def to_bytes(self) -> bytes:
        """The text as the file would be saved: in the encoding its coding cookie declares."""
        data = self.source.encode("utf-8", "surrogatepass")
        try:
            encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
            if codecs.lookup(encoding).name != "utf-8":
                return self.source.encode(encoding)
        except (SyntaxError, LookupError, UnicodeError):
            pass  # a cookie that names no codec, or text it cannot hold: the engine reports what it makes of it
        return data

    def comment_columns(self) -> dict[int, int | None]:
        """For each 1-based line where a comment may go, the character column where its existing
        comment starts (None: no comment yet). A line ending inside a string or continued with a
        backslash is absent: a ``#`` appended there would not be a comment."""
        columns: dict[int, int | None] = {}
        comments: dict[int, int] = {}
        try:
            for token in tokenize.generate_tokens(io.StringIO("\n".join(self.lines)).readline):
                if token.type == tokenize.COMMENT:
                    comments[token.start[0]] = token.start[1]
                elif token.type in (tokenize.NEWLINE, tokenize.NL):
                    columns[token.start[0]] = comments.get(token.start[0])
        except (tokenize.TokenError, SyntaxError):
            pass  # lines after the point tokenize gave up take no comment
        return columns
