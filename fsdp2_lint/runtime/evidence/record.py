"""What one run of a script was asked to do (:class:`RunSpec`) and what was observed (:class:`RunRecord`).

Torch-free: built by the launchers from the per-rank files in the run directory and from what the
launcher itself saw (exit statuses, which ranks it had to stop and why).
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.device import Device
from fsdp2_lint.runtime.evidence.scope import Line, SourceScope, parse_line

Event = dict[str, Any]
THREAD_LINE = re.compile(r"^(?:Current thread|Thread) (?P<thread>0x[0-9a-fA-F]+)")
FRAME_LINE = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')
TAIL_BYTES = 64 * 1024  # what is read of a log to print its last lines
FATAL_ERROR = "Fatal Python error: "  # faulthandler's dump when a fatal signal kills a rank


@dataclass(frozen=True)
class RunSpec:
    script: Path  # the file the run starts: the script, or the file of ``module``
    run_dir: Path
    timeout: float
    argv: tuple[str, ...] = ()
    cwd: Path | None = None  # None: the run's scratch directory
    trace_lines: bool = False
    # Scheduling hint only (never used to judge): a run expected to hang waits idle until the pool
    # finds it stalled (or its timeout), so the pool runs it alongside the --jobs busy ones.
    expect_hang: bool = False
    module: str | None = None  # run as ``python -m MODULE`` would, rather than ``python SCRIPT``
    # first on sys.path; None: as Python puts it there (the script's directory; for -m, the cwd)
    import_root: Path | None = None
    project: Path | None = None  # its files are the user's code (see .scope); None: the script alone

    def scope(self) -> SourceScope:
        return SourceScope.of(self.script, self.project)


@dataclass(frozen=True)
class StackSite:
    """Where a rank was when the harness stopped it, from its faulthandler dump."""

    lines: tuple[Line, ...]  # lines of the user's code on the stack, innermost first
    innermost: str  # innermost frame of all, e.g. "barrier (distributed_c10d.py:4812)"
    innermost_file: str = ""  # its file's path

    @property
    def line(self) -> Line | None:
        return self.lines[0] if self.lines else None


@dataclass
class RunRecord:
    spec: RunSpec
    world_size: int
    device: Device
    seconds: float
    events: dict[int, list[Event]] = field(default_factory=dict)
    returncodes: dict[int, int | None] = field(default_factory=dict)  # None: not known to the launcher
    timed_out: tuple[int, ...] = ()  # ranks still running when the run's timeout expired, or it stalled
    stalled_for: float | None = None  # seconds without progress after which the harness found it stuck
    stopped: tuple[int, ...] = ()  # ranks the launcher stopped because another rank had failed
    stacks: dict[int, StackSite] = field(default_factory=dict)
    reached_lines: frozenset[Line] = frozenset()

    @property
    def ranks(self) -> range:
        return range(self.world_size)

    def of_kind(self, kind: str) -> list[tuple[int, Event]]:
        return [(rank, event) for rank in self.ranks for event in self.events.get(rank, []) if event["kind"] == kind]

    def final_event(self, rank: int) -> Event | None:
        """The exit or exception event that ended the script on ``rank``, if it ended."""
        for event in reversed(self.events.get(rank, [])):
            if event["kind"] in (events.EXIT, events.EXCEPTION) and "thread" not in event:
                return event
        return None

    def ended_badly(self, rank: int) -> bool:
        """The script ended on ``rank`` with an exception or a non-zero exit code."""
        final = self.final_event(rank)
        return final is not None and final.get("code") != 0

    def last_event(self, rank: int) -> Event | None:
        rank_events = self.events.get(rank, [])
        return rank_events[-1] if rank_events else None

    def completed(self) -> bool:
        """Every rank ran the script to its end and exited with code 0."""
        return all((self.final_event(rank) or {}).get("code") == 0 for rank in self.ranks)

    def killed_by(self, rank: int) -> str | None:
        """The signal ("SIGSEGV") that killed ``rank`` before it finished the script, unless the
        launcher sent it (a timeout, a stop after another rank failed)."""
        returncode = self.returncodes.get(rank)
        if returncode is None or returncode >= 0 or rank in self.timed_out or rank in self.stopped:
            return None
        if self.final_event(rank) is not None:
            return None
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"

    def fatal_site(self, rank: int) -> StackSite | None:
        """Where ``rank`` was when a fatal signal (SIGSEGV, SIGABRT, ...) killed it: the last dump
        faulthandler wrote to its stderr."""
        _, header, dump = read_tail(events.stderr_path(self.spec.run_dir, rank)).rpartition(FATAL_ERROR)
        return parse_stack(header + dump, self.spec.scope()) if header else None

    def failed_ranks(self) -> list[int]:
        """Ranks that ended badly or never finished, those killed by a signal first: the other
        ranks' errors (a peer that vanished: "Connection reset by peer") are their consequence."""
        failed = [rank for rank in self.ranks if self.ended_badly(rank) or self.final_event(rank) is None]
        return sorted(failed, key=lambda rank: self.killed_by(rank) is None)

    def harness_errors(self) -> list[str]:
        return [event["message"] for _, event in self.of_kind(events.HARNESS_ERROR)]

    def log_tail(self, rank: int, lines: int = 15) -> str:
        return tail_lines(events.stderr_path(self.spec.run_dir, rank), lines)


