"""Configuration: ``[tool.fsdp2-lint]`` in the nearest ``pyproject.toml``, overridden by the CLI.

Selectors are rule codes or code prefixes (``FSDP0``, ``FSDP``), as in Ruff: ``select``
replaces the default (every rule), ``extend-select`` adds to it, ``ignore`` removes; the CLI's
``--select`` replaces the file's ``select``, its ``--ignore``/``--extend-select`` add to the
file's. An unknown key or a selector that matches no rule is a configuration error.
``torch-version`` (``--torch-version``) is the torch the code is linted for: a rule whose failure
does not happen on it does not run (see :mod:`fsdp2_lint.torch_version`).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from fsdp2_lint.diagnostics import PARSE_ERROR
from fsdp2_lint.rule import RuleHead, rule_heads
from fsdp2_lint.sources import DEFAULT_MAX_FILE_SIZE
from fsdp2_lint.torch_version import TorchVersion, default_torch_version

if TYPE_CHECKING:
    import pathspec

SECTION = "fsdp2-lint"
LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "import-roots")
KNOWN_KEYS = frozenset(LIST_KEYS + ("per-file-ignores", "max-file-size", "follow-imports", "torch-version"))


Spec: TypeAlias = "pathspec.PathSpec | _NoPatterns"  # gitignore-style patterns


class ConfigError(Exception):
    """Bad configuration or selection: reported to the user, exit code 2."""


class Selection(NamedTuple):  # not a dataclass: compiling its methods would cost every start
    """Selectors from one source (the config file or the command line)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()


@dataclass
class Settings:
    """The effective settings for the files under one configuration root."""

    root: Path
    rules: tuple[RuleHead, ...]  # loaded when a file is analysed
    exclude: Spec = field(default_factory=lambda: _spec([]))  # exclude + extend-exclude, from root
    exclude_patterns: tuple[str, ...] = ()  # the configured `exclude` (a command line's --exclude replaces it)
    extend_exclude_patterns: tuple[str, ...] = ()  # the configured `extend-exclude`
    # --exclude / --extend-exclude: the directory the command runs in, the patterns (relative to it), their spec
    cli_exclude: tuple[Path, tuple[str, ...], Spec] | None = None
    per_file_ignores: tuple[tuple[Spec, frozenset[str]], ...] = ()
    source: Path | None = None  # the pyproject.toml it came from
    parse_errors_reported: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; larger files are FSDP000, not analysed (0: no limit)
    follow_imports: bool = True  # follow calls into the project's other modules
    import_roots: tuple[Path, ...] = ()  # where the project's imports resolve from (empty: found automatically)
    # The torch linted for; None: the installed one, read (from its package metadata) only when a
    # selected rule's failure happens on some versions only.
    torch_version: TorchVersion | None = None

    def rules_for(self, path: Path) -> tuple[RuleHead, ...]:
        """The rules selected for the file, less those whose failure does not happen on the torch linted for."""
        ignored = self.ignored_codes(path)
        return tuple(
            rule
            for rule in self.rules
            if rule.code not in ignored
            and (rule.torch_versions.unbounded or self.linted_torch() in rule.torch_versions)
        )

    def linted_torch(self) -> TorchVersion:
        """The torch linted for: the configured one, else the installed one, else the newest supported."""
        if self.torch_version is None:
            self.torch_version = default_torch_version()
        return self.torch_version

    def reports_parse_errors(self, path: Path) -> bool:
        return self.parse_errors_reported and PARSE_ERROR not in self.ignored_codes(path)

    def ignored_codes(self, path: Path) -> frozenset[str]:
        relative = _relative(path, self.root)
        if relative is None:
            return frozenset()
        ignored: set[str] = set()
        for spec, codes in self.per_file_ignores:
            if spec.match_file(relative):
                ignored |= codes
        return frozenset(ignored)

    def is_excluded(self, path: Path, is_dir: bool) -> bool:
        if _matches(self.exclude, self.root, path, is_dir):
            return True
        return self.cli_exclude is not None and _matches(self.cli_exclude[2], self.cli_exclude[0], path, is_dir)

    def describe(self, path: Path) -> str:
        """``--show-settings``: these settings as TOML-like ``key = value`` lines, those of ``path``
        (per-file-ignores and the torch version applied) last."""
        import json

        def strings(values: Sequence[object]) -> str:
            return "[" + ", ".join(json.dumps(str(value)) for value in values) + "]"

        ignores = ", ".join(
            f"{json.dumps(spec.patterns[0].pattern)} = {strings(sorted(codes))}"
            for spec, codes in self.per_file_ignores
        )
        lines = [
            f"config = {json.dumps(str(self.source)) if self.source else 'none (defaults)'}",
            f"root = {json.dumps(str(self.root))}",
            f"rules = {strings([rule.code for rule in self.rules])}",
            f"report-parse-errors = {str(self.parse_errors_reported).lower()}  # {PARSE_ERROR}",
            f"exclude = {strings(self.exclude_patterns)}",
            f"extend-exclude = {strings(self.extend_exclude_patterns)}",
        ]
        if self.cli_exclude is not None:
            lines.append(f"command-line-exclude = {strings(self.cli_exclude[1])}  # relative to {self.cli_exclude[0]}")
        lines += [
            f"per-file-ignores = {{{' ' + ignores + ' ' if ignores else ''}}}",
            f"max-file-size = {self.max_file_size}",
            f"follow-imports = {str(self.follow_imports).lower()}",
            f"import-roots = {strings(self.import_roots)}",
            f'torch-version = "{self.torch_version}"',
            f"rules-for-this-file = {strings([rule.code for rule in self.rules_for(path)])}",
        ]
        return "\n".join(lines)

    def with_cli_exclude(
        self, exclude: tuple[str, ...] | None, extend_exclude: tuple[str, ...], base: Path
    ) -> Settings:
        """The settings with the command line's ``--exclude`` (replacing the configured ``exclude``)
        and ``--extend-exclude`` (adding to it), both relative to ``base``."""
        if exclude is None and not extend_exclude:
            return self
        kept = self.exclude_patterns if exclude is None else ()
        patterns = (exclude or ()) + extend_exclude
        return replace(
            self,
            exclude=_spec(list(kept + self.extend_exclude_patterns)),
            exclude_patterns=kept,
            cli_exclude=(base.resolve(), patterns, _spec(list(patterns))),
        )


