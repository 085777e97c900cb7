"""Per-launch mode: one ``torchrun --standalone --nproc_per_node N`` per script (torch-free here).

Each launch pays torch's import on every rank; it is what ``confirm path/to/train.py`` uses and
the baseline the pooled mode is measured against. ``--standalone`` lets torchrun pick a free
rendezvous port itself, so concurrent launches cannot collide. torchrun runs under a
:mod:`.keeper`, which stops it and kills whatever its ranks left running once it has ended.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.device import CPU, CUDA, Device, choose_device
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec, collect, read_tail
from fsdp2_lint.runtime.evidence.signals import STACK_GRACE_SECONDS, dump_stacks
from fsdp2_lint.runtime.launch.launcher import default_jobs
from fsdp2_lint.runtime.launch.processes import python_module
from fsdp2_lint.runtime.launch.stall import STALL_POLL_SECONDS, StallWatch

TERMINATE_GRACE_SECONDS = 5.0  # torchrun's time to stop its ranks and report, once asked to stop
# torchrun's failure report: one block per rank that failed before torchrun stopped the others
# (ranks it stopped are not listed), "exitcode: -11" for one killed by SIGSEGV.
FAILED_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: \d+\)\n\s*exitcode\s*: (?P<code>-?\d+)", re.M)


class _Abandoned(Exception):
    """A launch not started because run_all was left (its caller stopped early or was interrupted)."""


class TorchrunLauncher:
    """A :class:`~fsdp2_lint.runtime.launch.launcher.Launcher`; :meth:`run_all` yields records in the
    order of the specs."""

    def __init__(self, nproc: int, device_request: str, jobs: int | None = None) -> None:
        self.nproc = nproc
        self.device_request = device_request  # resolved by each rank (rank.main), reported in its events
        self._requested_jobs = jobs
        self._visible_gpus: int | None = None
        self._launches: set[subprocess.Popen] = set()  # keepers of the launches running now
        self._stopping = False  # run_all was left early: start no more launches
        self._lock = threading.Lock()

    def __enter__(self) -> TorchrunLauncher:
        if self.device_request == "cuda":  # refuse before any launch rather than in every rank
            choose_device("cuda", self.nproc, self.visible_gpus())
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    @property
    def device(self) -> Device | None:
        return None  # each rank resolves --device itself

    @property
    def jobs(self) -> int:
        return self._requested_jobs or default_jobs(self.nproc, self.device_request)

    def visible_gpus(self) -> int:
        """Only needed to rule out fixtures that need GPUs; costs one torch import."""
        if self._visible_gpus is None:
            answer = subprocess.run(
                python_module("fsdp2_lint.runtime.rank.gpus"), capture_output=True, text=True, check=True
            )
            self._visible_gpus = int(answer.stdout.strip() or 0)
        return self._visible_gpus

    def run_all(self, specs: Iterable[RunSpec]) -> Iterator[RunRecord]:
        """Run the specs, ``jobs`` launches at a time; records come in the order of ``specs``."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(self.run, spec) for spec in specs]
            try:
                for future in futures:
                    yield future.result()
            finally:  # when the caller stops early (or is interrupted): drop the rest, stop those running
                for future in futures:
                    future.cancel()
                with self._lock:
                    self._stopping = True
                    for keeper in self._launches:
                        keeper.terminate()

    def run(self, spec: RunSpec) -> RunRecord:
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        cwd = spec.cwd or events.output_dir(spec.run_dir)
        cwd.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(spec.run_dir / "torchrun.log", "wb") as log:
            keeper = self._launch(spec, cwd, log)
            try:
                timed_out, stalled_for = self._wait(keeper, spec, started)
            finally:
                keeper.terminate()  # stops torchrun, then kills every process left from the launch
                keeper.wait()
                with self._lock:
                    self._launches.discard(keeper)
        seconds = time.monotonic() - started
        returncodes = {rank: None for rank in range(self.nproc)} | _failed_ranks(spec)
        record = collect(spec, self.nproc, CPU, seconds, returncodes, timed_out, stalled_for=stalled_for)
        record.device = _device_that_ran(record) or record.device
        if not timed_out:
            record.stopped = _stopped_after_failure(record)
        return record

    def _wait(self, keeper: subprocess.Popen, spec: RunSpec, started: float) -> tuple[tuple[int, ...], float | None]:
        """Wait for the launch to end. A hang ends it sooner than its timeout once every rank still
        running is found stalled (:mod:`.stall`): the ranks still running, and how long they were quiet."""
        watch = StallWatch(spec.run_dir, spec.scope())
        while True:
            try:
                keeper.wait(timeout=STALL_POLL_SECONDS)
                return (), None
            except subprocess.TimeoutExpired:
                now = time.monotonic()
            running = watch.running(range(self.nproc))
            if now >= started + spec.timeout:
                timed_out = self._ranks_still_running(spec)
                dump_stacks(self._rank_pids(spec, timed_out))
                time.sleep(STACK_GRACE_SECONDS)
                return timed_out, None
            if running and watch.stalled(now, running):
                return running, watch.quiet_seconds

    def _launch(self, spec: RunSpec, cwd: Path, log: BinaryIO) -> subprocess.Popen:
        """Every Python here runs without the current directory on sys.path (see :mod:`.processes`);
        the ranks run the script as ``python SCRIPT`` (or ``python -m MODULE``) would, in ``cwd``."""
        command = [
            *python_module("fsdp2_lint.runtime.launch.keeper"), "--parent", str(os.getpid()),
            "--grace", str(TERMINATE_GRACE_SECONDS), "--",
            *python_module("torch.distributed.run"), "--standalone", f"--nproc_per_node={self.nproc}", "--no-python",
            "--log-dir", str(spec.run_dir.resolve() / "torchrun-logs"),  # not a torchelastic_* left in the TMPDIR
            *python_module("fsdp2_lint.runtime.rank.main"), "--run-dir", str(spec.run_dir.resolve()),
            "--device", self.device_request,
            *(["--trace-lines"] if spec.trace_lines else []),
            *(["--module", spec.module] if spec.module else []),
            *(["--import-root", str(spec.import_root.resolve())] if spec.import_root else []),
            *(["--project", str(spec.project.resolve())] if spec.project else []),
            str(spec.script.resolve()), *spec.argv,
        ]  # fmt: skip
        with self._lock:
            if self._stopping:
                raise _Abandoned(spec.script)
            keeper = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
            self._launches.add(keeper)
        return keeper

    def _ranks_still_running(self, spec: RunSpec) -> tuple[int, ...]:
        probe = collect(spec, self.nproc, CPU, 0.0, {})
        return tuple(rank for rank in probe.ranks if probe.final_event(rank) is None)

    def _rank_pids(self, spec: RunSpec, ranks: tuple[int, ...]) -> list[int]:
        probe = collect(spec, self.nproc, CPU, 0.0, {})
        return [event["pid"] for rank, event in probe.of_kind(events.START) if rank in ranks]


def _failed_ranks(spec: RunSpec) -> dict[int, int]:
    """Exit statuses of the ranks torchrun reports as failed (negative: killed by that signal)."""
    report = read_tail(spec.run_dir / "torchrun.log")
    return {int(match["rank"]): int(match["code"]) for match in FAILED_RANK.finditer(report)}


def _device_that_ran(record: RunRecord) -> Device | None:
    """The ranks resolve ``--device auto`` themselves and say what they used in their start event."""
    for _, event in record.of_kind(events.START):
        return CUDA if event["device"] == "cuda" else CPU
    return None


def _stopped_after_failure(record: RunRecord) -> tuple[int, ...]:
    """torchrun stops the other ranks when one fails; those ranks did not fail by themselves."""
    failed = {rank for rank, code in record.returncodes.items() if code}
    if not failed and not any(record.ended_badly(rank) for rank in record.ranks):
        return ()
    return tuple(rank for rank in record.ranks if record.final_event(rank) is None and rank not in failed)
