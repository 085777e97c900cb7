"""Starting and ending the harness's processes (torch-free).

Two guarantees live here:

- **No code the user did not point at runs.** ``python -m X`` puts the current directory first on
  ``sys.path``, so an ``argparse.py`` (or ``torch.py``) there would run inside the rank servers,
  torchrun and every rank. :func:`python_module` is ``python -m`` without that entry (what ``-P``
  does on Python 3.11+, for 3.10 as well).
- **No process outlives its run.** A keeper process (:mod:`.keeper` above torchrun; a forked one
  above each pooled rank) is a Linux *child subreaper*: whatever the run's processes start and
  orphan (a double-forked daemon in a session of its own included) becomes its child, so once the
  run's main process has ended, :func:`kill_orphans` finds and kills every one of them. The keeper
  then ends as that main process did (:func:`exit_like`), so its parent sees the same status.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from typing import NoReturn

EX_SOFTWARE = 70  # the harness itself failed
# Prepended to every ``python -c`` the harness runs: drop the '' entry that -c puts first on
# sys.path (unless PYTHONSAFEPATH already left it out), before anything else is imported.
SAFE_PATH_PRELUDE = "import sys\nif not getattr(sys.flags, 'safe_path', False): del sys.path[0]\n"


def python_module(module: str) -> list[str]:
    """The command that runs ``python -m MODULE``, but without the current directory on sys.path."""
    run = f"import runpy\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    return [sys.executable, "-c", SAFE_PATH_PRELUDE + run]


def kill_orphans() -> None:
    """SIGKILL and reap this process's children until it has none: as a subreaper, every process
    its descendants left running becomes one of them (a killed child's children become the next)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue  # reaped one; look again
        for child in _children():
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(-1, 0)


def _children() -> list[int]:
    """This process's children, from ``/proc`` (zombies included)."""
    me = os.getpid()
    children = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # not Linux: not a subreaper either, so no child is left but those it started
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                parent = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == me:
            children.append(int(entry))
    return children


def exit_like(returncode: int) -> NoReturn:
    """End this process as a child that ended with ``returncode`` did (negative: killed by that
    signal), so that whoever waits for this process sees the same status."""
    if returncode >= 0:
        os._exit(returncode)
    signum = -returncode
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child dumped core already, if it was to
    if signum != signal.SIGKILL:
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached for a signal that ends processes, as this one did