def read_tail(path: Path, max_bytes: int = TAIL_BYTES) -> str:
    """The last ``max_bytes`` of a file (from the start of a line where there is one), read
    without reading the rest: a rank may write gigabytes of output."""
    try:
        with open(path, "rb") as file:
            start = max(0, file.seek(0, os.SEEK_END) - max_bytes)
            file.seek(start)
            data = file.read(max_bytes)
    except FileNotFoundError:
        return ""
    if start and b"\n" in data:
        data = data.partition(b"\n")[2]  # the line cut short
    return data.decode("utf-8", errors="replace")


def tail_lines(path: Path, lines: int) -> str:
    return "\n".join(read_tail(path).splitlines()[-lines:])


def collect(
    spec: RunSpec,
    world_size: int,
    device: Device,
    seconds: float,
    returncodes: dict[int, int | None],
    timed_out: tuple[int, ...] = (),
    stopped: tuple[int, ...] = (),
    stalled_for: float | None = None,
) -> RunRecord:
    """Read what every rank left in the run directory."""
    scope = spec.scope()
    ranks = range(world_size)
    stacks = {}
    for rank in ranks:
        path = events.stack_path(spec.run_dir, rank)
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if text.strip():
            stacks[rank] = parse_stack(text, scope)
    reached: set[Line] = set()
    for rank in ranks:
        path = events.lines_path(spec.run_dir, rank)
        if path.exists():
            reached.update(line for line in map(parse_line, path.read_text().splitlines()) if line is not None)
    return RunRecord(
        spec=spec,
        world_size=world_size,
        device=device,
        seconds=seconds,
        events={rank: events.read_events(events.events_path(spec.run_dir, rank)) for rank in ranks},
        returncodes=returncodes,
        timed_out=timed_out,
        stalled_for=stalled_for,
        stopped=stopped,
        stacks=stacks,
        reached_lines=frozenset(reached),
    )


def parse_stack(dump: str, scope: SourceScope | str) -> StackSite:
    """Parse the last of the faulthandler dumps in ``dump`` (most recent call first, one block per
    thread; a thread seen again starts the next dump); use the first thread inside the user's code
    (``scope``, or the one script of that path)."""
    if isinstance(scope, str):
        scope = SourceScope(scope)
    dumps: list[dict[str, list[tuple[str, int, str]]]] = []
    frames: list[tuple[str, int, str]] = []
    for text in dump.splitlines():
        thread_start = THREAD_LINE.match(text)
        if thread_start:
            thread = thread_start["thread"]
            if not dumps or thread in dumps[-1]:
                dumps.append({})
            frames = dumps[-1][thread] = []
        match = FRAME_LINE.match(text)
        if match and dumps:
            frames.append((match["file"], int(match["line"]), match["function"].strip()))
    for frames in dumps[-1].values() if dumps else ():
        script_lines = tuple(named for file, line, _ in frames if (named := scope.name(file, line)) is not None)
        if script_lines:
            file, line, function = frames[0]
            return StackSite(script_lines, f"{function} ({Path(file).name}:{line})", file)
    return StackSite(lines=(), innermost="")
