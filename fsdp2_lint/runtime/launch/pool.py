"""Pooled mode, harness side: N rank servers import torch once; each run is a forked child per rank
(torch-free here; see :mod:`fsdp2_lint.runtime.rank.server` for the other side and the protocol).

Every run gets its own rendezvous (a fresh ``MASTER_PORT``, its own TCPStore hosted by its rank 0),
its own run directory and its own process group per rank, so a crash or hang in one run is that
run's evidence only. The pool, like torchrun, stops the remaining ranks shortly after one rank
fails, and stops all of a run's ranks when its timeout expires (after a stack dump).

The servers are started directly rather than under torchrun: a run needs none of torchrun's
services (each child gets the same environment variables torchrun would set), and torchrun's
agent would be a third process importing torch on a 2-core runner.
"""

from __future__ import annotations

import collections
import json
import os
import re
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.device import Device, choose_device
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec, collect, tail_lines
from fsdp2_lint.runtime.launch.launcher import HarnessError, default_jobs
from fsdp2_lint.runtime.launch.processes import python_module
from fsdp2_lint.runtime.launch.stall import STALL_POLL_SECONDS, StallWatch

STARTUP_TIMEOUT_SECONDS = 180.0  # importing torch on a loaded 2-core runner
PEER_FAILURE_GRACE_SECONDS = 2.0  # time other ranks get to fail on their own before being stopped
MAX_IDLE_RUNS = 8  # runs expected to hang wait idle, so they do not count against --jobs
ADDRESS_IN_USE = re.compile(r"EADDRINUSE|[Aa]ddress already in use")


@dataclass
class _Server:
    rank: int
    process: subprocess.Popen
    control: socket.socket
    log: Path
    buffer: bytes = b""

    def send(self, message: dict[str, Any]) -> None:
        self.control.sendall((json.dumps(message) + "\n").encode())

    def messages(self) -> list[dict[str, Any]]:
        data = self.control.recv(1 << 16)
        if not data:
            raise HarnessError(f"rank server {self.rank} exited unexpectedly:\n{tail_lines(self.log, 20)}")
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        return [json.loads(line) for line in lines]


@dataclass
class _Run:
    job: str
    spec: RunSpec
    port: int
    started: float
    watch: StallWatch
    returncodes: dict[int, int] = field(default_factory=dict)
    failed_at: float | None = None
    timed_out: tuple[int, ...] = ()
    stalled_for: float | None = None
    stopped: tuple[int, ...] = ()
    stopping: bool = False


