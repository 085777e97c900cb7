"""What `fsdp2-lint confirm` shows of a run that failed: a rank killed by a signal is named, where
it died, ahead of the errors the other ranks then raised; and printing the end of a rank's log
reads only that end."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from runtime_helpers import START, line_of, synthetic_record

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence.device import CPU
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec
from fsdp2_lint.runtime.evidence.registry import observe
from fsdp2_lint.runtime.harness.fixtures import Fixture
from fsdp2_lint.runtime.harness.verdict import judge
from fsdp2_lint.runtime.launch.torchrun import TorchrunLauncher

FAULTS = Path(__file__).parent / "fault_scripts"
RANKS = 2


# a rank killed by a signal --------------------------------------------------------------------


def test_a_rank_killed_by_a_signal_comes_first_as_the_cause_of_its_peers_errors():
    reset = {"kind": "exception", "types": ["RuntimeError"], "message": "Connection reset by peer", "line": 9}
    run = synthetic_record({0: [START, reset], 1: [START]}, returncodes={0: 1, 1: -11})

    assert [(evidence.kind, evidence.ranks) for evidence in observe(run)] == [("crash", (1,)), ("exception", (0,))]
    assert observe(run)[0].summary == "rank 1 killed by SIGSEGV; last: start"
    assert run.failed_ranks() == [1, 0]


@pytest.mark.parametrize("launcher", ["pool", "torchrun"])
def test_a_rank_killed_by_a_signal_is_named_ahead_of_its_peers_consequential_errors(tmp_path, launcher, request):
    script = FAULTS / "segfaults_on_rank1.py"
    spec = RunSpec(script=script, run_dir=tmp_path / "run", timeout=60.0)
    if launcher == "pool":
        [record] = request.getfixturevalue("pool").run_all([spec])
    else:
        with TorchrunLauncher(nproc=RANKS, device_request="cpu") as torchrun:
            record = torchrun.run(spec)

    cause, *consequences = observe(record)
    kill_line = line_of(script.read_text(), "os.kill(")
    assert (cause.kind, cause.ranks, cause.lines) == ("crash", (1,), (kill_line,))
    assert cause.summary.startswith(f"rank 1 killed by SIGSEGV at line {kill_line} in <module>")
    assert [evidence.ranks for evidence in consequences if evidence.kind == "crash"] == []
    result = judge(Fixture("FSDP005", script, RuntimeSignature("crash")), record)
    assert result.log_tail == record.log_tail(1)  # the killed rank's stderr: faulthandler's dump


# log tails ------------------------------------------------------------------------------------


def test_the_tail_of_a_huge_log_is_read_from_its_end(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with open(run_dir / "stderr-rank0.txt", "wb") as log:
        log.truncate(100 * 1024 * 1024)  # 100 MB of output (sparse: nothing written to disk)
        log.seek(0, os.SEEK_END)
        log.write(b"".join(b"\nline %d" % number for number in range(20)) + b"\n")
    record = RunRecord(RunSpec(Path("train.py"), run_dir, 1.0), 1, CPU, 0.0)

    tracemalloc.start()
    try:
        tail = record.log_tail(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert tail == "\n".join(f"line {number}" for number in range(5, 20))
    assert peak < 1024 * 1024
