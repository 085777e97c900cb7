"""Jupyter notebooks (``.ipynb``) as one Python source, and back.

:func:`read_notebook` joins the code cells into one source, so a model built in one cell and
misused in another is one analysis, as when the notebook runs top to bottom. Positions keep: each
code cell's lines are the source's lines in order, each cell followed by one marker line
(:data:`CELL_END`). IPython's own syntax is not Python, so each line of it (a line magic ``%time
f()``, a shell escape ``!pip install``, an assignment from one ``x = !ls``, help ``obj?``, a magic
without its ``%`` that no Python could be (``pip install x``, ``ls ./data/``), and the lines a
trailing backslash continues) becomes ``pass`` at the same indentation, marked
(:data:`MAGIC`); a cell that starts with a cell magic (``%%bash``) is not Python at all and is left
out. A cell indented as a whole is dedented first, as IPython does before running it
(:meth:`NotebookSource.indent_at` says by how much, for the columns). :meth:`NotebookSource.locate`
maps a line of the source back to (cell, line in the cell); cells are numbered from 1 in notebook
order, markdown cells included, as Ruff numbers them.

:meth:`NotebookSource.with_python` is the way back for ``--fix``: the fixed source split at the
markers, each magic line restored, and only the ``source`` value of each cell whose text changed
replaced in the notebook's text, in the layout the notebook had; the metadata, the outputs, the key
order, the indentation and the final newline stay byte for byte. Whatever cannot be put back that
way (a marker gone, a magic line lost) raises :class:`NotebookError` and nothing is written.

No parser: the discovery, the pipeline and the output read this without libcst.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

CELL_END = "# fsdp2-lint: end of cell"
MAGIC = "pass  # fsdp2-lint: IPython syntax"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# a line magic (`%name`: `% 2` continuing a modulo inside brackets is Python), a shell escape, `?obj`
_ESCAPE = re.compile(r"(?:%[A-Za-z_]|!|\?\??[A-Za-z_])")
_ASSIGNED_ESCAPE = re.compile(r"[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[%!]")  # x = !ls, x = %time f()
_HELP = re.compile(r"[A-Za-z_][\w.]*\?\??\s*$")  # obj? and obj??
# IPython's automagic: a line magic or shell alias without its `%` (`pip install x`, `ls ./data/`), where
# what follows the name cannot continue a Python expression (`ls -l` is Python: left as it is).
_AUTOMAGIC = re.compile(
    r"(?:pip|conda|mamba|cd|pwd|ls|ll|cat|cp|mv|rm|rmdir|mkdir|env|load_ext|reload_ext|matplotlib|tensorboard)"
    r"[ \t]+(?!(?:if|else|for|in|is|and|or|not)\b)(?:[A-Za-z_0-9'\"~$]|\.\.?/)"
)


class NotebookError(ValueError):
    """The file is not a notebook this can read, or a fixed source cannot be put back into it."""


@dataclass(frozen=True)
class _Cell:
    number: int  # 1-based, in notebook order, every cell counted
    start: int  # its first line in the joined source (1-based)
    text: str  # its source as the notebook holds it
    magics: tuple[str, ...]  # the IPython lines replaced by MAGIC, in order
    indent: str = ""  # what IPython strips from every line of a cell indented as a whole


@dataclass(frozen=True)
class NotebookSource:
    """A notebook's text, the Python source of its code cells, and where each cell lies in it."""

    text: str
    python: bytes
    cells: tuple[_Cell, ...]

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in that cell) of a line of :attr:`python` (a cell's end marker is
        the line after its last); (1, line) in a notebook without code cells."""
        found = None
        for cell in self.cells:
            if cell.start > line:
                break
            found = cell
        if found is None:
            return (self.cells[0].number if self.cells else 1), max(1, line)
        return found.number, line - found.start + 1

    def indent_at(self, line: int) -> str:
        """What IPython strips from the line's cell (see :func:`_common_indent`): the line's columns
        in the cell are this much further right than in :attr:`python`."""
        found = ""
        for cell in self.cells:
            if cell.start > line:
                break
            found = cell.indent
        return found

    def cell_texts(self) -> dict[int, str]:
        """Each code cell's text (IPython lines included), by cell number."""
        return {cell.number: cell.text for cell in self.cells}

    def with_python(self, python: bytes) -> bytes:
        """The notebook's text with each code cell's source replaced by its part of ``python`` (a
        fixed version of :attr:`python`); only the cells whose text changed are touched."""
        parts = _split(python.decode("utf-8"), len(self.cells))
        changed: dict[int, str] = {}
        for cell, part in zip(self.cells, parts, strict=True):
            text = _restore(cell, part)
            if text != cell.text:
                changed[cell.number - 1] = text
        if not changed:
            return self.text.encode("utf-8")
        spans = _source_spans(self.text)
        ascii_only = self.text.isascii() and "\\u" in self.text
        pieces, done = [], 0
        for index in sorted(changed):
            start, end = spans[index]
            pieces += [self.text[done:start], _serialize(self.text[start:end], changed[index], ascii_only)]
            done = end
        result = "".join([*pieces, self.text[done:]])
        _check(self, result, changed, python)
        return result.encode("utf-8")


