"""Fixed text, line by line: the smallest whole-line :class:`~fsdp2_lint.diagnostics.Edit` s
between two versions of a file, the bytes libcst's round trip drops (form feeds before a
statement, a lone ``\\r`` ending the file) put back, and the unified diff ``--diff`` prints."""

from __future__ import annotations

import difflib
import io
import re
import tokenize

import libcst as cst

from fsdp2_lint.analysis.syntax import source_lines
from fsdp2_lint.diagnostics import Edit


def line_edits(old: str, new: str) -> list[Edit]:
    """The smallest set of whole-line replacements that turns ``old`` into ``new``. The lines both
    share at the start and at the end are set aside first: matching repeated lines costs difflib
    time quadratic in their number."""
    before, after = source_lines(old), source_lines(new)
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    before, after = before[head : len(before) - tail], after[head : len(after) - tail]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    return [
        Edit(head + i1 + 1, 1, head + i2 + 1, 1, "".join(after[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


# What libcst's round trip drops from a line that starts a statement: the whitespace up to the
# line's last form feed (Python resets the indentation column there, so it is not indentation).
_DROPPED_PREFIX = re.compile(r"[ \t\f]*\f")


def fixed_bytes(original: bytes, module: cst.Module, fixed: cst.Module) -> bytes:
    """The bytes of ``fixed`` (``module``, parsed from ``original``, with fixes applied), with what
    libcst's round trip of ``original`` drops put back."""
    text = original.decode(module.encoding)
    if "\f" not in text and not text.endswith("\r"):
        return fixed.bytes  # nothing libcst drops
    kept = keep_dropped(text, module.code, fixed.code)
    return fixed.bytes if kept is None else kept.encode(fixed.encoding)


def keep_dropped(text: str, rendered: str, fixed: str) -> str | None:
    """``fixed`` (libcst's code for a fixed version of ``text``, ``rendered`` being its code for
    ``text`` itself) with the bytes libcst drops put back: form feeds before a statement and a lone
    ``\\r`` ending the file. Lines the fix leaves alone are ``text``'s own; the first line of each
    replaced run keeps its form feeds (it starts a statement too: what precedes it is unchanged).
    None when ``rendered`` differs from ``text`` in another way."""
    if text == rendered:
        return fixed
    dropped = _dropped(text, rendered)
    if dropped is None:
        return None
    lines, prefixes, tail = dropped
    result: list[str] = []
    done = 0
    for edit in line_edits(rendered, fixed):
        result.extend(lines[done : edit.line - 1])
        replacement = source_lines(edit.content)
        if replacement and edit.end_line > edit.line:
            replacement[0] = prefixes[edit.line - 1] + replacement[0]
        result.extend(replacement)
        done = edit.end_line - 1
    result.extend(lines[done:])
    return "".join(result) + tail


def _dropped(text: str, rendered: str) -> tuple[list[str], list[str], str] | None:
    """``text``'s lines, what libcst dropped from the start of each, and the line ending it dropped
    from the end of the file; None when ``rendered`` is not ``text`` less such bytes."""
    lines = source_lines(rendered)
    for tail in ("", "\r") if text.endswith("\r") else ("",):
        originals = source_lines(text[: len(text) - len(tail)])
        if len(originals) != len(lines):
            continue
        prefixes = [_prefix(original, line) for original, line in zip(originals, lines, strict=True)]
        if None not in prefixes:
            return originals, prefixes, tail
    return None


def _prefix(original: str, rendered: str) -> str | None:
    if original == rendered:
        return ""
    prefix = original[: len(original) - len(rendered)]
    return prefix if original.endswith(rendered) and _DROPPED_PREFIX.fullmatch(prefix) else None


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """What fixing changes, as a unified diff (empty when nothing does)."""
    encoding = tokenize.detect_encoding(io.BytesIO(old).readline)[0]
    before = source_lines(old.decode(encoding, errors="replace"))
    after = source_lines(new.decode(encoding, errors="replace"))
    lines = difflib.unified_diff(before, after, fromfile=path, tofile=path)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)
