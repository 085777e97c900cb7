"""Lint many files: prefilter and cache in this process, parse and analyse across processes.

The parent reads each file once, drops those the prefilter rules out and those the cache already
answers, and hands only the rest (by path) to worker processes (:mod:`fsdp2_lint.isolation`: a
file that kills its worker, or exhausts its memory, costs that file an FSDP000 and the run goes
on). Results come back in the order of the input, so the output is the same as a serial run's
whatever the number of jobs. Fewer files than ``PARALLEL_THRESHOLD`` to analyse, or one job, are
done here, except heavy files: starting workers would cost more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from fsdp2_lint.cache import Cache
from fsdp2_lint.config import Settings
from fsdp2_lint.diagnostics import PARSE_ERROR, Diagnostic
from fsdp2_lint.engine import lint_file, lint_source
from fsdp2_lint.isolation import Crash, crash_diagnostic, memory_limit, run_guarded, run_isolated
from fsdp2_lint.prefilter import applicable_rules
from fsdp2_lint.rule import Rule
from fsdp2_lint.sources import DEFAULT_MAX_FILE_SIZE, read_source

PARALLEL_THRESHOLD = 16


@dataclass(frozen=True)
class LintTask:
    """One file to lint: where it is, the name it is reported under, and its settings."""

    path: Path
    display: str
    rules: tuple[type[Rule], ...]
    report_parse_errors: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE

    @classmethod
    def of(cls, path: Path, settings: Settings, display: str) -> LintTask:
        rules = settings.rules_for(path)
        return cls(path, display, rules, settings.reports_parse_errors(path), settings.max_file_size)


def default_jobs() -> int:
    """All the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def lint_each(tasks: Sequence[LintTask], jobs: int | None = None, cache: Cache | None = None) -> list[list[Diagnostic]]:
    """Each task's diagnostics (sorted by position), in task order."""
    results: list[list[Diagnostic]] = [[] for _ in tasks]
    pending: list[tuple[int, int]] = []  # (size, task index)
    for index, task in enumerate(tasks):
        try:
            data = read_source(task.path)
        except OSError:
            results[index] = lint_file(task.path, task.rules, task.display)  # reports why, as FSDP000
            continue
        if not applicable_rules(task.rules, data):
            continue
        if task.max_file_size and len(data) > task.max_file_size:  # before the cache: its key has no limit
            results[index] = lint_source(data, task.display, task.rules, task.max_file_size)
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
        [diagnostic for diagnostic in found if task.report_parse_errors or diagnostic.code != PARSE_ERROR]
        for task, found in zip(tasks, results, strict=True)
    ]


def _analyse(tasks: list[LintTask], workers: int, cache: Cache | None) -> list[list[Diagnostic]]:
    """Each task's diagnostics, in order; each result is cached by whoever computed it (a crash,
    which may not recur, is not cached)."""
    if workers <= 1:
        return [_lint_guarded(task, cache) for task in tasks]
    limits = [memory_limit(task.max_file_size) for task in tasks]
    limit = None if None in limits else max(limits, default=None)
    results = run_isolated(partial(_lint_one, cache=cache), tasks, workers, limit)
    return [_crash_diagnostics(task, result) for task, result in zip(tasks, results, strict=True)]


def _lint_guarded(task: LintTask, cache: Cache | None) -> list[Diagnostic]:
    """:func:`_lint_one` in this process, or in a worker of its own for a heavy file."""
    try:
        data = read_source(task.path)
    except OSError:
        return lint_file(task.path, task.rules, task.display)
    work = partial(_lint_bytes, task, data, cache)
    return _crash_diagnostics(task, run_guarded(work, data, task.rules, task.max_file_size))


def _lint_one(task: LintTask, cache: Cache | None) -> list[Diagnostic]:
    try:
        data = read_source(task.path)  # read again: the parent keeps no file contents
    except OSError:
        return lint_file(task.path, task.rules, task.display)
    return _lint_bytes(task, data, cache)


def _lint_bytes(task: LintTask, data: bytes, cache: Cache | None) -> list[Diagnostic]:
    diagnostics = lint_source(data, task.display, task.rules, task.max_file_size)
    if cache is not None:
        cache.store(cache.key(data, task.display, task.rules), diagnostics)
    return diagnostics


def _crash_diagnostics(task: LintTask, result: list[Diagnostic] | Crash) -> list[Diagnostic]:
    if isinstance(result, Crash):
        return [crash_diagnostic(task.display, result)]
    return result
