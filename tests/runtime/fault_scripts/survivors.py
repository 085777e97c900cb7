"""Processes a training script leaves behind, for the harness's cleanup tests.

Every process started here records ``PID STARTTIME`` (a reused pid has another start time) in the
file named by ``FAULT_PIDS``, ignores SIGTERM, SIGHUP and SIGINT (only SIGKILL stops it) and blocks
forever: a forked child, a ``Popen``ed interpreter, and a double-forked daemon in a session of its
own. When all of them have recorded themselves, the rank records itself and, when ``FAULT_READY``
names a FIFO, writes one line to it (the test's "every rank is ready" event).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

IGNORED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def record_self() -> None:
    with open("/proc/self/stat", encoding="ascii") as stat:
        start_time = stat.read().rpartition(")")[2].split()[19]
    descriptor = os.open(os.environ["FAULT_PIDS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(descriptor, f"{os.getpid()} {start_time}\n".encode())
    os.close(descriptor)


def ignore_termination() -> None:
    for number in IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_IGN)


def survive(ready_fd: int) -> None:
    """Record this process, tell the rank, then block until SIGKILL."""
    ignore_termination()
    record_self()
    os.write(ready_fd, b".")
    os.close(ready_fd)
    while True:
        signal.pause()


def spawn_survivors() -> None:
    """Start the three survivors and wait until each has recorded itself."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        survive(write_end)
    subprocess.Popen([sys.executable, __file__, str(write_end)], pass_fds=[write_end])
    intermediate = os.fork()
    if intermediate == 0:
        os.setsid()
        if os.fork() == 0:
            survive(write_end)
        os._exit(0)
    os.waitpid(intermediate, 0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read(3) == b"...", "a survivor did not start"


def rank_ready() -> None:
    record_self()
    if os.environ.get("FAULT_READY"):
        with open(os.environ["FAULT_READY"], "w") as fifo:
            fifo.write(f"{os.environ.get('RANK')}\n")


if __name__ == "__main__":  # the Popen'ed survivor
    survive(int(sys.argv[1]))
