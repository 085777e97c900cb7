"""Pool server of one rank: imports torch once, then forks one child per run (imports torch).

``python -m fsdp2_lint.runtime.rank.server --control-fd FD --rank R`` is started by
:class:`fsdp2_lint.runtime.launch.pool.RankPool`, which talks to it in JSON lines over the socket FD:

- server → harness: ``{"op": "hello", "rank", "gpus", "torch"}`` or ``{"op": "hello", "error"}``;
  ``{"op": "done", "job", "rank", "returncode"}`` when a run's child has exited;
- harness → server: ``{"op": "run", "job", "script", "argv", "run_dir", "cwd", "env", "device",
  "world_size", "trace_lines"}`` and, for a project, ``"module"``, ``"import_root"``, ``"project"``; ``{"op": "stop", "job"}`` (dump the child's stacks, kill it shortly after);
  ``{"op": "shutdown"}``.

Fork safety: the server is single-threaded, never initialises a process group or CUDA and runs
no tensor op, so each child starts from a clean torch (the GPU count is taken in a throwaway
child).

Each run's child is a keeper (see :mod:`fsdp2_lint.runtime.launch.processes`) that forks the rank itself: it passes the
harness's stack-dump request on to the rank, kills it on SIGTERM (a stop, the server's end), then
kills whatever the rank left running, and ends as the rank did. Keeper and rank leave the
harness's process group. A Ctrl-C or hang-up of the harness's terminal reaches the harness and
the servers: the servers ignore it, and the harness shuts them down (as it does when it ends any
other way; its end closes their control sockets), so that no signal cuts a server's own
bookkeeping short.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from fsdp2_lint.lifetime import become_subreaper, die_with_parent
from fsdp2_lint.runtime.evidence.device import Device
from fsdp2_lint.runtime.evidence.signals import STACK_DUMP_SIGNAL, STACK_GRACE_SECONDS
from fsdp2_lint.runtime.launch.processes import EX_SOFTWARE, exit_like, kill_orphans

POLL_SECONDS = 0.02
# Ranks other than 0 wait, ready to run, until rank 0's TCPStore listens on MASTER_PORT: one that
# connects earlier is refused and retries only after a back-off of about half a second (measured:
# a quarter to a half of all runs paid it when every rank started at once).
STORE_WAIT_SECONDS = 1.0  # then start anyway (a script may never open a store on MASTER_PORT)
STORE_POLL_SECONDS = 0.002
LISTEN_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
TCP_LISTEN = "0A"
# Imported before any fork: what FSDP2 scripts import anyway, plus what torch imports lazily on
# the first fully_shard and optimizer step (torch._dynamo: ~2 s per run if left to each child).
WARM_IMPORTS = (
    "torch",
    "torch.nn",
    "torch.optim",
    "torch.distributed",
    "torch.distributed.fsdp",
    "torch.distributed._composable.fsdp",
    "torch.distributed.tensor",
    "torch.distributed.device_mesh",
    "torch.distributed.checkpoint",
    "torch.distributed.checkpoint.state_dict",
    "torch._dynamo",
    "fsdp2_lint.runtime.rank.script",
)
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGHUP)
KEEPER_STOP_SIGNALS = (signal.SIGTERM, *TERMINAL_SIGNALS)


def main(argv: list[str] | None = None) -> int:
    for signum in TERMINAL_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m fsdp2_lint.runtime.rank.server")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--rank", type=int, required=True)
    options = parser.parse_args(argv)
    control = socket.socket(fileno=options.control_fd)
    try:
        for name in WARM_IMPORTS:
            importlib.import_module(name)
        hello = {"op": "hello", "rank": options.rank, **_readiness()}
    except Exception as error:
        hello = {"op": "hello", "rank": options.rank, "error": f"{type(error).__name__}: {error}"}
    _send(control, hello)
    if "error" in hello:
        return 1
    RankServer(control, options.rank).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing left to clean up; tearing down torch's interpreter state takes seconds


def _readiness() -> dict[str, Any]:
    import torch

    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    if threads > 1 or torch.cuda.is_initialized():
        raise RuntimeError(
            f"unsafe to fork after importing torch ({threads} threads, CUDA initialised: "
            f"{torch.cuda.is_initialized()}); use --launcher torchrun"
        )
    return {"gpus": _count_gpus_in_child(), "torch": torch.__version__}


def _count_gpus_in_child() -> int:
    """torch.cuda.device_count() may initialise CUDA, after which forked children cannot use it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        count = 0
        try:
            import torch

            count = torch.cuda.device_count()
        finally:
            os.write(write_end, str(count).encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        answer = reader.read()
    os.waitpid(pid, 0)
    return int(answer or 0)


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    control.sendall((json.dumps(message) + "\n").encode())


class RankServer:
    def __init__(self, control: socket.socket, rank: int) -> None:
        self.control = control
        self.rank = rank
        self.job_of: dict[int, str] = {}  # keeper pid -> job
        self.pid_of: dict[str, int] = {}  # job -> keeper pid
        self.kill_at: dict[int, float] = {}  # keeper pid -> when to have it kill its run

    def serve(self) -> None:
        buffer = b""
        try:
            while True:
                timeout = POLL_SECONDS if self.job_of else None
                if select.select([self.control], [], [], timeout)[0]:
                    data = self.control.recv(1 << 16)
                    if not data:
                        return  # the harness is gone
                    *lines, buffer = (buffer + data).split(b"\n")
                    for line in lines:
                        if not self.handle(json.loads(line)):
                            return
                self.reap()
                self.kill_due()
        finally:
            for pid in self.job_of:
                os.kill(pid, signal.SIGTERM)  # not reaped yet, so the pid is still this keeper's
            self.reap(block=True)

    def handle(self, message: dict[str, Any]) -> bool:
        if message["op"] == "run":
            self.start(message)
        elif message["op"] == "stop":
            self.stop(message["job"])
        elif message["op"] == "shutdown":
            return False
        return True

    def start(self, job: dict[str, Any]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            _keep_run(job, self.rank, self.control.fileno(), server)
        self.job_of[pid] = job["job"]
        self.pid_of[job["job"]] = pid

    def stop(self, job: str) -> None:
        pid = self.pid_of.get(job)
        if pid in self.job_of and pid not in self.kill_at:
            os.kill(pid, STACK_DUMP_SIGNAL)
            self.kill_at[pid] = time.monotonic() + STACK_GRACE_SECONDS

    def kill_due(self) -> None:
        now = time.monotonic()
        for pid, when in list(self.kill_at.items()):
            if now >= when:
                os.kill(pid, signal.SIGTERM)
                del self.kill_at[pid]

    def reap(self, block: bool = False) -> None:
        while self.job_of:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = self.job_of.pop(pid, None)
            if job is None:
                continue
            self.kill_at.pop(pid, None)
            del self.pid_of[job]
            returncode = os.waitstatus_to_exitcode(status)
            if not block:
                _send(self.control, {"op": "done", "job": job, "rank": self.rank, "returncode": returncode})


def _keep_run(job: dict[str, Any], rank: int, control_fd: int, server: int) -> NoReturn:
    """The forked keeper of one run on this rank (see the module docstring)."""
    returncode = EX_SOFTWARE
    try:
        os.close(control_fd)
        os.setpgid(0, 0)
        keeper = _RankKeeper()
        for signum in KEEPER_STOP_SIGNALS:
            signal.signal(signum, keeper.kill)
        signal.signal(STACK_DUMP_SIGNAL, keeper.dump_stacks)
        die_with_parent(signal.SIGTERM, server)
        become_subreaper()
        keeper_pid = os.getpid()
        returncode = keeper.run(lambda: _child(job, rank, keeper_pid))
    except BaseException:
        traceback.print_exc()
    finally:
        kill_orphans()  # the rank too, when the keeper failed before it ended
        sys.stdout.flush()
        sys.stderr.flush()
        exit_like(returncode)


class _RankKeeper:
    def __init__(self) -> None:
        self.rank_pid = 0  # while it runs
        self.kill_requested = False

    def run(self, child: Callable[[], NoReturn]) -> int:
        """Fork the rank, wait for it, and return its exit status (negative: the signal that killed it)."""
        pid = os.fork()
        if pid == 0:
            child()
        self.rank_pid = pid
        if self.kill_requested:  # the stop came while the rank was being forked
            self.kill()
        _, status = os.waitpid(pid, 0)
        self.rank_pid = 0
        return os.waitstatus_to_exitcode(status)

    def dump_stacks(self, signum: int = 0, frame: object = None) -> None:
        if self.rank_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.rank_pid, STACK_DUMP_SIGNAL)

    def kill(self, signum: int = 0, frame: object = None) -> None:
        self.kill_requested = True
        if self.rank_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.rank_pid, signal.SIGKILL)


