"""``fsdp2-lint confirm``: run every selected rule's fixtures and judge each run (torch-free)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.rule import Rule
from fsdp2_lint.runtime.evidence.device import Device, can_reproduce, choose_device
from fsdp2_lint.runtime.evidence.record import RunSpec
from fsdp2_lint.runtime.harness.fixtures import Fixture, discover
from fsdp2_lint.runtime.harness.progress import FixtureProgress
from fsdp2_lint.runtime.harness.report import RunSettings
from fsdp2_lint.runtime.harness.verdict import FixtureResult, judge, not_reproducible, not_runnable
from fsdp2_lint.runtime.launch.factory import make_launcher
from fsdp2_lint.runtime.launch.launcher import HarnessError, Launcher
from fsdp2_lint.torch_version import TorchVersion, installed_torch, installed_torch_version


@dataclass(frozen=True)
class FixtureReport:
    settings: RunSettings
    results: list[FixtureResult]
    notes: list[str]
    wall_seconds: float


def confirm_fixtures(
    rules: Sequence[type[Rule]],
    device_request: str,
    nproc: int,
    timeout: float,
    jobs: int | None,
    launcher_name: str,
    run_root: Path,
    fixtures_root: Path | None = None,
    on_result: Callable[[FixtureResult], None] = lambda result: None,
    progress: FixtureProgress | None = None,
) -> FixtureReport:
    """``progress`` hears of the total, then of each fixture judged and of the runs in flight
    (estimated: ``jobs`` at a time while that many are left)."""
    started = time.monotonic()
    torch = installed_torch_version()  # the ranks run this interpreter, with this torch
    fixtures, notes = discover(rules, fixtures_root)
    launcher = make_launcher(launcher_name, nproc, device_request, run_root, jobs)
    results: dict[Fixture, FixtureResult] = {}
    device: Device | None = None
    if progress is not None:
        progress.start(len(fixtures))
    try:
        with launcher:
            device = _run(fixtures, launcher, device_request, nproc, torch, run_root, timeout, results, on_result,
                          progress)  # fmt: skip
    finally:
        if progress is not None:
            progress.stop()
    kind, backend = (device.kind, device.backend) if device else (device_request, "nothing ran")
    settings = RunSettings(kind, backend, nproc, launcher_name, launcher.jobs, timeout, installed_torch() or "unknown")
    ordered = [results[fixture] for fixture in fixtures]
    return FixtureReport(settings, ordered, notes, time.monotonic() - started)


def _run(
    fixtures: list[Fixture],
    launcher: Launcher,
    device_request: str,
    nproc: int,
    torch: TorchVersion | None,
    run_root: Path,
    timeout: float,
    results: dict[Fixture, FixtureResult],
    on_result: Callable[[FixtureResult], None],
    progress: FixtureProgress | None,
) -> Device | None:
    def judged(fixture: Fixture, result: FixtureResult, runs_left: int) -> None:
        results[fixture] = result
        on_result(result)
        if progress is not None:
            progress.update(len(results), min(launcher.jobs, runs_left))

    device = launcher.device
    runnable = []
    for fixture in fixtures:
        reason = _why_not_runnable(fixture, launcher, device_request, nproc)
        other_torch = fixture.bad and fixture.torch_versions.excludes(torch)
        if reason:
            judged(fixture, not_runnable(fixture, reason), 0)
        elif other_torch:  # never confirmed here, whatever a run would show
            judged(fixture, not_reproducible(fixture, other_torch), 0)
        else:
            runnable.append(fixture)
    by_spec = {_spec(fixture, run_root, timeout): fixture for fixture in runnable}
    runs_left = len(by_spec)
    if progress is not None:
        progress.update(len(results), min(launcher.jobs, runs_left))
    for record in launcher.run_all(by_spec):
        errors = record.harness_errors()
        if errors:  # e.g. torchrun ranks that found no GPU for --device cuda
            raise HarnessError("; ".join(sorted(set(errors))))
        fixture = by_spec[record.spec]
        device = device or record.device
        runs_left -= 1
        judged(fixture, judge(fixture, record), runs_left)
    return device


def _spec(fixture: Fixture, run_root: Path, timeout: float) -> RunSpec:
    """A project runs its entry, with the lines of all its files attributed (in its own scratch
    directory like a script: a fixture writes only under ``FSDP2_LINT_OUTDIR``)."""
    run_dir = run_root / f"{fixture.rule}-{re.sub(r'[^A-Za-z0-9_.-]', '_', fixture.name)}"
    entry = fixture.entry
    return RunSpec(
        script=entry.script if entry else fixture.path,
        run_dir=run_dir,
        timeout=timeout,
        expect_hang=fixture.bad and fixture.signature.evidence == "hang",
        module=entry.module if entry else None,
        import_root=entry.import_root if entry else None,
        project=entry.project if entry else None,
    )


def _why_not_runnable(fixture: Fixture, launcher: Launcher, device_request: str, nproc: int) -> str:
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
