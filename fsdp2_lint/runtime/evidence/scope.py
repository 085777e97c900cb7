"""Which source files of a run are the user's code, and how a line of them is named (torch-free).

A run of one script attributes events to lines of that script, named by their number (``42``). A
run of a project (a fixture project, ``confirm -m pkg.train``) attributes them to lines of any
file of the project, named ``"pkg/parallel.py:42"``: the file's path relative to the project
directory, a colon, the line. One run names every line the same way, so lines of one run compare
and sort with each other. The rank processes name the lines they record (probes, the line tracer)
and the harness the ones it reads back (stack dumps), both through :class:`SourceScope`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

Line = int | str  # a line of the script, or "relative/path.py:N" of a file of the project

# Below the project directory, never the user's own code: installed packages and tool directories.
LIBRARY_DIRECTORIES = frozenset({"site-packages", "dist-packages", "__pycache__"})
HARNESS = str(Path(__file__).resolve().parents[1]) + os.sep  # fsdp2_lint/runtime/: never the user's


@dataclass(frozen=True)
class SourceScope:
    """``script``: the file the run starts (for ``-m``, the module's file), absolute. ``project``:
    the absolute directory whose Python files are the user's code, or None for the script alone."""

    script: str
    project: str | None = None

    @classmethod
    def of(cls, script: Path, project: Path | None = None) -> SourceScope:
        return cls(str(script.resolve()), str(project.resolve()) if project is not None else None)

    def name(self, filename: str, lineno: int) -> Line | None:
        """How line ``lineno`` of ``filename`` is named; None when the file is not the user's code."""
        if self.project is None:
            return lineno if filename == self.script else None
        relative = self._relative(filename)
        return f"{relative}:{lineno}" if relative is not None else None

    def contains(self, filename: str) -> bool:
        return filename == self.script if self.project is None else self._relative(filename) is not None

    def _relative(self, filename: str) -> str | None:
        root = self.project + os.sep  # type: ignore[operator]
        if not filename.startswith(root) or filename.startswith(HARNESS) or not filename.endswith(".py"):
            return None
        parts = filename[len(root) :].split(os.sep)
        if any(part in LIBRARY_DIRECTORIES or part.startswith(".") for part in parts[:-1]):
            return None  # a virtual environment or a tool's directory inside the project
        return "/".join(parts)


def parse_line(text: str) -> Line | None:
    """A line as a file of the run directory holds it (one per line): ``42`` or ``pkg/a.py:42``."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    path, colon, number = text.rpartition(":")
    return text if colon and path and number.isdigit() else None


def split_line(line: Line) -> tuple[str | None, int]:
    """(file relative to the project or None for the script, line number)."""
    if isinstance(line, int):
        return None, line
    path, _, number = line.rpartition(":")
    return path, int(number)
