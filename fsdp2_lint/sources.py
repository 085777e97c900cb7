"""Reading a file to lint. Between finding a file and reading it, anything can take its place: a
FIFO (a blocking read waits forever for a writer), a device (``/dev/zero`` never ends), a socket.
So a file is opened without blocking and read only when the open file is a regular one.

:data:`DEFAULT_MAX_FILE_SIZE` is the default of ``max-file-size`` (``--max-file-size``): the
engine parses no file larger than that (1 MiB; 0 means no limit). A notebook (:func:`is_notebook`) is
read as its code cells (:mod:`fsdp2_lint.notebooks`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

DEFAULT_MAX_FILE_SIZE = 1024 * 1024  # about 750 MB of syntax tree and 15 s of parsing; 0: no limit
_OPEN_WITHOUT_BLOCKING = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
NOTEBOOK_SUFFIX = ".ipynb"


def is_notebook(name: str) -> bool:
    return name.lower().endswith(NOTEBOOK_SUFFIX)


def read_source(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (links followed); OSError otherwise, its
    ``strerror`` a reason a person can read (``a named pipe (FIFO), not a regular file``)."""
    descriptor = os.open(path, _OPEN_WITHOUT_BLOCKING)
    with os.fdopen(descriptor, "rb") as stream:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{file_kind(mode)}, not a regular file", str(path))
        return stream.read()


def file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def reason(error: OSError) -> str:
    """Why a file could not be read, as a person reads it (``Permission denied``)."""
    return error.strerror or str(error)
