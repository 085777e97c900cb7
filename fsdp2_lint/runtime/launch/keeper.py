"""``python -m fsdp2_lint.runtime.launch.keeper --parent PID --grace SECONDS -- COMMAND...``: runs COMMAND
(a torchrun launch) so that nothing it starts outlives it (torch-free).

torchrun starts every rank in a session of its own and the ranks may start processes of their own,
so no signal to torchrun's process group reaches them all. The keeper is a child subreaper (see
:mod:`.processes`): once COMMAND has ended, every process left from its tree is the keeper's child,
and it kills them all. SIGTERM to the keeper (the harness stopping the run; also sent by the kernel
when the harness ends, however it ends) is passed on to COMMAND, which gets ``--grace`` seconds to
stop (torchrun stops its ranks and reports) before it is killed. The keeper exits as COMMAND did.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import NoReturn

from fsdp2_lint.lifetime import become_subreaper, die_with_parent
from fsdp2_lint.runtime.launch.processes import exit_like, kill_orphans


class Keeper:
    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.child: subprocess.Popen | None = None
        self.stop_requested = False
        self.stopping = False

    def run(self, command: Sequence[str]) -> NoReturn:
        self.child = subprocess.Popen(command)
        if self.stop_requested:  # SIGTERM came while the child was being started
            self.stop_child()
        returncode = self.child.wait()
        kill_orphans()
        exit_like(returncode)

    def request_stop(self, signum: int, frame: object) -> None:
        self.stop_requested = True
        if self.child is not None:
            self.stop_child()

    def stop_child(self) -> None:
        """SIGTERM now, SIGKILL after the grace period (SIGALRM)."""
        if self.stopping or self.child is None:
            return
        self.stopping = True
        self.child.send_signal(signal.SIGTERM)
        signal.setitimer(signal.ITIMER_REAL, self.grace)

    def kill_child(self, signum: int, frame: object) -> None:
        if self.child is not None:
            self.child.kill()


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m fsdp2_lint.runtime.launch.keeper")
    parser.add_argument("--parent", type=int, required=True, help="the harness: its end stops COMMAND")
    parser.add_argument("--grace", type=float, required=True, help="seconds COMMAND gets to stop on SIGTERM")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    keeper = Keeper(options.grace)
    signal.signal(signal.SIGTERM, keeper.request_stop)  # before the parent-death signal can come
    signal.signal(signal.SIGALRM, keeper.kill_child)
    die_with_parent(signal.SIGTERM, options.parent)
    become_subreaper()
    keeper.run(command)


if __name__ == "__main__":
    main(sys.argv[1:])
