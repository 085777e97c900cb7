"""Lints for the language server, run in a child process.

Nothing one document does may take the server down, and some failures are not exceptions: the
native parser overflows its stack on absurdly nested code (a segmentation fault), and a runaway
lint would block every later one. A lint that kills or outlasts its process costs that document
one FSDP000 diagnostic that says so; the next lint starts a fresh process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from fsdp2_lint.config import ConfigError, Selection, find_config
from fsdp2_lint.engine import PARSE_ERROR, PARSE_ERROR_NAME, Diagnostic, raise_recursion_limit
from fsdp2_lint.rule import Severity, all_rules
from fsdp2_lint.runner import SettingsResolver, check_path

TIMEOUT_SECONDS = 60.0  # a 100,000-line file lints in seconds; much longer than this is a bug
READY = "ready"
CRASH_HINT = "a bug in fsdp2-lint: please report it with the file; the editor's other files are still checked"


@dataclass(frozen=True)
class LintResult:
    diagnostics: tuple[Diagnostic, ...]
    config_error: str | None = None  # the configuration is broken: nothing was linted


def lint_document(path: Path, source: bytes) -> LintResult:
    """What ``fsdp2-lint check --force-exclude --stdin-filename PATH`` reports for ``source``, with
    the configuration as it is on disk now: it is read afresh, since not every editor reports
    changes to it (Neovim on Linux does not watch files)."""
    find_config.cache_clear()
    try:
        settings = SettingsResolver(Selection()).for_path(path, is_dir=False)
    except ConfigError as error:
        return LintResult((), str(error))
    if settings.is_excluded(path, is_dir=False):
        return LintResult(())
    return LintResult(tuple(check_path(path, settings, str(path), source=source)))


class LintWorker:
    """One child process that lints one document at a time (call ``lint`` from one thread)."""

    def __init__(self, timeout: float = TIMEOUT_SECONDS, target: Callable[[Path, bytes], LintResult] = lint_document):
        """``target``: the lint, a module-level function (the child imports it by name)."""
        self.timeout = timeout
        self.target = target
        self._context = multiprocessing.get_context("spawn")  # forking a threaded server is unsafe
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Connection | None = None
        self._ready = False  # the process has imported the linter

    def start(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve, args=(theirs, self.target), name="fsdp2-lint-worker", daemon=True
        )
        self._process.start()
        theirs.close()
        self._connection, self._ready = ours, False

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._connection.close()
        self._process = self._connection = None

    def lint(self, path: Path, source: bytes) -> LintResult:
        self.start()
        try:
            reply = self._exchange(path, source)
        except (EOFError, OSError):
            reply = f"crashed on this file ({self._death()})"
        if isinstance(reply, LintResult):
            return reply
        self.stop()  # whatever went wrong, the next lint gets a fresh process
        return LintResult((failure(f"fsdp2-lint {reply}"),))

    def _exchange(self, path: Path, source: bytes) -> LintResult | str:
        """The child's reply, or why there is none."""
        if not self._ready:  # the timeout is for the lint, not for the child's imports
            if not self._connection.poll(self.timeout):
                return f"could not start within {self.timeout:g} seconds"
            self._ready = self._connection.recv() == READY
        self._connection.send((path, source))
        if not self._connection.poll(self.timeout):
            return f"gave up on this file after {self.timeout:g} seconds"
        return self._connection.recv()

    def _death(self) -> str:
        self._process.join(self.timeout)
        code = self._process.exitcode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"


def failure(message: str) -> Diagnostic:
    return Diagnostic(PARSE_ERROR, PARSE_ERROR_NAME, message, CRASH_HINT, Severity.ERROR, "", 1, 1, 1, 1, "")


def _serve(connection: Connection, target: Callable[[Path, bytes], LintResult]) -> None:
    """The child's loop: lint each request until the server goes away."""
    os.dup2(2, 1)  # the server's stdout is the protocol stream: nothing here may write to it
    raise_recursion_limit()  # as the CLI does
    all_rules()
    connection.send(READY)
    while True:
        try:
            path, source = connection.recv()
        except EOFError:
            return
        try:
            reply: LintResult | str = target(path, source)
        except Exception as error:  # the engine catches its own; this is a bug outside it
            reply = f"failed on this file: {type(error).__name__}: {error}"
        connection.send(reply)