def _as_a_script_starts() -> None:
    """The signal dispositions ``python script.py`` starts with, not the server's or the keeper's."""
    for signum in (signal.SIGTERM, signal.SIGHUP, STACK_DUMP_SIGNAL):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _child(job: dict[str, Any], rank: int, keeper: int) -> NoReturn:
    code = EX_SOFTWARE  # the harness failed before the script could run
    try:
        _as_a_script_starts()
        die_with_parent(signal.SIGKILL, keeper)
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        if rank != 0:
            _wait_for_store(int(job["env"]["MASTER_PORT"]))
        from fsdp2_lint.runtime.rank.script import run_script  # imported by the server already

        code = run_script(
            Path(job["script"]),
            job["argv"],
            Path(job["run_dir"]),
            rank,
            job["world_size"],
            Device(**job["device"]),
            trace_lines=job["trace_lines"],
            module=job.get("module"),
            import_root=Path(job["import_root"]) if "import_root" in job else None,
            project=Path(job["project"]) if "project" in job else None,
        )
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _wait_for_store(port: int) -> None:
    deadline = time.monotonic() + STORE_WAIT_SECONDS
    while not _listening(port) and time.monotonic() < deadline:
        time.sleep(STORE_POLL_SECONDS)


def _listening(port: int) -> bool:
    """A socket listens on ``port`` (the kernel's TCP tables); True where they cannot be read."""
    suffix = f":{port:04X}"
    try:
        tables = [open(path).read() for path in LISTEN_TABLES if os.path.exists(path)]
    except OSError:
        return True
    for table in tables:
        for row in table.splitlines()[1:]:
            fields = row.split()
            if len(fields) > 3 and fields[1].endswith(suffix) and fields[3] == TCP_LISTEN:
                return True
    return not tables


if __name__ == "__main__":
    sys.exit(main())
