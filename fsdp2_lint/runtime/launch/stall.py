"""Telling a stuck run from a slow one before its timeout (torch-free; Linux ``/proc``).

A run is stalled when, for ``STALL_SECONDS``, none of its unfinished ranks wrote an event or used
more than a sliver of CPU, and a stack dump then finds each of them blocked inside torch (a
collective, or the wait for one). A rank that computes uses CPU, however loaded the machine; a
rank that waits in the script's own code (a sleep, a queue, a file) is not inside torch. Nothing
else can wake such ranks: the run is a hang, and the harness need not wait for its timeout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.record import parse_stack
from fsdp2_lint.runtime.evidence.scope import SourceScope
from fsdp2_lint.runtime.evidence.signals import dump_stacks

STALL_SECONDS = 5.0  # no event and no CPU for this long, on every unfinished rank
STALL_POLL_SECONDS = 0.25  # how often a running launch is checked for a stall
# Share of one core under which a rank is not computing: a rank blocked in a gloo collective uses
# about 0.3% (its background threads); a computing one, even on a loaded machine, far more.
IDLE_CPU_SHARE = 0.02
DUMP_GRACE_SECONDS = 0.3  # time the ranks get to write the stack dump asked for
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class _Sample:
    at: float
    event_bytes: dict[int, int]  # rank -> size of its event log
    cpu: dict[int, float]  # rank -> CPU seconds its process used


class StallWatch:
    """The stall check of one run; :meth:`stalled` is polled while the run goes on."""

    def __init__(self, run_dir: Path, scope: SourceScope) -> None:
        self.run_dir = run_dir
        self.scope = scope
        self.pids: dict[int, int] = {}
        self.quiet_since: _Sample | None = None  # the last sample that showed progress
        self.dumped_at: float | None = None

    @property
    def quiet_seconds(self) -> float:
        """How long the run had made no progress when it was found stalled."""
        return 0.0 if self.quiet_since is None or self.dumped_at is None else self.dumped_at - self.quiet_since.at

    def stalled(self, now: float, unfinished: Sequence[int]) -> bool:
        sample = self._sample(now, unfinished)
        previous = self.quiet_since
        if sample is None or previous is None or previous.event_bytes != sample.event_bytes:
            self.quiet_since, self.dumped_at = sample, None  # progress, or not every rank has started
            return False
        if self.dumped_at is not None:
            if now < self.dumped_at + DUMP_GRACE_SECONDS:
                return False
            if all(self._blocked_in_torch(rank) for rank in unfinished):
                return True
            self.quiet_since, self.dumped_at = sample, None  # waiting in the script's own code
            return False
        window = now - previous.at
        if window < STALL_SECONDS:
            return False
        if any(sample.cpu[rank] - previous.cpu[rank] > IDLE_CPU_SHARE * window for rank in unfinished):
            self.quiet_since = sample  # computing without events
            return False
        dump_stacks(self.pids[rank] for rank in unfinished)
        self.dumped_at = now
        return False

    def running(self, ranks: Sequence[int]) -> tuple[int, ...]:
        """The ranks whose process has started and not ended (nor is a zombie)."""
        alive = []
        for rank in ranks:
            pid = self.pids.get(rank) or _started_pid(events.events_path(self.run_dir, rank))
            if pid is not None and _state(pid) not in (None, "Z", "X"):
                self.pids[rank] = pid
                alive.append(rank)
        return tuple(alive)

    def _sample(self, now: float, unfinished: Sequence[int]) -> _Sample | None:
        event_bytes, cpu = {}, {}
        for rank in unfinished:
            path = events.events_path(self.run_dir, rank)
            pid = self.pids.get(rank) or _started_pid(path)
            seconds = _cpu_seconds(pid) if pid else None
            if seconds is None:
                return None
            self.pids[rank] = pid
            event_bytes[rank] = path.stat().st_size
            cpu[rank] = seconds
        return _Sample(now, event_bytes, cpu)

    def _blocked_in_torch(self, rank: int) -> bool:
        """The script's thread, in the rank's latest stack dump, is inside torch."""
        path = events.stack_path(self.run_dir, rank)
        site = parse_stack(path.read_text(encoding="utf-8", errors="replace"), self.scope) if path.exists() else None
        return site is not None and site.lines != () and _in_torch(site.innermost_file, self.scope)


def _in_torch(filename: str, scope: SourceScope) -> bool:
    return not scope.contains(filename) and f"{os.sep}torch{os.sep}" in filename


def _started_pid(path: Path) -> int | None:
    """The pid in the rank's start event (its first), once it is written."""
    try:
        with open(path, encoding="utf-8") as log:
            first = log.readline()
    except OSError:
        return None
    started = events.read_line(first)
    return started.get("pid") if started and started["kind"] == events.START else None


def _state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``Z`` for a zombie, ...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, all its threads; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15)
