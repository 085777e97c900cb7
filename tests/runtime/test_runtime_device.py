"""Device selection with mocked GPU counts (no GPU here), what needs GPUs is not run on CPU, and how a
launcher is chosen and sized."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence.device import CPU, CUDA, DeviceUnavailable, can_reproduce, choose_device
from fsdp2_lint.runtime.harness.confirm_fixtures import _why_not_runnable
from fsdp2_lint.runtime.harness.fixtures import Fixture
from fsdp2_lint.runtime.launch.factory import make_launcher
from fsdp2_lint.runtime.launch.launcher import LAUNCHERS, default_jobs
from fsdp2_lint.runtime.launch.pool import RankPool
from fsdp2_lint.runtime.launch.torchrun import TorchrunLauncher


@pytest.mark.parametrize(
    "requested, nproc, gpus, expected",
    [
        ("auto", 2, 0, CPU),
        ("auto", 2, 1, CPU),  # not one GPU per rank
        ("auto", 2, 2, CUDA),
        ("auto", 4, 8, CUDA),
        ("cpu", 2, 8, CPU),
        ("cuda", 2, 2, CUDA),
    ],
)
def test_choose_device(requested, nproc, gpus, expected):
    assert choose_device(requested, nproc, gpus) == expected


def test_cuda_without_a_gpu_per_rank_is_refused():
    with pytest.raises(DeviceUnavailable, match="2 ranks, 1 GPU"):
        choose_device("cuda", 2, 1)


def test_backends():
    assert (CPU.kind, CPU.backend, CUDA.kind, CUDA.backend) == ("cpu", "gloo", "cuda", "nccl")


def test_can_reproduce_needs_cuda_and_enough_ranks_on_gpus():
    assert can_reproduce(0, CPU, 0, 2)
    assert not can_reproduce(2, CPU, 0, 2)
    assert not can_reproduce(2, CUDA, 1, 2)
    assert not can_reproduce(2, CUDA, 8, 1)
    assert can_reproduce(2, CUDA, 2, 2)


class FakeLauncher:
    def __init__(self, gpus: int) -> None:
        self.gpus = gpus

    def visible_gpus(self) -> int:
        return self.gpus


def test_gpu_only_fixtures_are_not_runnable_on_cpu():
    needs_two = Fixture("FSDP011", Path("bad_no_set_device.py"), RuntimeSignature("exception", min_gpus=2))
    cpu_fine = Fixture("FSDP005", Path("bad_x.py"), RuntimeSignature("exception"))
    assert "running on CPU" in _why_not_runnable(needs_two, FakeLauncher(8), "cpu", 2)
    assert "0 visible" in _why_not_runnable(needs_two, FakeLauncher(0), "auto", 2)
    assert _why_not_runnable(needs_two, FakeLauncher(2), "auto", 2) == ""
    assert _why_not_runnable(cpu_fine, FakeLauncher(0), "auto", 2) == ""


def test_default_jobs_keep_two_runs_going_on_small_cpus_and_two_on_cuda(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert default_jobs(2, "cpu") == 2
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert default_jobs(2, "cpu") == 8
    assert default_jobs(2, "cuda") == 2


def test_the_factory_makes_the_launcher_each_name_picks_with_jobs_as_asked_or_the_devices_default(
    tmp_path, monkeypatch
):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert {name: type(make_launcher(name, 2, "cpu", tmp_path)) for name in LAUNCHERS} == {
        "pool": RankPool,
        "torchrun": TorchrunLauncher,
    }
    assert [make_launcher(name, 2, "cpu", tmp_path, jobs=3).jobs for name in LAUNCHERS] == [3, 3]
    assert make_launcher("torchrun", 2, "cpu", tmp_path).jobs == default_jobs(2, "cpu") == 8
    assert make_launcher("torchrun", 2, "cuda", tmp_path).jobs == 2
    assert make_launcher("pool", 2, "cpu", tmp_path).device is None  # known once its servers are up
    with pytest.raises(ValueError, match="unknown launcher 'mpirun'"):
        make_launcher("mpirun", 2, "cpu", tmp_path)
