"""Every path that reads a file to lint it never blocks on what took the file's place after it was
found (issue 13, item 3: a FIFO waits forever for a writer, /dev/zero never ends): the file costs
an FSDP000 that says what it is, whichever entry point read it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fsdp2_lint.config import Selection
from fsdp2_lint.engine import lint_file
from fsdp2_lint.pipeline import LintTask, SettingsResolver, fix_file, lint_files

FIFO_REASON = "cannot read file: a named pipe (FIFO), not a regular file"
HANG_GUARD_S = 20


def _settings(path: Path):
    return SettingsResolver(Selection(), isolated=True).for_path(path, is_dir=False)


READERS: dict[str, Callable[[Path], list]] = {
    "engine.lint_file": lambda path: lint_file(path),
    "pipeline.lint_files": lambda path: lint_files([LintTask.of(path, _settings(path), path.name)], jobs=1)[0],
    "pipeline.fix_file": lambda path: list(
        fix_file(LintTask.of(path, _settings(path), path.name), False, True).result.remaining
    ),
}


def _without_hanging(read: Callable[[Path], list], fifo: Path) -> list:
    """``read(fifo)``; if it blocks, a writer is opened to release it and the test fails."""
    result: list = []
    thread = threading.Thread(target=lambda: result.extend(read(fifo)), daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        with open(fifo, "wb"):  # the blocked open returns, and the read sees the end at once
            pass
        thread.join()
        pytest.fail(f"blocked on a FIFO for {HANG_GUARD_S} s")
    return result


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_a_fifo_in_place_of_a_file_is_fsdp000_not_a_hang(tmp_path, reader):
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    found = _without_hanging(READERS[reader], fifo)
    assert [(d.code, d.message) for d in found] == [("FSDP000", FIFO_REASON)]
