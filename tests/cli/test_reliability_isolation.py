"""Worker processes for per-file work (issue 13, items 1 and 5): a worker that dies, or runs out
of memory, costs the item it held a Crash that says why, is replaced for the next items, and
leaves no process behind; and real code stays far from the nesting limits."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostile_inputs
import libcst

from fsdp2_lint import engine, isolation
from fsdp2_lint.isolation import HEAVY_NESTING, Crash, run_isolated
from fsdp2_lint.nesting import nesting_depth


def crash(item: str) -> str:
    if item == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if item == "allocate":
        return str(len(bytearray(1 << 31)))
    if item == "parse":
        libcst.parse_module(hostile_inputs.source("big", 1500))
    return item.upper()


def test_workers_that_die_are_replaced_and_results_keep_their_order():
    items = ["a", "segfault", "b", "allocate", "c", "parse", "d"]
    results = run_isolated(crash, items, 2, 200 << 20)
    limit = " (the limit is 0.2 GiB per process)"
    assert results == [
        "A",
        Crash("crashed on this file (killed by SIGSEGV)"),
        "B",
        Crash(f"ran out of memory on this file{limit}", out_of_memory=True),  # a MemoryError
        "C",
        Crash(f"ran out of memory on this file{limit}", out_of_memory=True),  # Rust's allocation failure
        "D",
    ]
    assert multiprocessing.active_children() == []


def test_memory_limit_follows_max_file_size():
    assert isolation.memory_limit(1 << 20) == 2 << 30
    assert isolation.memory_limit(0) is None


def test_real_code_nests_far_below_what_is_refused_or_isolated():
    """The estimate is an upper bound, so it must stay well under the limits on real code: no
    fixture, rule example or source of the linter is refused, or even set apart as heavy."""
    sources = [*Path(engine.__file__).parent.rglob("*.py"), *(Path(__file__).parents[2] / "fixtures").rglob("*.py")]
    assert len(sources) > 200
    assert max(nesting_depth(path.read_bytes()) for path in sources) <= HEAVY_NESTING < engine.MAX_NESTING


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has exited


def _wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_killed_run_leaves_no_worker_behind(tmp_path):
    """The kernel kills a worker whose run died, even of SIGKILL, which no handler sees."""
    (tmp_path / "heavy.py").write_bytes(hostile_inputs.source("big", 600))  # seconds of parsing, in a worker
    run = subprocess.Popen([sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "heavy.py"], cwd=tmp_path)
    try:
        assert _wait_for(lambda: _children(run.pid)), "no worker started"
        [worker] = _children(run.pid)
        run.kill()
        run.wait()
        assert _wait_for(lambda: not _running(worker))
    finally:
        run.kill()
        run.wait()
