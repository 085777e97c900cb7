"""Lint many files: prefilter and cache in this process, parse and analyse across processes.

The parent reads each file once, drops those the prefilter rules out and those the cache already
answers, and hands only the rest (by path) to worker processes. Results come back in the order
of the input, so the output is the same as a serial run's whatever the number of jobs. Fewer
files than ``PARALLEL_THRESHOLD`` to analyse are done here: starting workers would cost more.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from fsdp2_lint.cache import Cache
from fsdp2_lint.config import Settings
from fsdp2_lint.engine import PARSE_ERROR, Diagnostic, lint_file, lint_source, raise_recursion_limit
from fsdp2_lint.prefilter import applicable_rules
from fsdp2_lint.rule import Rule

PARALLEL_THRESHOLD = 16


@dataclass(frozen=True)
class LintTask:
    """One file to lint: where it is, the name it is reported under, and its settings."""

    path: Path
    display: str
    rules: tuple[type[Rule], ...]
    report_parse_errors: bool = True

    @classmethod
    def of(cls, path: Path, settings: Settings, display: str) -> LintTask:
        return cls(path, display, settings.rules_for(path), settings.reports_parse_errors(path))


def default_jobs() -> int:
    """All the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def lint_tasks(tasks: Sequence[LintTask], jobs: int | None = None, cache: Cache | None = None) -> list[Diagnostic]:
    """The diagnostics of every task, in task order (each file's sorted by position)."""
    results: list[list[Diagnostic]] = [[] for _ in tasks]
    pending: list[tuple[int, int]] = []  # (size, task index)
    for index, task in enumerate(tasks):
        try:
            data = task.path.read_bytes()
        except OSError:
            results[index] = lint_file(task.path, task.rules, task.display)  # reports why, as FSDP000
            continue
        if not applicable_rules(task.rules, data):
            continue
        cached = cache.load(cache.key(data, task.display, task.rules)) if cache is not None else None
        if cached is not None:
            results[index] = cached
        else:
            pending.append((len(data), index))
    jobs = default_jobs() if jobs is None else max(1, jobs)
    workers = min(jobs, len(pending)) if len(pending) >= PARALLEL_THRESHOLD else 1
    order = [index for _, index in sorted(pending, key=lambda item: -item[0])]  # the largest first: no long tail
    for index, diagnostics in zip(order, _analyse([tasks[index] for index in order], workers, cache), strict=True):
        results[index] = diagnostics
    return [
        diagnostic
        for task, found in zip(tasks, results, strict=True)
        for diagnostic in found
        if task.report_parse_errors or diagnostic.code != PARSE_ERROR
    ]


def _analyse(tasks: list[LintTask], workers: int, cache: Cache | None) -> Iterator[list[Diagnostic]]:
    """Each task's diagnostics, in order; each result is cached by whoever computed it."""
    lint = partial(_lint_one, cache=cache)
    if workers <= 1:
        yield from map(lint, tasks)
        return
    with ProcessPoolExecutor(workers, mp_context=_context(), initializer=raise_recursion_limit) as pool:
        yield from pool.map(lint, tasks, chunksize=1)


def _lint_one(task: LintTask, cache: Cache | None) -> list[Diagnostic]:
    try:
        data = task.path.read_bytes()  # read again: the parent keeps no file contents
    except OSError:
        return lint_file(task.path, task.rules, task.display)
    diagnostics = lint_source(data, task.display, task.rules)
    if cache is not None:
        cache.store(cache.key(data, task.display, task.rules), diagnostics)
    return diagnostics


def _context() -> multiprocessing.context.BaseContext:
    """Fork where it is safe (Linux): workers start at once with everything already imported."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")
