"""``check --add-noqa``: ``# noqa: CODE`` comments added to the lines that have diagnostics.

Works on the file's bytes, so everything else stays byte for byte (line endings, encoding, a BOM):
a line that already has ``# noqa: CODES`` gets the new codes appended to that list (``# noqa:
E501, FSDP001``, as Ruff writes it), any other line gets ``  # noqa: CODES`` before its line end.
A line continued with a backslash cannot end in a comment and is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # only \n, \r\n and \r end a line, as Python counts
_CODES_NOQA = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Za-z]+\d+(?:\s*,?\s*[A-Za-z]+\d+)*)", re.IGNORECASE)


def add_noqa(source: bytes, codes_by_line: Mapping[int, Set[str]]) -> tuple[bytes, int]:
    """``source`` with the codes of each (1-based) line added to its noqa comment, and how many
    lines were changed."""
    lines = _LINE.findall(source)
    added = 0
    for number, codes in codes_by_line.items():
        if not 1 <= number <= len(lines) or not codes:
            continue
        edited = _with_codes(lines[number - 1], codes)
        if edited is not None:
            lines[number - 1] = edited
            added += 1
    return b"".join(lines), added


def _with_codes(line: bytes, codes: Set[str]) -> bytes | None:
    body = line.rstrip(b"\r\n")
    end = line[len(body) :]
    text = body.decode("latin-1")  # one character per byte: offsets stay byte offsets, ASCII patterns match
    if text.rstrip().endswith("\\"):
        return None
    existing = list(_CODES_NOQA.finditer(text))
    if existing:
        match = existing[-1]
        listed = {code.upper() for code in re.split(r"[\s,]+", match.group("codes")) if code}
        new = sorted(code for code in codes if code.upper() not in listed)
        if not new:
            return None
        at = match.end("codes")
        return (text[:at] + "".join(f", {code}" for code in new) + text[at:]).encode("latin-1") + end
    separator = "  " if text.strip() else ""
    return (text + f"{separator}# noqa: {', '.join(sorted(codes))}").encode("latin-1") + end