@cache
def find_config(directory: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in or above ``directory`` with a ``[tool.fsdp2-lint]`` table.
    Directories that cannot be searched are passed over (whatever they hold cannot be read either);
    a ``pyproject.toml`` that cannot be read or parsed is a :class:`ConfigError`."""
    pyproject = directory / "pyproject.toml"
    if _is_regular_file(pyproject) and SECTION in _read_toml(pyproject).get("tool", {}):
        return pyproject
    return None if directory.parent == directory else find_config(directory.parent)


def load_settings(config: Path | None, cli: Selection, root: Path) -> Settings:
    table: dict[str, object] = {}
    if config is not None:
        table = _read_toml(config).get("tool", {}).get(SECTION, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{config}: [tool.{SECTION}] must be a table")
        root = config.parent
    root = root.resolve()
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{config}: unknown key(s) in [tool.{SECTION}]: {', '.join(unknown)}")
    lists = {key: _string_list(config, table, key) for key in LIST_KEYS}
    from_file = Selection(
        tuple(lists["select"]) if "select" in table else None, tuple(lists["ignore"]), tuple(lists["extend-select"])
    )
    codes = resolve_selection(from_file, cli, where=str(config) if config else "configuration")
    return Settings(
        root=root,
        rules=tuple(rule for rule in rule_heads() if rule.code in codes),
        exclude=_spec(lists["exclude"] + lists["extend-exclude"]),
        exclude_patterns=tuple(lists["exclude"]),
        extend_exclude_patterns=tuple(lists["extend-exclude"]),
        per_file_ignores=_per_file_ignores(config, table.get("per-file-ignores", {})),
        source=config,
        parse_errors_reported=PARSE_ERROR in codes,
        max_file_size=_max_file_size(config, table.get("max-file-size", DEFAULT_MAX_FILE_SIZE)),
        follow_imports=_flag(config, table, "follow-imports", True),
        import_roots=tuple(root / entry for entry in lists["import-roots"]),
        torch_version=_torch_version(config, table.get("torch-version")),
    )


def resolve_selection(from_file: Selection, cli: Selection, where: str) -> frozenset[str]:
    """The rule codes enabled by the file's selectors overridden by the command line's."""
    everything = [PARSE_ERROR] + [rule.code for rule in rule_heads()]
    for origin, selection in ((where, from_file), ("command line", cli)):
        for selector in (selection.select or ()) + selection.ignore + selection.extend_select:
            if not _matching(selector, everything):
                raise ConfigError(f"{origin}: unknown rule code or prefix {selector!r}")
    select = cli.select if cli.select is not None else from_file.select
    codes = set(everything if select is None else _expand(select, everything))
    codes |= _expand(from_file.extend_select + cli.extend_select, everything)
    codes -= _expand(from_file.ignore + cli.ignore, everything)
    return frozenset(codes)


def _matching(selector: str, codes: Sequence[str]) -> list[str]:
    selector = selector.strip().upper()
    if selector == "ALL":
        return list(codes)
    return [code for code in codes if code.startswith(selector)] if selector else []


def _expand(selectors: Sequence[str], codes: Sequence[str]) -> set[str]:
    return {code for selector in selectors for code in _matching(selector, codes)}


def _read_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):  # the TOML parser loads with the first pyproject.toml found
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        return tomllib.loads(_regular_file_bytes(path).decode())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read configuration: {error.strerror or error}") from error
    except (ValueError, RecursionError) as error:  # ValueError: not UTF-8, not TOML
        raise ConfigError(f"{path}: cannot read configuration: {error}") from error


def _regular_file_bytes(path: Path) -> bytes:
    """The file's bytes; OSError for a FIFO or device, which would block or never end."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # opening a FIFO must not block
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return handle.read()


def _is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:  # missing, or in a directory that cannot be searched
        return False


def _max_file_size(config: Path | None, value: object) -> int:
    if type(value) is not int or value < 0:
        raise ConfigError(f"{config}: `max-file-size` must be a number of bytes (0: no limit)")
    return value


def _torch_version(config: Path | None, value: object) -> TorchVersion | None:
    if value is None:
        return None  # the installed torch, when a rule asks
    if not isinstance(value, str):  # a TOML number would read 2.10 as 2.1
        raise ConfigError(f'{config}: `torch-version` must be a string such as "2.13"')
    try:
        return TorchVersion.parse(value)
    except ValueError as error:
        raise ConfigError(f"{config}: `torch-version`: {error}") from None


def _flag(config: Path | None, table: dict, key: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{config}: `{key}` must be true or false")
    return value


def _string_list(config: Path | None, table: dict, key: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{config}: `{key}` must be a list of strings")
    return value


def _per_file_ignores(config: Path | None, value: object) -> tuple[tuple[Spec, frozenset[str]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{config}: `per-file-ignores` must be a table of pattern = [codes]")
    everything = [PARSE_ERROR] + [rule.code for rule in rule_heads()]
    entries = []
    for pattern, selectors in value.items():
        if not isinstance(selectors, list) or not all(isinstance(item, str) for item in selectors):
            raise ConfigError(f"{config}: per-file-ignores[{pattern!r}] must be a list of codes")
        for selector in selectors:
            if not _matching(selector, everything):
                raise ConfigError(f"{config}: per-file-ignores[{pattern!r}]: unknown rule code or prefix {selector!r}")
        entries.append((_spec([pattern]), frozenset(_expand(selectors, everything))))
    return tuple(entries)


class _NoPatterns:
    """The spec of no pattern (what most configurations exclude): it matches nothing, and spares
    the run pathspec's import."""

    def match_file(self, file: str) -> bool:
        return False


def _spec(patterns: list[str]) -> Spec:
    if not patterns:
        return _NoPatterns()
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(patterns)


def _matches(spec: pathspec.PathSpec, root: Path, path: Path, is_dir: bool) -> bool:
    relative = _relative(path, root)
    return relative is not None and spec.match_file(relative + "/" if is_dir else relative)


def _relative(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root``, or None outside it (``..`` resolved first: `../x.py` named from
    within the root is outside it, as its absolute path is)."""
    try:
        return Path(os.path.normpath(path.absolute())).relative_to(root).as_posix()
    except ValueError:
        return None
