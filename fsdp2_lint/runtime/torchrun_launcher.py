"""Per-launch mode: one ``torchrun --standalone --nproc_per_node N`` per script (torch-free here).

Each launch pays torch's import on every rank; it is what ``confirm path/to/train.py`` uses and
the baseline the pooled mode is measured against. ``--standalone`` lets torchrun pick a free
rendezvous port itself, so concurrent launches cannot collide.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from fsdp2_lint.runtime import events
from fsdp2_lint.runtime.device import CPU, CUDA, Device, choose_device
from fsdp2_lint.runtime.record import RunRecord, RunSpec, collect, read_tail
from fsdp2_lint.runtime.signals import STACK_GRACE_SECONDS, dump_stacks, signal_group

TERMINATE_GRACE_SECONDS = 5.0
# torchrun's failure report: one block per rank that failed before torchrun stopped the others
# (ranks it stopped are not listed), "exitcode: -11" for one killed by SIGSEGV.
FAILED_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: \d+\)\n\s*exitcode\s*: (?P<code>-?\d+)", re.M)


class TorchrunLauncher:
    def __init__(self, nproc: int, device_request: str, jobs: int = 1) -> None:
        self.nproc = nproc
        self.device_request = device_request  # resolved by each rank (rank_main), reported in its events
        self.jobs = jobs
        self._visible_gpus: int | None = None

    def __enter__(self) -> TorchrunLauncher:
        if self.device_request == "cuda":  # refuse before any launch rather than in every rank
            choose_device("cuda", self.nproc, self.visible_gpus())
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def visible_gpus(self) -> int:
        """Only needed to rule out fixtures that need GPUs; costs one torch import."""
        if self._visible_gpus is None:
            answer = subprocess.run(
                [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            self._visible_gpus = int(answer.stdout.strip() or 0)
        return self._visible_gpus

    def run_all(self, specs: Iterable[RunSpec]) -> Iterator[RunRecord]:
        """Run the specs, ``jobs`` launches at a time; records come in the order of ``specs``."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(self.run, spec) for spec in specs]
            try:
                for future in futures:
                    yield future.result()
            finally:
                for future in futures:
                    future.cancel()  # those not started yet, when the caller stops early

    def run(self, spec: RunSpec) -> RunRecord:
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        cwd = spec.cwd or events.output_dir(spec.run_dir)
        cwd.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={self.nproc}",
            "-m", "fsdp2_lint.runtime.rank_main", "--run-dir", str(spec.run_dir.resolve()),
            "--device", self.device_request,
            *(["--trace-lines"] if spec.trace_lines else []),
            str(spec.script.resolve()), *spec.argv,
        ]  # fmt: skip
        started = time.monotonic()
        with open(spec.run_dir / "torchrun.log", "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
            timed_out: tuple[int, ...] = ()
            try:
                process.wait(timeout=spec.timeout)
            except subprocess.TimeoutExpired:
                timed_out = self._ranks_still_running(spec)
                dump_stacks(self._rank_pids(spec, timed_out))
                time.sleep(STACK_GRACE_SECONDS)
            finally:
                _terminate_session(process)
        seconds = time.monotonic() - started
        returncodes = {rank: None for rank in range(self.nproc)} | _failed_ranks(spec)
        record = collect(spec, self.nproc, CPU, seconds, returncodes, timed_out)
        record.device = _device_that_ran(record) or record.device
        if not timed_out:
            record.stopped = _stopped_after_failure(record)
        return record

    def _ranks_still_running(self, spec: RunSpec) -> tuple[int, ...]:
        probe = collect(spec, self.nproc, CPU, 0.0, {})
        return tuple(rank for rank in probe.ranks if probe.final_event(rank) is None)

    def _rank_pids(self, spec: RunSpec, ranks: tuple[int, ...]) -> list[int]:
        probe = collect(spec, self.nproc, CPU, 0.0, {})
        return [event["pid"] for rank, event in probe.of_kind(events.START) if rank in ranks]


def _terminate_session(process: subprocess.Popen) -> None:
    """Stop torchrun and every rank it started (they share its session)."""
    signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=TERMINATE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    signal_group(process.pid, signal.SIGKILL)  # whatever outlived torchrun in its session
    process.wait()


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
