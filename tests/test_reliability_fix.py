"""Issue 13, `--fix` keeps README's promises: every byte a fix does not replace stays (form feeds,
lone-CR line endings, a missing final newline...), a killed run's temporary files are removed by
the next run, and a file is never written when that would change more than its text (read-only,
owner, hard links)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

import pytest
from test_fixes import ROUND_TRIP, _apply_edits

from fsdp2_lint.engine import fix_source, lint_source
from fsdp2_lint.syntax import source_lines

# --- bytes the fix does not touch ------------------------------------------------------------

_ENDING = re.compile(r"\r\n|\r|\n")


def _with_endings(*endings: str) -> Callable[[list[str]], list[str]]:
    """Each line ends with the next of ``endings``, in turn."""
    return lambda lines: [_ENDING.sub(endings[i % len(endings)], line) for i, line in enumerate(lines)]


def _prefixed(prefix: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [prefix + line for line in lines]


def _trailing_whitespace(lines: list[str]) -> list[str]:
    return [_ENDING.sub(lambda end: " \t" + end.group(), line) for line in lines]


def _no_final_newline(lines: list[str]) -> list[str]:
    return [*lines[:-1], _ENDING.sub("", lines[-1])]


def _combined(*steps: Callable[[list[str]], list[str]]) -> Callable[[list[str]], list[str]]:
    def apply(lines: list[str]) -> list[str]:
        for step in steps:
            lines = step(lines)
        return lines

    return apply


# Each rewrites a file's lines one for one (the form feeds: before every line, indented or not).
DECORATIONS = {
    "lone-cr": _with_endings("\r"),
    "crlf": _with_endings("\r\n"),
    "mixed-endings": _with_endings("\r\n", "\n", "\r"),
    "form-feed": _prefixed("\f"),
    "space-form-feed": _prefixed(" \f"),
    "trailing-whitespace": _trailing_whitespace,
    "no-final-newline": _no_final_newline,
    "lone-cr-no-final-newline": _combined(_with_endings("\r"), _no_final_newline),
    "everything": _combined(_with_endings("\r", "\r\n"), _prefixed("\f"), _trailing_whitespace),
}


def _plain(text: str) -> str:
    """Undo every decoration but a missing final newline."""
    lines = []
    for line in source_lines(text):
        body = line.rstrip("\r\n")
        lines.append(re.sub(r"^[ \t\f]*\f", "", body).rstrip(" \t") + ("\n" if body != line else ""))
    return "".join(lines)


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["", "bom"])
@pytest.mark.parametrize("decoration", DECORATIONS.values(), ids=DECORATIONS.keys())
@pytest.mark.parametrize("source", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_every_byte_a_fix_does_not_replace_is_kept(source, decoration, bom):
    plain_fixed = fix_source(source.encode(), "train.py", unsafe=True).source.decode()
    decorated = "".join(decoration(source_lines(source)))
    result = fix_source(bom + decorated.encode(), "train.py", unsafe=True)
    assert result.source.startswith(bom) and len(result.fixed) == 1
    fixed = result.source.removeprefix(bom).decode()
    # The fix made the same change, and the file still ends as it did.
    final_newline = decorated.endswith(("\n", "\r"))
    assert _plain(fixed) == (plain_fixed if final_newline else plain_fixed.rstrip("\n"))
    assert fixed.endswith(("\n", "\r")) == final_newline
    # Each line the fix left alone is the decorated file's own, byte for byte.
    before, after = source_lines(decorated), source_lines(fixed)
    matcher = difflib.SequenceMatcher(a=source_lines(source), b=source_lines(plain_fixed), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for i, j in zip(range(i1, i2), range(j1, j2), strict=True) if tag == "equal" else ():
            if i == len(before) - 1 and not final_newline:  # the file's last line: code may follow it now
                assert after[j].rstrip("\r\n") == before[i]
            else:
                assert after[j] == before[i]
    # Fixing again changes nothing; an editor applying the diagnostic's edits gets the same file.
    assert fix_source(result.source, "train.py", unsafe=True).source == result.source
    (diagnostic,) = [d for d in lint_source(bom + decorated.encode(), "train.py") if d.fix is not None]
    assert _apply_edits(decorated, diagnostic) == fixed
