"""What the harness asks of a launcher (torch-free); :mod:`.factory` makes the one ``--launcher`` names."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fsdp2_lint.runtime.evidence.device import Device
    from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec

LAUNCHERS = ("pool", "torchrun")


class HarnessError(Exception):
    """The harness itself could not run (no torch in the ranks, no GPUs for --device cuda, ...)."""


class Launcher(Protocol):
    """Runs scripts as ranks. Use as a context manager: entering starts what every run shares (the
    pool's rank servers), leaving stops every process the launcher started."""

    def __enter__(self) -> Launcher: ...

    def __exit__(self, *exc: object) -> None: ...

    @property
    def jobs(self) -> int:
        """Runs at a time: as asked, else :func:`default_jobs` for the device."""
        ...

    @property
    def device(self) -> Device | None:
        """The device every run uses, when known before any run (else each run's record says)."""
        ...

    def visible_gpus(self) -> int: ...

    def run_all(self, specs: Iterable[RunSpec]) -> Iterator[RunRecord]:
        """Run the specs and yield a record as each run ends."""
        ...


def default_jobs(nproc: int, device_kind: str) -> int:
    """Runs at a time. CPU: one rank per core but at least 2 — a fixture run mostly waits
    (rendezvous, collectives), so two at a time are faster even on 2 cores (measured: 35 s instead
    of 48 s for 41 fixtures). CUDA: 2, since rank r of every concurrent run shares GPU r."""
    if device_kind == "cuda":
        return 2
    return max(2, (os.cpu_count() or 1) // nproc)