class RankPool:
    """A :class:`~fsdp2_lint.runtime.launch.launcher.Launcher`; :meth:`run_all` yields records as runs finish."""

    def __init__(self, nproc: int, device_request: str, log_dir: Path, jobs: int | None = None) -> None:
        self.nproc = nproc
        self.device_request = device_request
        self.log_dir = log_dir
        self.servers: list[_Server] = []
        self._requested_jobs = jobs
        self._visible_gpus = 0
        self._device: Device | None = None  # known once the servers are up
        self._ports: set[int] = set()
        self._retried: set[RunSpec] = set()  # runs already re-run once after losing the port race
        self._launched = 0

    def __enter__(self) -> RankPool:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # as torchrun does
        for rank in range(self.nproc):
            ours, theirs = socket.socketpair()
            log = self.log_dir / f"server-rank{rank}.log"
            with open(log, "wb") as out:
                process = subprocess.Popen(
                    [*python_module("fsdp2_lint.runtime.rank.server"),
                     "--control-fd", str(theirs.fileno()), "--rank", str(rank)],
                    pass_fds=[theirs.fileno()], stdout=out, stderr=subprocess.STDOUT, env=env,
                )  # fmt: skip
            theirs.close()
            self.servers.append(_Server(rank, process, ours, log))
        hellos = self._read_hellos()
        errors = [f"rank {hello['rank']}: {hello['error']}" for hello in hellos if "error" in hello]
        if errors:
            raise HarnessError("rank servers could not start:\n" + "\n".join(errors))
        self._visible_gpus = hellos[0]["gpus"]
        self._device = choose_device(self.device_request, self.nproc, self._visible_gpus)

    @property
    def device(self) -> Device | None:
        return self._device

    @property
    def jobs(self) -> int:
        return self._requested_jobs or default_jobs(
            self.nproc, self._device.kind if self._device else self.device_request
        )

    def visible_gpus(self) -> int:
        return self._visible_gpus

    def _read_hellos(self) -> list[dict[str, Any]]:
        hellos: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while len(hellos) < self.nproc:
            waiting = [server for server in self.servers if server.rank not in hellos]
            ready, _, _ = select.select([s.control for s in waiting], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise HarnessError(f"rank servers did not start within {STARTUP_TIMEOUT_SECONDS:g}s")
            for server in waiting:
                if server.control in ready:
                    for message in server.messages():
                        hellos[server.rank] = message
        return [hellos[rank] for rank in range(self.nproc)]

    def close(self) -> None:
        for server in self.servers:
            try:
                server.send({"op": "shutdown"})
            except OSError:
                pass
        for server in self.servers:
            try:
                server.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
            server.control.close()
        self.servers = []

    # running ------------------------------------------------------------------------------------

    def run_all(self, specs: Iterable[RunSpec]) -> Iterator[RunRecord]:
        # Runs expected to hang start first so their timeouts overlap the rest of the work.
        idle = collections.deque(spec for spec in specs if spec.expect_hang)
        busy = collections.deque(spec for spec in specs if not spec.expect_hang)
        running: dict[str, _Run] = {}
        while idle or busy or running:
            self._start_ready(idle, busy, running)
            self._wait_for_messages(running)
            now = time.monotonic()
            for run in list(running.values()):
                if len(run.returncodes) == self.nproc:
                    del running[run.job]
                    record = self._record(run, now)
                    if run.spec not in self._retried and _lost_port_race(record):
                        self._retried.add(run.spec)
                        shutil.rmtree(run.spec.run_dir, ignore_errors=True)
                        busy.appendleft(run.spec)
                        continue
                    yield record
                elif not run.stopping:
                    self._stop_if_due(run, now)

    def _start_ready(self, idle: collections.deque, busy: collections.deque, running: dict[str, _Run]) -> None:
        idle_running = sum(run.spec.expect_hang for run in running.values())
        while idle and idle_running < MAX_IDLE_RUNS:
            self._launch(idle.popleft(), running)
            idle_running += 1
        while busy and len(running) - idle_running < self.jobs:
            self._launch(busy.popleft(), running)

    def _launch(self, spec: RunSpec, running: dict[str, _Run]) -> None:
        assert self._device is not None
        self._launched += 1
        job = f"run{self._launched}"
        port = self._free_port()
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        cwd = spec.cwd or events.output_dir(spec.run_dir)
        cwd.mkdir(parents=True, exist_ok=True)
        running[job] = _Run(job, spec, port, time.monotonic(), StallWatch(spec.run_dir, spec.scope()))
        for server in self.servers:
            server.send(
                {
                    "op": "run",
                    "job": job,
                    "script": str(spec.script.resolve()),
                    "argv": list(spec.argv),
                    "run_dir": str(spec.run_dir.resolve()),
                    "cwd": str(cwd.resolve()),
                    "env": _rank_env(server.rank, self.nproc, port, job),
                    "device": {"kind": self._device.kind, "backend": self._device.backend},
                    "world_size": self.nproc,
                    "trace_lines": spec.trace_lines,
                    **_project_fields(spec),
                }
            )

    def _wait_for_messages(self, running: dict[str, _Run]) -> None:
        if not running:
            return
        ready, _, _ = select.select([s.control for s in self.servers], [], [], self._seconds_to_next_decision(running))
        now = time.monotonic()
        for server in self.servers:
            if server.control not in ready:
                continue
            for message in server.messages():
                run = running.get(message["job"])
                if run is None or message["op"] != "done":
                    continue
                run.returncodes[message["rank"]] = message["returncode"]
                if message["returncode"] != 0 and run.failed_at is None:
                    run.failed_at = now

    def _seconds_to_next_decision(self, running: dict[str, _Run]) -> float:
        now = time.monotonic()
        due = [run.started + run.spec.timeout for run in running.values() if not run.stopping]
        due += [
            run.failed_at + PEER_FAILURE_GRACE_SECONDS
            for run in running.values()
            if run.failed_at is not None and not run.stopping
        ]
        due += [now + STALL_POLL_SECONDS for run in running.values() if not run.stopping]
        return max(0.0, min(due, default=now + 1.0) - now)

    def _stop_if_due(self, run: _Run, now: float) -> None:
        unfinished = tuple(rank for rank in range(self.nproc) if rank not in run.returncodes)
        if now >= run.started + run.spec.timeout:
            run.timed_out = unfinished
        elif run.failed_at is not None and now >= run.failed_at + PEER_FAILURE_GRACE_SECONDS:
            run.stopped = unfinished
        elif run.failed_at is None and run.watch.stalled(now, unfinished):
            run.timed_out, run.stalled_for = unfinished, run.watch.quiet_seconds
        else:
            return
        run.stopping = True
        for rank in unfinished:
            self.servers[rank].send({"op": "stop", "job": run.job})

    def _record(self, run: _Run, now: float) -> RunRecord:
        assert self._device is not None
        return collect(
            run.spec,
            self.nproc,
            self._device,
            now - run.started,
            dict(run.returncodes),
            run.timed_out,
            run.stopped,
            run.stalled_for,
        )

    def _free_port(self) -> int:
        """A port no earlier run of this pool used; the kernel just had it free."""
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            if port not in self._ports:
                self._ports.add(port)
                return port


def _project_fields(spec: RunSpec) -> dict[str, str]:
    """What a run of a project adds to its job (see :func:`fsdp2_lint.runtime.rank.script.run_script`)."""
    fields = {"module": spec.module, "import_root": spec.import_root, "project": spec.project}
    return {key: str(value.resolve()) if isinstance(value, Path) else value for key, value in fields.items() if value}


def _rank_env(rank: int, nproc: int, port: int, job: str) -> dict[str, str]:
    """What torchrun --standalone would give this rank, with a rendezvous of the run's own."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(nproc),
        "ROLE_NAME": "default",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": job,
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "False",  # rank 0 hosts this run's TCPStore
    }


def _lost_port_race(record: RunRecord) -> bool:
    """Another process took the run's MASTER_PORT between our check and rank 0's bind."""
    return any(ADDRESS_IN_USE.search(event["message"]) for _, event in record.of_kind(events.EXCEPTION))
