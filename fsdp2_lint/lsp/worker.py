"""Lints and fixes for the language server, run in a child process.

Nothing one document does may take the server down, and some failures are not exceptions: the
native parser overflows its stack on absurdly nested code (a segmentation fault), and a runaway
lint would block every later one. A lint that kills or outlasts its process costs that document
one FSDP000 diagnostic that says so; the next call starts a fresh process.

The child must not import from the editor's working directory, where a project's own
``signal.py`` would run: a spawned child starts as ``python -c``, which puts that directory first
on ``sys.path``, and imports ``signal``, ``socket``, ``threading`` and ``pickle`` before it takes
the parent's ``sys.path``, and so does multiprocessing's resource tracker. ``PYTHONSAFEPATH``
(Python 3.11 and later) keeps it off; Python 3.10 ignores it, so both start in an empty directory
(:func:`_started_elsewhere`), and the child goes back to the server's directory without it on its path.
"""

from __future__ import annotations

import atexit
import functools
import io
import multiprocessing
import os
import signal
import sys
import tempfile
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

from fsdp2_lint.analysis.project import ParsedModules
from fsdp2_lint.config import ConfigError, Selection, Settings, find_config
from fsdp2_lint.diagnostics import Diagnostic, file_error
from fsdp2_lint.pipeline import LintTask, SettingsResolver, fix_file, imported_files, lint_files
from fsdp2_lint.rule import all_rules

TIMEOUT_SECONDS = 60.0  # a 100,000-line file lints in seconds; much longer than this is a bug
# The child's imports (libcst, every rule), on a loaded machine or before Python has compiled them:
# not part of any call's time, so a short call timeout does not make a slow start a failed lint.
START_TIMEOUT_SECONDS = 60.0
READY = "ready"
CRASH_HINT = "a bug in fsdp2-lint: please report it with the file; the editor's other files are still checked"
Result = TypeVar("Result")


@dataclass(frozen=True)
class LintResult:
    diagnostics: tuple[Diagnostic, ...]  # the document's, and those its lint placed in other files
    config_error: str | None = None  # the configuration is broken: nothing was linted
    reads: frozenset[Path] = frozenset()  # the project modules the analysis could read (resolved paths)


@dataclass(frozen=True)
class Failure:
    """Why a call into the child gave no result."""

    reason: str


# The child's parsed project modules, kept between lints: an edit re-parses the edited buffer and
# whatever changed, not every module it imports.
_KEPT = ParsedModules()


def lint_document(path: Path, source: bytes, overlays: dict[Path, bytes] | None = None) -> LintResult:
    """What ``fsdp2-lint check --force-exclude --stdin-filename PATH`` reports for ``source``, with
    the configuration as it is on disk now: it is read afresh, since not every editor reports
    changes to it (Neovim on Linux does not watch files). ``overlays``: the editor's other unsaved
    documents, which the analysis reads instead of their files when it follows imports into them."""
    try:
        settings = _settings(path)
    except ConfigError as error:
        return LintResult((), str(error))
    if settings is None:
        return LintResult(())
    task = LintTask.of(path, settings, str(path), source)
    (diagnostics,) = lint_files([task], overlays=overlays, kept=_KEPT)
    return LintResult(tuple(diagnostics), reads=frozenset(imported_files(task, overlays)))


def fix_document(path: Path, source: bytes) -> str | None:
    """The text with every safe fix applied (what ``fsdp2-lint check --fix`` would write), or None
    when nothing is fixed."""
    try:
        settings = _settings(path)
    except ConfigError:
        return None
    if settings is None:
        return None
    result = fix_file(LintTask.of(path, settings, str(path), source), unsafe=False, write=False).result
    if not result.fixed:
        return None
    encoding = tokenize.detect_encoding(io.BytesIO(result.source).readline)[0]
    return result.source.decode(encoding)


def _settings(path: Path) -> Settings | None:
    """The file's settings, read afresh; None for a file the configuration excludes."""
    find_config.cache_clear()
    settings = SettingsResolver(Selection()).for_path(path, is_dir=False)
    return None if settings.is_excluded(path, is_dir=False) else settings


