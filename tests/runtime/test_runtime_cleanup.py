"""`fsdp2-lint confirm` cleans up after itself and runs only the code it was pointed at.

The fault scripts in ``fault_scripts/`` leave processes behind the way training scripts do (forks,
``Popen``, double-forked daemons, all ignoring SIGTERM) and record each pid with its start time;
these tests check, by looking at ``/proc``, that none of them (and none of the harness's own
processes) outlives ``confirm``: after a normal run, a timeout, SIGTERM or SIGHUP, with both
launchers.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAULTS = Path(__file__).parent / "fault_scripts"
SURVIVORS_PER_RANK = 3  # a forked child, a Popen'ed interpreter, a double-forked daemon
RANKS = 2
READY_SECONDS = 120.0  # two ranks importing torch on a loaded 2-core runner
# `fsdp2-lint confirm` (the real command, in a process of its own) on the fault scripts given as
# the first argument instead of the shipped fixtures.
CONFIRM_FAULTS = """
import sys
from pathlib import Path
from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.harness import confirm_fixtures
from fsdp2_lint.runtime.harness.fixtures import Fixture

scripts = [Path(path) for path in sys.argv[1].split(",")]
fixtures = [Fixture("FSDP005", script, RuntimeSignature("crash")) for script in scripts]
confirm_fixtures.discover = lambda rules, root=None: (fixtures, [])
from fsdp2_lint.cli import main

sys.argv = ["fsdp2-lint", "confirm", *sys.argv[2:]]
main()
"""


def start_confirm(scripts: list[Path], *options: str, env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-c", CONFIRM_FAULTS, ",".join(map(str, scripts)), "--device", "cpu", *options]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


def fault_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "FAULT_PIDS": str(tmp_path / "pids"), **extra}


def temporary_files(tmp_path: Path) -> list[str]:
    """What is left in confirm's TMPDIR, but torch's compile cache (made when the pool imports
    torch._dynamo, and meant to stay)."""
    return [path.name for path in (tmp_path / "tmp").iterdir() if not path.name.startswith("torchinductor_")]


# processes, as /proc shows them ----------------------------------------------------------------


def process_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), fields[0], fields[19])
    return table


def descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below ``root``."""
    table = process_table()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (parent, _, _) in table.items() if parent in frontier}
        found |= {(pid, table[pid][2]) for pid in frontier}
    return found


def recorded(tmp_path: Path) -> set[tuple[int, str]]:
    """What the fault scripts' processes recorded of themselves."""
    lines = (tmp_path / "pids").read_text().split("\n")
    return {(int(pid), start) for pid, start in (line.split() for line in lines if line)}


def left_behind(processes: set[tuple[int, str]]) -> list[str]:
    """Those still there: running, or zombies nobody reaped (a pid reused since has another start time)."""
    table = process_table()
    return [f"{pid} ({table[pid][1]})" for pid, start in processes if pid in table and table[pid][2] == start]


def wait_for_ready_ranks(fifo: Path, ranks: int, confirm: subprocess.Popen) -> None:
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(fifo, os.O_WRONLY)  # so the reader never sees end-of-file between ranks
    received = b""
    deadline = time.monotonic() + READY_SECONDS
    try:
        while received.count(b"\n") < ranks:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and confirm.poll() is None, f"ranks not ready: {confirm.communicate()}"
            if select.select([reader], [], [], min(remaining, 1.0))[0]:
                received += os.read(reader, 64)
    finally:
        os.close(reader)
        os.close(keep_open)


