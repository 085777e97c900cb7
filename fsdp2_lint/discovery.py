"""Which files to lint: explicitly named files always; directories walked for ``*.py``/``*.pyi``
and Jupyter notebooks (``*.ipynb``, linted as their code cells: :mod:`fsdp2_lint.notebooks`), skipping default excludes, the configuration's ``exclude`` and anything ``.gitignore`` ignores.

Nothing found on disk stops the walk: each directory is walked once however many symbolic links
lead to it (so a link cycle ends), links that lead nowhere and files that are not regular (FIFOs,
devices, sockets: reading them blocks or never ends) are passed over, and a directory that cannot
be read is reported as :class:`Unlintable`. A path named explicitly that cannot be linted (missing,
not a regular file, unreadable) is reported the same way. A file named explicitly that is not Python
(a binary file, a file of a known other kind such as ``.md``) is :class:`Skipped`: the
command line warns about it instead of passing it silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from fsdp2_lint.sources import NOTEBOOK_SUFFIX, file_kind, reason

if TYPE_CHECKING:
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
SUFFIXES = (".py", ".pyi")  # Python source files
LINTED_SUFFIXES = (*SUFFIXES, NOTEBOOK_SUFFIX)  # what a directory walk lints: Python files and notebooks
# Named explicitly, a file with one of these suffixes is skipped (with a warning), as Ruff skips the
# kinds it knows are not Python; any other name (`train`, `run.py3`) is linted unless it is binary.
NOT_PYTHON_SUFFIXES = frozenset(
    ".md .rst .txt .json .jsonl .yaml .yml .toml .cfg .ini .csv .tsv .lock .sh .bash .zsh .bat .ps1 .c .cc .cpp"
    " .cxx .h .hpp .cu .cuh .js .ts .html .css .xml .svg .sql .r .rs .go .java .log".split()
)
_BINARY_PROBE = 8192  # bytes read to tell a binary file (a NUL byte) from text, as git and grep do
_READ_HINT = "check the path and its permissions"
_SPECIAL_FILE_HINT = "name the Python file itself: fsdp2-lint reads regular files only"


# Not dataclasses: every run imports this module, and compiling their methods would cost every start.
class Skipped(NamedTuple):
    """A file named explicitly that is not Python, and why: warned about, never linted."""

    path: Path
    reason: str


class Unlintable(NamedTuple):
    """A path that cannot be linted, and why: reported (as FSDP000) instead of linted."""

    path: Path  # as the walk shows it: under the path named on the command line
    reason: str
    hint: str
    is_dir: bool = False


class _GitIgnores:
    """The .gitignore files that apply to a directory, outermost first, each anchored at its folder."""

    def __init__(self, specs: tuple[tuple[Path, pathspec.PathSpec], ...] = ()) -> None:
        self.specs = specs

    @classmethod
    def above(cls, directory: Path) -> _GitIgnores:
        """.gitignore files from the repository root down to ``directory`` (and .git/info/exclude)."""
        chain = [directory, *directory.parents]
        root = next((d for d in chain if _exists(d / ".git")), None)
        if root is None:
            return cls()
        specs = []
        exclude = root / ".git" / "info" / "exclude"
        if _is_file(exclude):
            specs.append((root, _load(exclude)))
        for folder in reversed(chain[: chain.index(root) + 1]):
            if _is_file(folder / ".gitignore"):
                specs.append((folder, _load(folder / ".gitignore")))
        return cls(tuple(specs))

    def entering(self, directory: Path) -> _GitIgnores:
        gitignore = directory / ".gitignore"
        return _GitIgnores(self.specs + ((directory, _load(gitignore)),)) if _is_file(gitignore) else self

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
    import pathspec  # imported by a walk that finds a .gitignore

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _exists(path: Path) -> bool:
    try:
        path.stat()
    except OSError:  # missing, or in a directory that cannot be searched: as good as absent
        return False
    return True


def _is_file(path: Path) -> bool:
    """A regular file (following links): never blocks on a FIFO, never raises."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def discover(paths: list[Path], excluded: Callable[[Path, bool], bool]) -> Iterator[Path | Unlintable | Skipped]:
    """Files to lint, in a stable order, and what cannot be linted. ``excluded(absolute_path,
    is_dir)`` applies the configuration's exclude patterns."""
    walked: set[tuple[int, int]] = set()  # (device, inode) of every directory walked
    for given in paths:
        try:
            mode = given.stat().st_mode
        except OSError as error:  # named explicitly: missing or unreadable is reported, not skipped
            yield Unlintable(given, f"cannot read file: {reason(error)}", _READ_HINT)
            continue
        if stat.S_ISDIR(mode):
            real = given.resolve()
            yield from _walk(given, real, _GitIgnores.above(real), excluded, walked)
        elif stat.S_ISREG(mode):
            why = not_python(given)
            yield given if why is None else Skipped(given, why)
        else:
            yield Unlintable(given, f"cannot read file: {file_kind(mode)}, not a regular file", _SPECIAL_FILE_HINT)


def not_python(path: Path) -> str | None:
    """Why the regular file at ``path``, named explicitly, is not linted as Python (None: it is)."""
    suffix = path.suffix.lower()
    if suffix in LINTED_SUFFIXES:
        return None
    if suffix in NOT_PYTHON_SUFFIXES:
        return f"not a Python file (`{suffix}`)"
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as stream:
            head = stream.read(_BINARY_PROBE)
    except OSError:  # unreadable now: linting it reports why (FSDP000)
        return None
    return "a binary file, not Python source" if b"\0" in head else None


def _walk(
    shown: Path,
    real: Path,
    ignores: _GitIgnores,
    excluded: Callable[[Path, bool], bool],
    walked: set[tuple[int, int]],
) -> Iterator[Path | Unlintable]:
    try:
        identity, entries = _listing(real)
    except OSError as error:
        why = f"cannot read directory: {reason(error)}; no file in it was checked"
        yield Unlintable(shown, why, "check the directory's permissions", is_dir=True)
        return
    if identity in walked:  # reached again through a symbolic link: a cycle, or a second way in
        return
    walked.add(identity)
    ignores = ignores.entering(real)
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:  # a link that loops: nothing behind it to lint
            continue
        if is_dir and entry.name in DEFAULT_EXCLUDES:
            continue
        path = real / entry.name
        if ignores.ignores(path, is_dir) or excluded(path, is_dir):
            continue
        if is_dir:
            yield from _walk(shown / entry.name, path, ignores, excluded, walked)
        elif entry.name.endswith(LINTED_SUFFIXES) and _is_regular(entry):
            yield shown / entry.name


def _listing(directory: Path) -> tuple[tuple[int, int], list[os.DirEntry[str]]]:
    """The directory's identity and sorted entries; OSError when it cannot be listed or searched."""
    status = os.stat(os.path.join(directory, "."))  # "dir/." needs search permission, as reading its files does
    entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    return (status.st_dev, status.st_ino), entries


def _is_regular(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()  # following links: False for FIFOs, devices, sockets and dangling links
    except OSError:  # a link that loops
        return False
