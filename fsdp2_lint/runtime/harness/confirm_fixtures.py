"""``fsdp2-lint confirm``: run every selected rule's fixtures and judge each run (torch-free)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.runtime.evidence.device import Device, can_reproduce, choose_device
from fsdp2_lint.runtime.evidence.record import RunSpec
from fsdp2_lint.runtime.harness.fixtures import Fixture, discover
from fsdp2_lint.runtime.harness.report import RunSettings
from fsdp2_lint.runtime.harness.verdict import FixtureResult, judge, not_runnable
from fsdp2_lint.runtime.launch.pool import HarnessError, RankPool
from fsdp2_lint.runtime.launch.torchrun import TorchrunLauncher

LAUNCHERS = ("pool", "torchrun")


@dataclass(frozen=True)
class FixtureReport:
    settings: RunSettings
    results: list[FixtureResult]
    notes: list[str]
    wall_seconds: float


def confirm_fixtures(
    codes: Sequence[str],
    device_request: str,
    nproc: int,
    timeout: float,
    jobs: int | None,
    launcher_name: str,
    run_root: Path,
    fixtures_root: Path | None = None,
    on_result: Callable[[FixtureResult], None] = lambda result: None,
) -> FixtureReport:
    started = time.monotonic()
    fixtures, notes = discover(codes, fixtures_root)
    launcher = (
        RankPool(nproc, device_request, run_root)
        if launcher_name == "pool"
        else TorchrunLauncher(nproc, device_request)
    )
    results: dict[Fixture, FixtureResult] = {}
    device: Device | None = None
    with launcher:
        device = getattr(launcher, "device", None)  # the pool knows it once its servers are up
        launcher.jobs = jobs or default_jobs(nproc, device.kind if device else device_request)
        runnable = []
        for fixture in fixtures:
            reason = _why_not_runnable(fixture, launcher, device_request, nproc)
            if reason:
                results[fixture] = not_runnable(fixture, reason)
                on_result(results[fixture])
            else:
                runnable.append(fixture)
        by_spec = {_spec(fixture, run_root, timeout): fixture for fixture in runnable}
        for record in launcher.run_all(by_spec):
            errors = record.harness_errors()
            if errors:  # e.g. torchrun ranks that found no GPU for --device cuda
                raise HarnessError("; ".join(sorted(set(errors))))
            fixture = by_spec[record.spec]
            results[fixture] = judge(fixture, record)
            device = device or record.device
            on_result(results[fixture])
    kind, backend = (device.kind, device.backend) if device else (device_request, "nothing ran")
    settings = RunSettings(kind, backend, nproc, launcher_name, launcher.jobs, timeout)
    ordered = [results[fixture] for fixture in fixtures]
    return FixtureReport(settings, ordered, notes, time.monotonic() - started)


def default_jobs(nproc: int, device_kind: str) -> int:
    """Runs at a time. CPU: one rank per core but at least 2 — a fixture run mostly waits
    (rendezvous, collectives), so two at a time are faster even on 2 cores (measured: 35 s instead
    of 48 s for 41 fixtures). CUDA: 2, since rank r of every concurrent run shares GPU r."""
    if device_kind == "cuda":
        return 2
    return max(2, (os.cpu_count() or 1) // nproc)


def _spec(fixture: Fixture, run_root: Path, timeout: float) -> RunSpec:
    run_dir = run_root / f"{fixture.rule}-{re.sub(r'[^A-Za-z0-9_.-]', '_', fixture.name)}"
    return RunSpec(
        script=fixture.path,
        run_dir=run_dir,
        timeout=timeout,
        expect_hang=fixture.bad and fixture.signature.evidence == "hang",
    )


def _why_not_runnable(fixture: Fixture, launcher, device_request: str, nproc: int) -> str:
    min_gpus = fixture.signature.min_gpus
    if min_gpus <= 0:
        return ""
    if device_request == "cpu":
        return f"needs {min_gpus} GPUs; running on CPU"
    visible = launcher.visible_gpus()
    device = choose_device(device_request, nproc, visible)
    if can_reproduce(min_gpus, device, visible, nproc):
        return ""
    return f"needs {min_gpus} GPUs (one per rank); {visible} visible, {nproc} ranks, device {device.kind}"
