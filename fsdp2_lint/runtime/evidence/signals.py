"""How the harness stops a rank it gives up on: first a stack dump, then a kill (torch-free)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

# Each rank registers faulthandler for this signal, so it writes every thread's Python stack to
# its stack file even while blocked inside a C++ collective.
STACK_DUMP_SIGNAL = signal.SIGUSR2
STACK_GRACE_SECONDS = 0.5  # time given to the dumps before the kill


def dump_stacks(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, STACK_DUMP_SIGNAL)
        except ProcessLookupError:
            pass
