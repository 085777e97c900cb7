"""A content-addressed cache of each file's diagnostics, so an unchanged tree is not re-analysed.

An entry's key hashes everything its diagnostics depend on: the file's bytes, the name it is
reported under, the rules applied to it, the project modules its analysis can read (each one's
path and bytes: editing a helper invalidates the files that import it, and nothing else; none when
imports are not followed), and a fingerprint of the linter itself (its version and the source of
the package, rules included, so that editing a rule invalidates every entry).
Entries are written atomically (temporary file + ``os.replace``), so concurrent runs never see
half an entry; an entry that cannot be read, verified or decoded is a miss, computed again.

Trust. An entry that says "no findings" makes a file pass unseen, and every input of its key is
public: anyone can write ``v2/xx/KEY.json`` for a file with an error. So an entry counts only if
a run of fsdp2-lint wrote it into this very cache, which two checks establish:

- The cache holds a random secret, ``key``, made by the first run that writes to it. Each entry
  carries an HMAC-SHA256 of its key and contents under that secret, verified before the entry is
  parsed (then its schema is checked strictly). An entry written by anything else is a miss.
- The secret must not have arrived with the checked-out tree. The directory carries a
  ``.gitignore`` of ``*``, so ``git add`` never takes it; a cache forced into a repository (or
  without that file) has its files tracked, and its secret is then public. So when the cache sits
  in a git work tree, ``git ls-files`` (run once, on first use) must list nothing under it;
  otherwise the whole cache is unused for the run, with one warning on standard error.

What this keeps valid: a cache restored by the CI system's own cache (``actions/cache`` of the
directory) was written by an earlier run, secret included, and git does not track it. What it
cannot tell: outside a git work tree, a cache copied together with its secret (an archive of a
tree and its cache) is trusted like one this machine wrote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import stat
import sys
import types
import typing
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import fsdp2_lint
from fsdp2_lint import __version__
from fsdp2_lint.diagnostics import Diagnostic
from fsdp2_lint.rule import Rule

CACHE_DIR_ENV = "FSDP2_LINT_CACHE_DIR"  # --cache-dir
DEFAULT_CACHE_DIR = ".fsdp2-lint-cache"
_FORMAT = "v2"  # v1 entries carried no signature
_SECRET = "key"
_MAX_ENTRY = 16 * 1024 * 1024  # a file's diagnostics take kilobytes; a bigger entry is not ours
_GIT_TIMEOUT = 30  # seconds
_GIT_ENV = {**os.environ, "LC_ALL": "C"}  # git's messages in English: "not a git repository" is read
# Never block on a FIFO or follow a link put in an entry's place.
_OPEN_QUIETLY = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Cache:
    """Diagnostics of linted files, stored under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._prepared = False
        self._trusted: bool | None = None  # decided at first use, once per run
        self._secret: bytes | None = None

    def key(
        self, data: bytes, display: str, rules: Sequence[type[Rule]], reachable: Sequence[tuple[Path, bytes]] = ()
    ) -> str:
        import hashlib  # hashing and signing load with the first lookup: a run that looks nothing up skips them
        import json

        digest = hashlib.sha256(linter_fingerprint().encode())
        digest.update(json.dumps([display, [rule.code for rule in rules]]).encode())
        digest.update(data)
        for path, text in reachable:
            digest.update(json.dumps(str(path)).encode())
            digest.update(hashlib.sha256(text).digest())
        return digest.hexdigest()

    def load(self, key: str) -> list[Diagnostic] | None:
        import hmac
        import json

        if not self._usable():
            return None
        secret = self._secret or _read_secret(self.directory / _SECRET)
        if secret is None:
            return None
        self._secret = secret
        try:
            signature, _, payload = _read_regular(self._entry(key)).partition(b"\n")
            if not hmac.compare_digest(signature, _sign(secret, key, payload)):
                return None
            return _decode_entry(json.loads(payload))
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None  # missing, or not an entry this cache wrote: computed again and overwritten

    def store(self, key: str, diagnostics: list[Diagnostic]) -> None:
        import json

        path = self._entry(key)
        try:
            if not self._usable():
                return
            self._prepare()
            payload = json.dumps([encode(diagnostic) for diagnostic in diagnostics]).encode()
            path.parent.mkdir(exist_ok=True)
            _write_atomically(path, _sign(self._secret, key, payload) + b"\n" + payload)
        except OSError:
            pass  # a read-only or full disk costs the speed-up, never the result

    def _entry(self, key: str) -> Path:
        return self.directory / _FORMAT / key[:2] / f"{key}.json"

    def _usable(self) -> bool:
        if self._trusted is None:
            reason = _tracked_by_git(self.directory)
            if reason:
                print(f"warning: the cache in {self.directory} is not used: {reason}", file=sys.stderr)
            self._trusted = reason is None
        return self._trusted

    def _prepare(self) -> None:
        """Create the directory, marked so that git and backup tools leave it alone, and its secret."""
        if self._prepared:
            return
        (self.directory / _FORMAT).mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")):
            with contextlib.suppress(FileExistsError):
                _create(self.directory / name, text.encode())
        self._secret = _read_secret(self.directory / _SECRET) or _make_secret(self.directory / _SECRET)
        self._prepared = True


