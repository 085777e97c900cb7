"""Lint files with their settings: the one entry point the CLI, the LSP server and pre-commit share."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from fsdp2_lint.config import Selection, Settings, find_config, load_settings
from fsdp2_lint.engine import PARSE_ERROR, Diagnostic, FixResult, fix_source, lint_file, lint_source


class SettingsResolver:
    """Settings per file: from the nearest configuration, or from the one given explicitly."""

    def __init__(self, cli: Selection, config: Path | None = None, isolated: bool = False) -> None:
        self.cli = cli
        self.config = config
        self.isolated = isolated
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
            self._by_config[config] = load_settings(config, self.cli, root)
        return self._by_config[config]


def check_path(path: Path, settings: Settings, display: str, source: bytes | None = None) -> list[Diagnostic]:
    """Diagnostics for one file, with its per-file ignores applied. ``source`` lints unsaved text."""
    rules = settings.rules_for(path)
    if source is None:
        diagnostics = lint_file(path, rules, display)
    else:
        diagnostics = lint_source(source, display, rules)
    if settings.reports_parse_errors(path):
        return diagnostics
    return [d for d in diagnostics if d.code != PARSE_ERROR]


def fix_path(path: Path, settings: Settings, display: str, source: bytes, unsafe: bool) -> FixResult:
    """:func:`fix_source` for one file's bytes, with its settings (as :func:`check_path` lints it)."""
    result = fix_source(source, display, settings.rules_for(path), unsafe)
    if settings.reports_parse_errors(path):
        return result
    return replace(result, remaining=tuple(d for d in result.remaining if d.code != PARSE_ERROR))
