"""Worker processes for per-file work (issue 13, items 1 and 5): a worker that dies, or runs out
of memory, costs the item it held a Crash that says why, is replaced for the next items, and
leaves no process behind."""

from __future__ import annotations

import multiprocessing
import os
import signal

import hostile_inputs
import libcst

from fsdp2_lint import isolation
from fsdp2_lint.isolation import Crash, run_isolated


def crash(item: str) -> str:
    if item == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if item == "allocate":
        return str(len(bytearray(1 << 31)))
    if item == "parse":
        libcst.parse_module(hostile_inputs.source("big", 300))
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
