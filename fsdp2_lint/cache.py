"""A content-addressed cache of each file's diagnostics, so an unchanged tree is not re-analysed.

An entry's key hashes everything its diagnostics depend on: the file's bytes, the name it is
reported under, the rules applied to it, and a fingerprint of the linter itself (its version and
the source of the package, rules included, so that editing a rule invalidates every entry).
Entries are JSON files written atomically (temporary file + ``os.replace``), so concurrent runs
never see half an entry; an entry that cannot be read or decoded is treated as missing.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import sys
import tempfile
import types
import typing
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import fsdp2_lint
from fsdp2_lint import __version__
from fsdp2_lint.engine import Diagnostic
from fsdp2_lint.rule import Rule

CACHE_DIR_ENV = "FSDP2_LINT_CACHE_DIR"  # --cache-dir
DEFAULT_CACHE_DIR = ".fsdp2-lint-cache"
_FORMAT = "v1"


class Cache:
    """Diagnostics of linted files, stored under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._prepared = False

    def key(self, data: bytes, display: str, rules: Sequence[type[Rule]]) -> str:
        digest = hashlib.sha256(linter_fingerprint().encode())
        digest.update(json.dumps([display, [rule.code for rule in rules]]).encode())
        digest.update(data)
        return digest.hexdigest()

    def load(self, key: str) -> list[Diagnostic] | None:
        try:
            entry = json.loads(self._entry(key).read_bytes())
            return [decode(Diagnostic, item) for item in entry]
        except (OSError, ValueError, TypeError, KeyError):
            return None  # missing, or corrupt: computed again and overwritten

    def store(self, key: str, diagnostics: list[Diagnostic]) -> None:
        path = self._entry(key)
        try:
            self._prepare()
            path.parent.mkdir(exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump([encode(diagnostic) for diagnostic in diagnostics], file)
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only or full disk costs the speed-up, never the result

    def _entry(self, key: str) -> Path:
        return self.directory / _FORMAT / key[:2] / f"{key}.json"

    def _prepare(self) -> None:
        """Create the directory, marked so that git and backup tools leave it alone."""
        if self._prepared:
            return
        (self.directory / _FORMAT).mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")):
            if not (self.directory / name).exists():
                (self.directory / name).write_text(text)
        self._prepared = True


@cache
def linter_fingerprint() -> str:
    """The tool version, the Python version and a hash of the linter's own source (rules included)."""
    import fsdp2_lint.rules as rules

    folders = [Path(fsdp2_lint.__path__[0]), Path(rules.__path__[0])]
    return sources_fingerprint(f"{__version__} {sys.version_info[:2]}", folders)


def sources_fingerprint(version: str, folders: Sequence[Path]) -> str:
    """A hash of ``version`` and of every Python file under ``folders`` (names and contents)."""
    digest = hashlib.sha256(version.encode())
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            digest.update(f"\0{path.relative_to(folder)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def encode(value: object) -> object:
    """A dataclass value as JSON data: dataclasses as objects, enums by value, tuples as lists."""
    if dataclasses.is_dataclass(value):
        return {field.name: encode(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot cache a value of type {type(value).__name__}")


def decode(kind: object, data: object) -> object:
    """The inverse of :func:`encode`, guided by the type annotations of the dataclasses."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None):
                try:
                    return decode(option, data)
                except (TypeError, ValueError, KeyError):
                    continue
        raise TypeError(f"cannot decode {data!r} as {kind}")
    if origin is tuple:
        items = typing.get_args(kind)
        elements = _list(data)
        if items[-1] is Ellipsis:
            return tuple(decode(items[0], element) for element in elements)
        if len(items) != len(elements):
            raise TypeError(f"expected {len(items)} items")
        return tuple(decode(item, element) for item, element in zip(items, elements, strict=True))
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {kind.__name__}")
        hints = typing.get_type_hints(kind)
        fields = {field.name for field in dataclasses.fields(kind) if field.init}
        return kind(**{name: decode(hints[name], data[name]) for name in fields})
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(data)
    if kind in (str, int, float, bool) and type(data) is kind:
        return data
    raise TypeError(f"cannot decode {data!r} as {kind}")


def _list(data: object) -> list:
    if not isinstance(data, list):
        raise TypeError("expected a list")
    return data
