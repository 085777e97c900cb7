"""Writing a fixed file in place: atomically, keeping everything about the file but its text, or
not at all.

The fixed bytes go to a temporary file next to the file (``.NAME.XXXXXXXX.fsdp2-lint``), which
is renamed over it. Renaming replaces the file's inode, so the temporary file first gets the
file's owner, group and permission bits; a file whose owner has no write permission (read-only,
whatever this process's privileges: root may write anything), a file with other names (hard
links would keep the old text) and a file whose owner cannot be kept are left as they are.

The writer holds an exclusive ``flock`` on its temporary file from creation to rename. A run
killed in between leaves the file behind, unlocked (the kernel drops a dead process's locks):
:func:`remove_stale_temporaries` deletes the files of our naming pattern that it can lock, and
never a live writer's, which it cannot.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fsdp2_lint.sources import read_source

try:
    import fcntl
except ImportError:  # Windows: an open file cannot be deleted, so a live one survives the sweep
    fcntl = None

SUFFIX = ".fsdp2-lint"
# tempfile.mkstemp's names: a prefix (here ".NAME."), 8 characters of its alphabet, the suffix.
_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}" + re.escape(SUFFIX))
_OPEN_QUIETLY = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class NotWritten(Exception):
    """Why the fixed file was left as it is: a one-line message for the user."""


def write_fixed(path: Path, original: bytes, fixed: bytes) -> None:
    """Replace the file (through a symbolic link, the file it names) with ``fixed``, atomically,
    keeping its owner, group and permissions. Raises :class:`NotWritten`, writing nothing, when the
    file is read-only, has hard links, cannot keep its owner, or no longer holds ``original``
    (changed on disk since it was read); ``OSError`` when writing fails."""
    target = Path(os.path.realpath(path))
    status = target.stat()
    _check_replaceable(status)
    if read_source(target) != original:
        raise NotWritten(_CHANGED)
    with _locked_temporary(target) as (descriptor, temporary):
        with open(descriptor, "wb", closefd=False) as stream:
            stream.write(fixed)
        os.fsync(descriptor)
        _keep_owner(descriptor, status)
        os.fchmod(descriptor, stat.S_IMODE(status.st_mode))  # after fchown, which clears set-id bits
        if read_source(target) != original:
            raise NotWritten(_CHANGED)
        os.replace(temporary, target)


_CHANGED = "the file changed on disk while it was being fixed; it was left as it is"


def _check_replaceable(status: os.stat_result) -> None:
    if not status.st_mode & stat.S_IWUSR:
        raise NotWritten("the file is read-only; it was left as it is")
    if status.st_nlink > 1:
        raise NotWritten(
            f"the file has {status.st_nlink} names (hard links), and the others would keep the old text; "
            "it was left as it is"
        )


def _keep_owner(descriptor: int, status: os.stat_result) -> None:
    created = os.fstat(descriptor)
    if (created.st_uid, created.st_gid) == (status.st_uid, status.st_gid):
        return
    try:
        os.fchown(descriptor, status.st_uid, status.st_gid)
    except PermissionError:
        raise NotWritten("its owner and group cannot be kept by this user; it was left as it is") from None


@contextlib.contextmanager
def _locked_temporary(target: Path) -> Iterator[tuple[int, str]]:
    """A new temporary file next to ``target``, locked while in use, removed unless renamed."""
    descriptor, temporary = _create_locked(target)
    try:
        yield descriptor, temporary
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    finally:
        os.close(descriptor)


def _create_locked(target: Path) -> tuple[int, str]:
    while True:
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=SUFFIX)
        if fcntl is None:
            return descriptor, temporary
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError:  # a file system without locks: no sweep can lock it either
            return descriptor, temporary
        if _names(temporary, descriptor):
            return descriptor, temporary
        os.close(descriptor)  # a sweep took it for a dead run's before the lock: take another


def _names(path: str, descriptor: int) -> bool:
    """Whether ``path`` still names the file open as ``descriptor``."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (found.st_dev, found.st_ino) == (opened.st_dev, opened.st_ino)


def remove_stale_temporaries(folder: Path) -> None:
    """Delete the temporary files that runs killed while writing left in ``folder``: regular
    files named as :func:`write_fixed` names them, that no live writer holds locked."""
    try:
        names = [entry.name for entry in os.scandir(folder) if _TEMPORARY.fullmatch(entry.name)]
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):  # gone, not ours to open, or in use
            _remove_if_stale(os.path.join(folder, name))


def _remove_if_stale(path: str) -> None:
    if fcntl is None:
        os.unlink(path)  # fails while the writer has it open
        return
    descriptor = os.open(path, _OPEN_QUIETLY)  # a FIFO or a link in its place is not opened as one
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while a writer lives
        if _names(path, descriptor):
            os.unlink(path)
    finally:
        os.close(descriptor)
