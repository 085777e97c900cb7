"""How long the processes fsdp2-lint starts may live (Linux; elsewhere these do nothing): a child
dies with the process that started it, and a subreaper adopts what its descendants orphan, so that
no process of a run outlives it however the run ends (a crash, SIGKILL, a cancelled CI job)."""

from __future__ import annotations

import os

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PARENT_GONE = 70  # EX_SOFTWARE: the process that needed this one is gone


def die_with_parent(signum: int, parent: int) -> None:
    """The kernel sends ``signum`` to this process when ``parent`` (the process that started it)
    ends. Exits at once if it already has."""
    _prctl(_PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:
        os._exit(_PARENT_GONE)


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children, instead of init's."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _prctl(option: int, value: int) -> bool:
    import ctypes  # in the processes that ask

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False
