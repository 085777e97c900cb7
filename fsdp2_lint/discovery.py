"""Which files to lint: explicitly named files always; directories walked for ``*.py``/``*.pyi``,
skipping default excludes, the configuration's ``exclude`` and anything ``.gitignore`` ignores."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pathspec

DEFAULT_EXCLUDES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "__pycache__",
        "build",
        "dist",
        "node_modules",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".eggs",
        "site-packages",
        ".ipynb_checkpoints",
        ".direnv",
        "_build",
        "buck-out",
        ".fsdp2-lint-cache",
    }
)
SUFFIXES = (".py", ".pyi")


class _GitIgnores:
    """The .gitignore files that apply to a directory, outermost first, each anchored at its folder."""

    def __init__(self, specs: tuple[tuple[Path, pathspec.PathSpec], ...] = ()) -> None:
        self.specs = specs

    @classmethod
    def above(cls, directory: Path) -> _GitIgnores:
        """.gitignore files from the repository root down to ``directory`` (and .git/info/exclude)."""
        chain = [directory, *directory.parents]
        root = next((d for d in chain if (d / ".git").exists()), None)
        if root is None:
            return cls()
        specs = []
        exclude = root / ".git" / "info" / "exclude"
        if exclude.is_file():
            specs.append((root, _load(exclude)))
        for folder in reversed(chain[: chain.index(root) + 1]):
            if (folder / ".gitignore").is_file():
                specs.append((folder, _load(folder / ".gitignore")))
        return cls(tuple(specs))

    def entering(self, directory: Path) -> _GitIgnores:
        gitignore = directory / ".gitignore"
        return _GitIgnores(self.specs + ((directory, _load(gitignore)),)) if gitignore.is_file() else self

    def ignores(self, path: Path, is_dir: bool) -> bool:
        decision = False
        for base, spec in self.specs:
            try:
                relative = path.relative_to(base).as_posix()
            except ValueError:
                continue
            result = spec.check_file(relative + ("/" if is_dir else ""))
            if result.include is not None:
                decision = result.include
        return decision


def _load(path: Path) -> pathspec.PathSpec:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def discover(paths: list[Path], excluded: Callable[[Path, bool], bool]) -> Iterator[Path]:
    """Files to lint, in a stable order. ``excluded(absolute_path, is_dir)`` applies the
    configuration's exclude patterns."""
    for given in paths:
        if given.is_dir():
            real = given.resolve()
            yield from _walk(given, real, _GitIgnores.above(real), excluded)
        else:
            yield given  # named explicitly: always linted (a missing one is reported as FSDP000)


def _walk(shown: Path, real: Path, ignores: _GitIgnores, excluded: Callable[[Path, bool], bool]) -> Iterator[Path]:
    ignores = ignores.entering(real)
    try:
        entries = sorted(os.scandir(real), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir()
        if is_dir and entry.name in DEFAULT_EXCLUDES:
            continue
        path = real / entry.name
        if ignores.ignores(path, is_dir) or excluded(path, is_dir):
            continue
        if is_dir:
            yield from _walk(shown / entry.name, path, ignores, excluded)
        elif entry.name.endswith(SUFFIXES) and entry.is_file():
            yield shown / entry.name