def read_notebook(data: bytes) -> NotebookSource:
    """The notebook's code cells as one Python source; :class:`NotebookError` if ``data`` is not
    a notebook (not JSON, no ``cells`` list, a cell without a string or list ``source``)."""
    try:
        text = data.decode("utf-8")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        raise NotebookError(f"not a valid notebook: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("not a valid notebook: no `cells` list at the top level")
    lines: list[str] = []
    cells = []
    for number, cell in enumerate(document["cells"], start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a valid notebook: cell {number} is not an object")
        if cell.get("cell_type") != "code":
            continue
        source = _text(cell.get("source"), number)
        if source.lstrip().startswith("%%"):  # a cell magic: the cell is not Python
            continue
        indent = _common_indent(source)
        python, magics = _python_lines(_dedent(source, indent))
        cells.append(_Cell(number, len(lines) + 1, source, magics, indent))
        lines += [*python, CELL_END]
    python_text = "".join(line + "\n" for line in lines)
    return NotebookSource(text, python_text.encode("utf-8"), tuple(cells))


def _text(source: object, number: int) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(item, str) for item in source):
        return "".join(source)
    raise NotebookError(f"not a valid notebook: cell {number} has no text `source`")


def _common_indent(source: str) -> str:
    """The indentation IPython strips from a cell before running it: its first line's, when every
    line that holds code starts with it ("" for a cell that starts at column 1)."""
    lines = [line for line in source.split("\n") if line.strip()]
    first = lines[0] if lines else ""
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    return indent if all(line.startswith(indent) for line in lines) else ""


def _dedent(source: str, indent: str) -> str:
    if not indent:
        return source
    return "\n".join(line[len(indent) :] if line.strip() else line for line in source.split("\n"))


def _python_lines(source: str) -> tuple[list[str], tuple[str, ...]]:
    """A cell's lines with each IPython line replaced by :data:`MAGIC` (its indentation kept), and
    the replaced lines."""
    lines = source.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a newline
    python, magics = [], []
    continued, indent = False, ""
    for line in lines:
        body = line.lstrip(" \t")
        if continued or any(pattern.match(body) for pattern in (_ESCAPE, _ASSIGNED_ESCAPE, _HELP, _AUTOMAGIC)):
            indent = indent if continued else line[: len(line) - len(body)]  # a continuation: its first line's
            python.append(indent + MAGIC)
            magics.append(line)
            continued = line.endswith("\\")
        else:
            python.append(line)
    return python, tuple(magics)


def _split(python: str, count: int) -> list[str]:
    """``python`` cut at its cell markers into ``count`` cells' lines (each ending with a newline)."""
    parts, current = [], []
    for line in python.splitlines(keepends=True):
        if line.rstrip("\r\n") == CELL_END:
            parts.append("".join(current))
            current = []
        else:
            current.append(line)
    if len(parts) != count or "".join(current).strip():
        raise NotebookError("the fixed code no longer splits into the notebook's cells; the notebook was left as it is")
    return parts


def _restore(cell: _Cell, part: str) -> str:
    """A cell's new text: ``part`` with its IPython lines back, ending as the cell's text ended."""
    lines = part.split("\n")[:-1] if part else []
    magics = iter(cell.magics)
    restored = []
    for line in lines:
        if line.lstrip(" \t") == MAGIC:
            magic = next(magics, None)
            if magic is None:
                raise NotebookError(
                    f"cell {cell.number}: an IPython line was duplicated; the notebook was left as it is"
                )
            restored.append(cell.indent + magic if magic.strip() else magic)
        else:
            restored.append(cell.indent + line if line.strip() else line)
    if next(magics, None) is not None:
        raise NotebookError(f"cell {cell.number}: an IPython line was lost; the notebook was left as it is")
    text = "".join(line + "\n" for line in restored)
    return text if cell.text.endswith("\n") or not text else text[:-1]


def _serialize(old: str, text: str, ascii_only: bool) -> str:
    """A cell's new ``source`` value in the layout of its old one (``old``: its JSON text)."""
    if old.startswith('"'):
        return json.dumps(text, ensure_ascii=ascii_only)
    items = [json.dumps(item, ensure_ascii=ascii_only) for item in text.splitlines(keepends=True)]
    layout = re.fullmatch(r"\[([ \t]*\r?\n)([ \t]*)[^\r\n]*(?:.*(\r?\n)([ \t]*))?\]", old, re.DOTALL)
    if not items:
        return "[]"
    if layout is None or layout.group(3) is None:  # one line, or an empty list: no layout to follow
        return "[" + ", ".join(items) + "]"
    newline, indent, closing = layout.group(1).lstrip(" \t"), layout.group(2), layout.group(4)  # CRLF kept
    return "[" + newline + ("," + newline).join(indent + item for item in items) + newline + closing + "]"


def _check(notebook: NotebookSource, result: str, changed: dict[int, str], python: bytes) -> None:
    """The notebook written is the old one with just those cells' text changed, and reads back
    as the fixed source; NotebookError otherwise."""
    try:
        before, after = json.loads(notebook.text), json.loads(result)
    except ValueError as error:
        raise NotebookError(f"the fixed notebook would not be valid JSON ({error}); it was left as it is") from None
    for index, text in changed.items():
        if _text(after["cells"][index]["source"], index + 1) != text:
            raise NotebookError(f"cell {index + 1} could not be written back; the notebook was left as it is")
        after["cells"][index]["source"] = before["cells"][index]["source"]
    if after != before or read_notebook(result.encode("utf-8")).python != python:
        raise NotebookError("the fixed notebook would differ beyond the fixed cells; it was left as it is")


# --- where each cell's `source` value is in the notebook's text ---


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """The (start, end) offsets of each cell's ``source`` value, by cell index (the last of
    duplicate keys, as :func:`json.loads` keeps)."""
    spans: dict[int, tuple[int, int]] = {}
    for key, start, _ in _members(text, _skip(text, 0)):
        if key == "cells":
            spans.clear()
            for index, cell_start in enumerate(_elements(text, start)):
                for cell_key, value_start, value_end in _members(text, cell_start):
                    if cell_key == "source":
                        spans[index] = (value_start, value_end)
    return spans


_DECODER = json.JSONDecoder()


def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()


def _members(text: str, position: int) -> Iterator[tuple[str, int, int]]:
    """Each member of the object at ``position``: its key, and its value's start and end."""
    position = _skip(text, position + 1)  # past "{"
    while text[position] != "}":
        key, position = _DECODER.raw_decode(text, position)
        position = _skip(text, _skip(text, position) + 1)  # past ":"
        start = position
        _, end = _DECODER.raw_decode(text, start)
        yield key, start, end
        position = _skip(text, end)
        if text[position] == ",":
            position = _skip(text, position + 1)


def _elements(text: str, position: int) -> Iterator[int]:
    """The start of each element of the array at ``position``."""
    position = _skip(text, position + 1)  # past "["
    while text[position] != "]":
        _, end = _DECODER.raw_decode(text, position)
        yield position
        position = _skip(text, end)
        if text[position] == ",":
            position = _skip(text, position + 1)
