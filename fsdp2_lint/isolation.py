"""Per-file work in worker processes, so that what one file does to a process costs that file only.

libcst's native parser can kill its process past every exception handler: a stack overflow is a
segmentation fault, a failed allocation an abort. :func:`run_isolated` therefore runs the work on
each file in worker processes, one file at a time per worker, each with its address space capped
(``RLIMIT_AS``, where the platform has it). A worker that dies costs the file it held a
:class:`Crash` that says why (the signal, or that it ran out of memory) and is replaced for the
next file. Results come back in the order of the items, whatever the number of workers.

:func:`run_guarded` runs one file's work in this process, unless the file is heavy (large, or
nested deep enough to strain the parser): then in a worker of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fsdp2_lint.diagnostics import Diagnostic, file_error
from fsdp2_lint.engine import INTERNAL_HINT, raise_recursion_limit, reaches_parser
from fsdp2_lint.lifetime import die_with_parent
from fsdp2_lint.nesting import nesting_depth
from fsdp2_lint.rule import Rule

if TYPE_CHECKING:  # worker processes' machinery is imported by the run that starts one
    import multiprocessing.context
    from multiprocessing.connection import Connection

Item = TypeVar("Item")
Result = TypeVar("Result")

HEAVY_SIZE = 64 * 1024  # larger files are parsed in a worker even by a serial run
HEAVY_NESTING = 200  # so are deeper ones (real code stays near 100)
_BASE_MEMORY = 1 << 30  # a worker's own needs and a file nested as deep as the parser handles
_RUST_OUT_OF_MEMORY = b"memory allocation of"  # what Rust prints before it aborts on a failed allocation
_MEMORY_HINT = (
    "a limit of fsdp2-lint, not an error in the file (a larger max-file-size raises it); it checked nothing else in it"
)


@dataclass(frozen=True)
class Crash:
    """Why the work on one file gave no result: ``reason`` completes "fsdp2-lint ..."."""

    reason: str
    out_of_memory: bool = False


def crash_diagnostic(path: str, crash: Crash) -> Diagnostic:
    """The FSDP000 that tells the user why a file got no result."""
    return file_error(path, f"fsdp2-lint {crash.reason}", hint=_MEMORY_HINT if crash.out_of_memory else INTERNAL_HINT)


def memory_limit(max_file_size: int) -> int | None:
    """The address space a worker may use beyond what it maps when it starts: 1 GiB, and 1 GiB
    more per MiB a file may have (libcst builds about 750 MB of syntax tree per MB of source);
    None when file sizes are unlimited (0)."""
    return _BASE_MEMORY + max_file_size * 1024 if max_file_size else None


def is_heavy(data: bytes) -> bool:
    return len(data) > HEAVY_SIZE or nesting_depth(data) > HEAVY_NESTING


def run_guarded(
    work: Callable[[], Result], data: bytes, rules: Sequence[type[Rule]], max_file_size: int
) -> Result | Crash:
    """``work()``, the lint or fix of ``data``, here; or in a worker of its own when the data
    would be parsed and is heavy (``work`` must then pickle where workers are spawned: a
    module-level function, or a partial of one)."""
    if reaches_parser(data, rules, max_file_size) and is_heavy(data):
        return run_isolated(partial(_call, work), [None], 1, memory_limit(max_file_size))[0]
    try:
        return work()
    except MemoryError:
        return _out_of_memory(None)


def run_isolated(
    work: Callable[[Item], Result], items: Sequence[Item], workers: int, limit: int | None
) -> list[Result | Crash]:
    """``work(item)`` for each item, in up to ``workers`` worker processes whose address space is
    capped at ``limit`` bytes (None: uncapped); in the order of ``items``."""
    from multiprocessing.connection import wait

    results: list[Result | Crash | None] = [None] * len(items)
    upcoming = iter(range(len(items)))
    busy: dict[Connection, tuple[_Worker, int]] = {}

    def assign(worker: _Worker) -> None:
        index = next(upcoming, None)
        if index is None:
            worker.close()
        else:
            worker.connection.send(items[index])
            busy[worker.connection] = (worker, index)

    try:
        for _ in range(min(workers, len(items))):
            assign(_Worker(work, limit))
        while busy:
            for connection in wait(list(busy)):
                worker, index = busy.pop(connection)
                try:
                    results[index] = connection.recv()
                except (EOFError, OSError):  # the worker died on this item
                    results[index] = worker.death()
                    worker = _Worker(work, limit)
                assign(worker)
    finally:
        for worker, _ in busy.values():  # interrupted: no worker outlives the run
            worker.kill()
    return results


def _call(work: Callable[[], Result], _: None) -> Result:
    return work()


class _Worker:
    """One worker process, its connection, and a file that receives its standard error (where Rust
    says it ran out of memory before it aborts)."""

    def __init__(self, work: Callable[[Item], Result], limit: int | None) -> None:
        import tempfile

        context = _context()
        self.limit = limit
        self.connection, theirs = context.Pipe()
        # A file without a name: nothing is left behind however the run ends. Only a forked worker
        # inherits it; a spawned one (macOS, Windows) writes to the run's own standard error.
        self.stderr = (
            tempfile.TemporaryFile(prefix="fsdp2-lint-worker-") if context.get_start_method() == "fork" else None
        )
        stderr = self.stderr.fileno() if self.stderr else None
        self.process = context.Process(
            target=_serve, args=(theirs, work, limit, stderr, os.getpid()), name="fsdp2-lint-worker", daemon=True
        )
        self.process.start()
        theirs.close()

    def close(self) -> None:
        """Let the worker finish; pass on what it wrote. (Not by closing the connection: forked
        siblings hold copies of it, so the worker would never see it close.)"""
        self.connection.send(_Stop())
        self.connection.close()
        self.process.join()
        sys.stderr.write(self._stderr().decode(errors="replace"))

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.connection.close()
        self._stderr()

    def death(self) -> Crash:
        self.process.join()
        self.connection.close()
        if _RUST_OUT_OF_MEMORY in self._stderr():
            return _out_of_memory(self.limit)
        code = self.process.exitcode
        killed = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        return Crash(f"crashed on this file ({killed})")

    def _stderr(self) -> bytes:
        """What the worker wrote to its standard error (read once: the file is closed)."""
        if self.stderr is None or self.stderr.closed:
            return b""
        with self.stderr:
            self.stderr.seek(0)
            return self.stderr.read()


class _Stop:
    """Sent to a worker instead of an item: there are no more."""


def _out_of_memory(limit: int | None) -> Crash:
    cap = f" (the limit is {limit / (1 << 30):.1f} GiB per process)" if limit else ""
    return Crash(f"ran out of memory on this file{cap}", out_of_memory=True)


def _serve(
    connection: Connection, work: Callable[[Item], Result], limit: int | None, stderr: int | None, parent: int
) -> None:
    """The worker's loop: one item at a time until the parent closes the connection."""
    die_with_parent(signal.SIGKILL, parent)  # however the run dies
    if stderr is not None:
        os.dup2(stderr, 2)
    _cap_memory(limit)
    raise_recursion_limit()
    while True:
        try:
            item = connection.recv()
        except EOFError:
            return
        if isinstance(item, _Stop):
            return
        try:
            reply: Result | Crash = work(item)
        except MemoryError:
            reply = _out_of_memory(limit)
        connection.send(reply)


def _cap_memory(limit: int | None) -> None:
    """Cap the address space at ``limit`` bytes beyond what the worker already maps."""
    if limit is None:
        return
    try:
        import resource
    except ImportError:  # Windows
        return
    with contextlib.suppress(OSError, ValueError):
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        soft = _mapped_bytes() + limit
        resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _mapped_bytes() -> int:
    """The process's address space now (Linux; elsewhere 0: the cap is then absolute)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _context() -> multiprocessing.context.BaseContext:
    """Fork where it is safe (Linux): workers start at once with everything already imported."""
    import multiprocessing

    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")