def is_cache(directory: Path) -> bool:
    """Does ``directory`` look like a cache this linter made (its ``CACHEDIR.TAG``, no link)?"""
    return not directory.is_symlink() and (directory / "CACHEDIR.TAG").is_file() and directory.is_dir()


def remove_cache(directory: Path) -> None:
    """``fsdp2-lint clean``: delete a cache directory (see :func:`is_cache`); OSError when it cannot."""
    import shutil

    shutil.rmtree(directory)


def _sign(secret: bytes, key: str, payload: bytes) -> bytes:
    import hashlib
    import hmac

    return hmac.new(secret, key.encode() + b"\n" + payload, hashlib.sha256).hexdigest().encode()


def _decode_entry(data: object) -> list[Diagnostic]:
    return [decode(Diagnostic, item) for item in _list(data)]


def _read_regular(path: Path, limit: int = _MAX_ENTRY) -> bytes:
    """The contents of a regular file of at most ``limit`` bytes; OSError for anything else."""
    descriptor = os.open(path, _OPEN_QUIETLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as stream:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            raise OSError(f"{path} is not a cache file")
        return stream.read(limit + 1)


def _read_secret(path: Path) -> bytes | None:
    try:
        secret = bytes.fromhex(_read_regular(path, 64).decode("ascii"))
    except (OSError, ValueError):
        return None
    return secret if len(secret) == 32 else None


def _make_secret(path: Path) -> bytes:
    """A new secret, unless a concurrent run made one first (then that one)."""
    import secrets  # what only writing needs is imported by what writes: a run that stores nothing skips it

    candidate = _write_temporary(path.parent, secrets.token_hex(32).encode())
    try:
        os.link(candidate, path)
    except FileExistsError:
        if _read_secret(path) is None:  # not a secret: replaced
            os.replace(candidate, path)
    except OSError:  # a file system without hard links
        os.replace(candidate, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(candidate)
    secret = _read_secret(path)
    if secret is None:
        raise OSError(f"cannot create the cache's secret {path}")
    return secret


def _create(path: Path, data: bytes) -> None:
    """A new file (never through a link that stands in its place)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)


def _write_temporary(folder: Path, data: bytes) -> str:
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")  # mode 0600: the secret stays private
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = _write_temporary(path.parent, data)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _tracked_by_git(directory: Path) -> str | None:
    """Why the cache may have come with the checked-out tree, or None: git tracks files in it (or
    cannot say whether it does)."""
    import subprocess

    directory = Path(os.path.abspath(directory))  # `..` and `.` removed, links kept: git sees a tracked link
    if not os.path.lexists(directory) or not _in_git_work_tree(directory.parent):
        return None  # nothing to trust yet, or no git to ask
    command = ["git", "--literal-pathspecs", "-c", "core.fsmonitor=false", "ls-files", "-z", "--", directory.name]
    try:
        listed = subprocess.run(
            command, cwd=directory.parent, capture_output=True, timeout=_GIT_TIMEOUT, check=True, env=_GIT_ENV
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        if _not_a_repository(error):  # a `.git` git does not recognise: no checkout brought the cache
            return None
        return f"cannot tell whether git tracks it ({_git_error(error)})"
    if not listed:
        return None
    count = listed.count(b"\0")
    return (
        f"git tracks {count} file{'' if count == 1 else 's'} in it, so it came with the checked-out tree "
        f"and could hide findings (untrack it: git rm -r --cached {directory})"
    )


def _in_git_work_tree(folder: Path) -> bool:
    """Whether ``folder`` or one above it holds ``.git`` (or the environment names a repository)."""
    return "GIT_DIR" in os.environ or any(os.path.lexists(path / ".git") for path in (folder, *folder.parents))


def _not_a_repository(error: BaseException) -> bool:
    import subprocess

    return isinstance(error, subprocess.CalledProcessError) and b"not a git repository" in error.stderr


def _git_error(error: BaseException) -> str:
    import subprocess

    if isinstance(error, subprocess.CalledProcessError):
        lines = error.stderr.decode(errors="replace").strip().splitlines()
        return lines[0] if lines else f"git exited with status {error.returncode}"
    if isinstance(error, subprocess.TimeoutExpired):
        return f"git ls-files took over {_GIT_TIMEOUT} s"
    return str(error)


@cache
def linter_fingerprint() -> str:
    """The tool version, the Python version and a hash of the linter's own source (rules included)."""
    import fsdp2_lint.rules as rules

    folders = [Path(fsdp2_lint.__path__[0]), Path(rules.__path__[0])]
    return sources_fingerprint(f"{__version__} {sys.version_info[:2]}", folders)


def sources_fingerprint(version: str, folders: Sequence[Path]) -> str:
    """A hash of ``version`` and of every Python file under ``folders`` (names and contents)."""
    import hashlib

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
        if set(data) != {field.name for field in dataclasses.fields(kind)}:
            raise TypeError(f"expected exactly the fields of {kind.__name__}")
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