# 15: no process outlives a run ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("launcher", "timeout"),
    [("pool", "4"), ("torchrun", "30")],  # torchrun's timeout includes its ranks importing torch
)
def test_no_process_a_rank_started_outlives_a_normal_run_or_a_timeout(tmp_path, launcher, timeout):
    scripts = [FAULTS / "exits_leaving_survivors.py", FAULTS / "hangs_ignoring_sigterm.py"]
    options = ("--launcher", launcher, "--jobs", "2", "--timeout", timeout, "--output-format", "json")
    confirm = start_confirm(scripts, *options, env=fault_env(tmp_path))
    stdout, stderr = confirm.communicate(timeout=240)

    report = {result["fixture"]: result for result in json.loads(stdout)["results"]}
    assert report["exits_leaving_survivors"]["verdict"] == "clean", stderr
    [hang] = report["hangs_ignoring_sigterm"]["evidence"]
    assert hang["kind"] == "hang" and hang["summary"].startswith(f"timed out after {timeout}s")
    assert confirm.returncode == 1
    processes = recorded(tmp_path)
    assert len(processes) == len(scripts) * RANKS * (1 + SURVIVORS_PER_RANK)
    assert left_behind(processes) == []
    assert temporary_files(tmp_path) == []  # torchrun's log directory (torchelastic_*) included


# 16: SIGTERM and SIGHUP -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("launcher", "signum", "to_group"),
    [
        ("pool", signal.SIGTERM, False),  # a CI job cancelled
        ("pool", signal.SIGHUP, True),  # the terminal closed: its whole foreground group
        ("torchrun", signal.SIGTERM, False),
        ("torchrun", signal.SIGHUP, True),
    ],
)
def test_a_terminated_confirm_stops_every_process_and_removes_its_temporary_directory(
    tmp_path, launcher, signum, to_group
):
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    env = fault_env(tmp_path, FAULT_READY=str(fifo))
    confirm = start_confirm([FAULTS / "hangs_ignoring_sigterm.py"], "--launcher", launcher, "--timeout", "300", env=env)
    wait_for_ready_ranks(fifo, RANKS, confirm)
    processes = descendants(confirm.pid) | recorded(tmp_path)

    (os.killpg if to_group else os.kill)(confirm.pid, signum)
    _, stderr = confirm.communicate(timeout=60)

    assert confirm.returncode == -signum, stderr
    assert "Traceback" not in stderr
    assert left_behind(processes) == []
    assert temporary_files(tmp_path) == []  # fsdp2-lint-confirm-*, torchelastic_*


# 20: no code from the current directory ---------------------------------------------------------


@pytest.fixture
def shadowed_cwd(tmp_path) -> Path:
    """A working directory holding modules named like ones the harness imports."""
    cwd = tmp_path / "cwd"
    shutil.copytree(FAULTS / "shadowing_modules", cwd)
    return cwd


def run_confirm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """As the `fsdp2-lint` console script runs it: the current directory is not on its sys.path."""
    command = [sys.executable, "-c", "import sys; del sys.path[0]; from fsdp2_lint.cli import main; main()", "confirm",
               *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


def test_pooled_fixture_runs_import_nothing_from_the_current_directory(shadowed_cwd):
    result = run_confirm("--rule", "FSDP005", "--device", "cpu", "--launcher", "pool", cwd=shadowed_cwd)

    assert list(shadowed_cwd.glob("imported-*")) == []
    assert result.returncode == 0, result.stdout + result.stderr


def test_torchrun_launches_import_nothing_from_the_current_directory_and_give_scripts_their_own_path(shadowed_cwd):
    # --device auto counts GPUs in a throwaway interpreter before the torchrun launch
    gpus = run_confirm("--rule", "FSDP011", "--launcher", "torchrun", cwd=shadowed_cwd)
    script = shadowed_cwd / "other" / "dir" / "train.py"
    script.parent.mkdir(parents=True)
    shutil.copy(FAULTS / "reports_sys_path.py", script)
    result = run_confirm("--device", "cpu", "other/dir/train.py", cwd=shadowed_cwd)

    assert list(shadowed_cwd.glob("imported-*")) == []
    assert gpus.returncode == 0, gpus.stdout + gpus.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(RANKS):
        report = json.loads((shadowed_cwd / f"sys_path-rank{rank}.json").read_text())
        assert report["cwd"] == str(shadowed_cwd)
        assert report["sys_path"][0] == str(script.parent)  # as `python other/dir/train.py` sets it
        assert not {"", ".", str(shadowed_cwd)} & set(report["sys_path"])
