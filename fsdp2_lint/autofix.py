"""``fsdp2-lint check --fix`` / ``--diff`` for one file: fix its bytes through the engine, then write
the result back safely (or not at all), and summarise what was fixed (``--show-fixes``)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fsdp2_lint.config import Settings
from fsdp2_lint.engine import FixResult
from fsdp2_lint.fixing.atomic_write import NotWritten, remove_stale_temporaries, write_fixed
from fsdp2_lint.fixing.lines import unified_diff
from fsdp2_lint.runner import check_path, fix_path
from fsdp2_lint.sources import read_source


@dataclass(frozen=True)
class FileFix:
    """One file's fixing: its bytes as read, what fixing them produced, and why the result was
    not written back (``problem``), if it was not."""

    display: str
    original: bytes
    result: FixResult
    problem: str | None = None

    @property
    def changed(self) -> bool:
        return self.result.source != self.original

    def diff(self) -> str:
        return unified_diff(self.display, self.original, self.result.source)


def fix_file(path: Path, settings: Settings, display: str, unsafe: bool, write: bool) -> FileFix:
    """Fix the file; with ``write``, replace it with the fixed bytes, unless it changed on disk
    since it was read or cannot be replaced with nothing but its text changed (see
    :func:`write_fixed`). A file that was not written reports the diagnostics of what was read."""
    try:
        original = read_source(path)
    except OSError:  # reported as FSDP000 by the lint
        return FileFix(display, b"", FixResult(b"", (), tuple(check_path(path, settings, display))))
    fixed = fix_source_of(path, settings, display, original, unsafe)
    if not write or not fixed.changed:
        return fixed
    try:
        write_fixed(path, original, fixed.result.source)
        return fixed
    except NotWritten as refusal:
        problem = str(refusal)
    except OSError as error:
        problem = f"cannot write the fixed file: {error.strerror or error}"
    unfixed = FixResult(original, (), tuple(check_path(path, settings, display, source=original)))
    return FileFix(display, original, unfixed, problem)


def remove_killed_runs_temporaries(paths: Iterable[Path]) -> None:
    """Delete what runs killed while writing left next to these files (each folder once)."""
    for folder in dict.fromkeys(Path(os.path.realpath(path)).parent for path in paths):
        remove_stale_temporaries(folder)


def fix_source_of(path: Path, settings: Settings, display: str, source: bytes, unsafe: bool) -> FileFix:
    """Fix bytes that are not written anywhere (standard input, ``--diff``)."""
    return FileFix(display, source, fix_path(path, settings, display, source, unsafe))


def write_fix_summary(files: Sequence[FileFix], stream: TextIO, would: bool) -> None:
    """``--show-fixes``: per file, how many diagnostics of each rule were fixed (Ruff's layout)."""
    fixed = [file for file in files if file.result.fixed]
    total = sum(len(file.result.fixed) for file in fixed)
    if not total:
        stream.write("No problems would be fixed.\n" if would else "No problems fixed.\n")
        return
    noun = "problem" if total == 1 else "problems"
    stream.write(f"{'Would fix' if would else 'Fixed'} {total} {noun}:\n")
    for file in fixed:
        stream.write(f"- {file.display}:\n")
        counts = Counter((d.code, d.name) for d in file.result.fixed)
        for (code, name), count in sorted(counts.items()):
            stream.write(f"    {count} × {code} ({name})\n")
