"""Lint files with their settings: the one entry point the CLI, the LSP server and pre-commit share.

A heavy file is linted or fixed in a worker process of its own (:mod:`fsdp2_lint.isolation`): a
crash or the memory running out costs it an FSDP000, never the process that asked."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial
from pathlib import Path

from fsdp2_lint.config import Selection, Settings, find_config, load_settings
from fsdp2_lint.diagnostics import PARSE_ERROR, Diagnostic
from fsdp2_lint.engine import FixResult, fix_source, lint_file, lint_source
from fsdp2_lint.isolation import Crash, crash_diagnostic, run_guarded
from fsdp2_lint.sources import read_source


class SettingsResolver:
    """Settings per file: from the nearest configuration, or from the one given explicitly;
    ``max_file_size`` (the command line's) overrides the configured one."""

    def __init__(
        self, cli: Selection, config: Path | None = None, isolated: bool = False, max_file_size: int | None = None
    ) -> None:
        self.cli = cli
        self.config = config
        self.isolated = isolated
        self.max_file_size = max_file_size
        self._by_config: dict[Path | None, Settings] = {}
        self._by_directory: dict[Path, Path | None] = {}

    def for_path(self, path: Path, is_dir: bool | None = None) -> Settings:
        if self.config is not None or self.isolated:
            return self._settings(self.config, Path.cwd())
        directory = path if (path.is_dir() if is_dir is None else is_dir) else path.parent
        # realpath: resolve() raises on a symbolic link loop
        directory = directory if directory.is_absolute() else Path(os.path.realpath(directory))
        if directory not in self._by_directory:
            self._by_directory[directory] = find_config(directory)
        return self._settings(self._by_directory[directory], Path.cwd())

    def _settings(self, config: Path | None, root: Path) -> Settings:
        if config not in self._by_config:
            settings = load_settings(config, self.cli, root)
            if self.max_file_size is not None:
                settings = replace(settings, max_file_size=self.max_file_size)
            self._by_config[config] = settings
        return self._by_config[config]


def check_path(path: Path, settings: Settings, display: str, source: bytes | None = None) -> list[Diagnostic]:
    """Diagnostics for one file, with its per-file ignores applied. ``source`` lints unsaved text."""
    diagnostics = _lint(path, settings, display, source)
    if settings.reports_parse_errors(path):
        return diagnostics
    return [d for d in diagnostics if d.code != PARSE_ERROR]


def _lint(path: Path, settings: Settings, display: str, source: bytes | None) -> list[Diagnostic]:
    rules = settings.rules_for(path)
    if source is None:
        try:
            source = read_source(path)
        except OSError:
            return lint_file(path, rules, display)  # says why it cannot be read
    work = partial(lint_source, source, display, rules, settings.max_file_size)
    linted = run_guarded(work, source, rules, settings.max_file_size)
    return [crash_diagnostic(display, linted)] if isinstance(linted, Crash) else linted


def fix_path(path: Path, settings: Settings, display: str, source: bytes, unsafe: bool) -> FixResult:
    """:func:`fix_source` for one file's bytes, with its settings (as :func:`check_path` lints it)."""
    rules = settings.rules_for(path)
    work = partial(fix_source, source, display, rules, unsafe, settings.max_file_size)
    result = run_guarded(work, source, rules, settings.max_file_size)
    if isinstance(result, Crash):
        result = FixResult(source, (), (crash_diagnostic(display, result),))
    if settings.reports_parse_errors(path):
        return result
    return replace(result, remaining=tuple(d for d in result.remaining if d.code != PARSE_ERROR))
