"""Which device and backend a run uses (torch-free: the GPU count is measured inside the ranks)."""

from __future__ import annotations

from dataclasses import dataclass

DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda": passed to scripts as FSDP2_LINT_DEVICE
    backend: str  # the process-group backend scripts are expected to use on it

    def describe(self) -> str:
        return f"{self.kind} ({self.backend})"


CPU = Device("cpu", "gloo")
CUDA = Device("cuda", "nccl")


class DeviceUnavailable(Exception):
    pass


def choose_device(requested: str, nproc: int, visible_gpus: int) -> Device:
    """``auto``: CUDA + NCCL when every rank can have its own GPU, else CPU + gloo."""
    if requested == "cpu":
        return CPU
    if requested == "cuda":
        if visible_gpus < nproc:
            raise DeviceUnavailable(
                f"--device cuda needs one GPU per rank: {nproc} ranks, {visible_gpus} GPU(s) visible"
            )
        return CUDA
    if requested == "auto":
        return CUDA if visible_gpus >= nproc else CPU
    raise ValueError(f"unknown device {requested!r}; choose from {', '.join(DEVICE_CHOICES)}")


def can_reproduce(min_gpus: int, device: Device, visible_gpus: int, nproc: int) -> bool:
    """Whether a failure that needs ``min_gpus`` GPUs can show up in this run (one GPU per rank)."""
    if min_gpus <= 0:
        return True
    return device.kind == "cuda" and min(visible_gpus, nproc) >= min_gpus
