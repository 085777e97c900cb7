"""The one place a launcher is chosen: by the ``--launcher`` name (torch-free)."""

from __future__ import annotations

from pathlib import Path

from fsdp2_lint.runtime.launch.launcher import LAUNCHERS, Launcher
from fsdp2_lint.runtime.launch.pool import RankPool
from fsdp2_lint.runtime.launch.torchrun import TorchrunLauncher


def make_launcher(name: str, nproc: int, device_request: str, run_root: Path, jobs: int | None = None) -> Launcher:
    """``jobs`` None: the launcher's default for its device. The pool logs its servers in ``run_root``."""
    if name == "pool":
        return RankPool(nproc, device_request, run_root, jobs)
    if name == "torchrun":
        return TorchrunLauncher(nproc, device_request, jobs)
    raise ValueError(f"unknown launcher {name!r}; choose from {', '.join(LAUNCHERS)}")
