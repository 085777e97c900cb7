"""Progress of ``fsdp2-lint confirm`` on stderr (torch-free), so that stdout (the table, the JSON)
stays as it is: on a terminal a transient live line, elsewhere (a CI log, a pipe) plain lines."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

PLAIN_EVERY_SECONDS = 5.0  # at most one plain line this often, besides the last one
SCRIPT_EVERY_SECONDS = 10.0


class FixtureProgress:
    """Fixtures done of total, runs in flight, elapsed. ``live`` (default: whether ``stream`` is a
    terminal) picks the transient rich line over plain lines such as
    ``confirm: 12/87 fixtures done, 2 running, 41 s``."""

    def __init__(
        self,
        stream: TextIO | None = None,
        live: bool | None = None,
        every: float = PLAIN_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.every = every
        self.clock = clock
        self.total = 0
        self.done = 0
        self.running = 0
        self._started = clock()
        self._last_line: float | None = None
        self._bar: Progress | None = None
        self._task = None

    def start(self, total: int) -> None:
        self.total = total
        self._started = self.clock()
        if self.live:
            console = Console(file=self.stream, stderr=True)
            self._bar = Progress(
                TextColumn("confirm"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("fixtures, {task.fields[running]} running"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._task = self._bar.add_task("confirm", total=total, running=0)
            self._bar.start()

    def update(self, done: int, running: int) -> None:
        self.done, self.running = done, running
        if self._bar is not None:
            self._bar.update(self._task, completed=done, running=running)  # type: ignore[arg-type]
            return
        now = self.clock()
        if done >= self.total or self._last_line is None or now - self._last_line >= self.every:
            self._last_line = now
            print(self.line(now), file=self.stream, flush=True)

    def line(self, now: float | None = None) -> str:
        elapsed = (self.clock() if now is None else now) - self._started
        return f"confirm: {self.done}/{self.total} fixtures done, {self.running} running, {elapsed:.0f} s"

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class ScriptHeartbeat:
    """While a script runs: ``confirm: train.py running, 20 s`` on stderr every ``every`` seconds."""

    def __init__(self, name: str, stream: TextIO | None = None, every: float = SCRIPT_EVERY_SECONDS) -> None:
        self.name = name
        self.stream = stream or sys.stderr
        self.every = every
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        started = time.monotonic()
        while not self._stopped.wait(self.every):
            print(f"confirm: {self.name} running, {time.monotonic() - started:.0f} s", file=self.stream, flush=True)

    def __enter__(self) -> ScriptHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join()