class LintWorker:
    """One child process that runs one call at a time (use it from one thread)."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS, lint: Callable[..., LintResult] = lint_document):
        """``lint``: the lint, a module-level function (the child imports it by name)."""
        self.timeout = timeout
        self._lint = lint
        self._context = multiprocessing.get_context("spawn")  # forking a threaded server is unsafe
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Connection | None = None
        self._ready = False  # the process has imported the linter

    def start(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        os.environ["PYTHONSAFEPATH"] = "1"  # for the child and multiprocessing's resource tracker (see above)
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve, args=(theirs, os.getcwd()), name="fsdp2-lint-worker", daemon=True
        )
        with _started_elsewhere():
            self._process.start()
        theirs.close()
        self._connection, self._ready = ours, False

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._connection.close()
        self._process = self._connection = None

    def lint(self, path: Path, source: bytes, overlays: dict[Path, bytes] | None = None) -> LintResult:
        """``lint(path, source, overlays)`` in the child (see :func:`lint_document`)."""
        reply = self.call(self._lint, path, source, overlays)
        if isinstance(reply, Failure):
            return LintResult((file_error(str(path), f"fsdp2-lint {reply.reason}", hint=CRASH_HINT),))
        return reply

    def fix(self, path: Path, source: bytes) -> str | None:
        """The text with every safe fix applied, or None (nothing to fix, or the fixing failed)."""
        reply = self.call(fix_document, path, source)
        return None if isinstance(reply, Failure) else reply

    def call(self, function: Callable[..., Result], *args: object) -> Result | Failure:
        """``function(*args)`` in the child; a failure replaces the child for the next call."""
        self.start()
        try:
            reply = self._exchange(function, args)
        except (EOFError, OSError):
            reply = Failure(f"crashed on this file ({self._death()})")
        if isinstance(reply, Failure):
            self.stop()
        return reply

    def _exchange(self, function: Callable[..., Result], args: tuple[object, ...]) -> Result | Failure:
        if not self._ready:  # the timeout is for the call, not for the child's imports
            if not self._connection.poll(START_TIMEOUT_SECONDS):
                return Failure(f"could not start within {START_TIMEOUT_SECONDS:g} seconds")
            self._ready = self._connection.recv() == READY
        self._connection.send((function, args))
        if not self._connection.poll(self.timeout):
            return Failure(f"gave up on this file after {self.timeout:g} seconds")
        return self._connection.recv()

    def _death(self) -> str:
        self._process.join(self.timeout)
        code = self._process.exitcode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"


@contextmanager
def _started_elsewhere() -> Iterator[None]:
    """Processes started inside run in an empty directory, where ``python -c`` finds no module
    (Python 3.10, which ignores ``PYTHONSAFEPATH``; see the module's docs)."""
    if sys.version_info >= (3, 11):
        yield
        return
    here = os.getcwd()
    os.chdir(_empty_directory())
    try:
        yield
    finally:
        os.chdir(here)


@functools.cache
def _empty_directory() -> str:
    """A directory that stays empty while the server runs: a spawned child enters it again (its
    preparation names the parent's directory) after :meth:`LintWorker.start` returns."""
    path = tempfile.mkdtemp(prefix="fsdp2-lint-empty-")
    atexit.register(os.rmdir, path)
    return path


def _serve(connection: Connection, directory: str) -> None:
    """The child's loop: run each call until the server goes away."""
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".")]  # `python -c`'s working directory
    os.chdir(directory)
    os.dup2(2, 1)  # the server's stdout is the protocol stream: nothing here may write to it
    all_rules()  # the rules' modules load before the first call's timeout starts
    connection.send(READY)
    while True:
        try:
            function, args = connection.recv()
        except EOFError:
            return
        try:
            reply = function(*args)
        except Exception as error:  # the engine catches its own; this is a bug outside it
            reply = Failure(f"failed on this file: {type(error).__name__}: {error}")
        connection.send(reply)
