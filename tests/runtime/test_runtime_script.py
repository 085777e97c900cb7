"""`fsdp2-lint confirm path/to/train.py`: static findings next to what one torchrun run showed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import replace

from runtime_helpers import EXIT, START, line_of, synthetic_record

from fsdp2_lint.diagnostics import Diagnostic, Severity
from fsdp2_lint.engine import lint_file
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.evidence.device import CUDA
from fsdp2_lint.runtime.evidence.record import RunSpec
from fsdp2_lint.runtime.harness.confirm_script import (
    CONFIRMED,
    NOT_CONFIRMED,
    NOT_REACHED,
    NOT_RUNNABLE,
    compare,
    device_hint,
)
from fsdp2_lint.runtime.harness.fixtures import fixtures_root

EXPECT_MARK = re.compile(r"\s*# expect: FSDP\d{3}(, FSDP\d{3})*")

# The checkpoint helper lives in another file: the static pass, which sees one file, cannot know it
# writes the sharded state dict with torch.save (FSDP004); the run shows it.
HELPER = """
import torch


def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)
"""
TRAIN = """
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

from my_checkpoint import save_checkpoint

dist.init_process_group("gloo")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

x, y = torch.randn(4, 8), torch.randn(4, 4)
for _ in range(2):
    F.mse_loss(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()

save_checkpoint(model, "latest.pt")  # <helper_save>
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "ckpt.pt")  # <save>
with model.no_sync():  # <no_sync>
    F.mse_loss(model(x), y).backward()
out = model.forward(x)  # <forward>
dist.destroy_process_group()
"""


def test_confirm_on_a_script_reports_confirmed_unreached_and_runtime_only_findings(tmp_path):
    (tmp_path / "my_checkpoint.py").write_text(textwrap.dedent(HELPER))
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", "--device", "cpu",
               "--output-format", "json", "train.py"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    report = json.loads(result.stdout)

    statuses = {(finding["code"], finding["line"]): finding["status"] for finding in report["static"]}
    assert statuses == {
        ("FSDP004", line_of(TRAIN, "# <save>")): "confirmed",
        ("FSDP005", line_of(TRAIN, "# <no_sync>")): "confirmed",
        ("FSDP003", line_of(TRAIN, "# <forward>")): "not reached",  # the no_sync() error came first
    }
    # the helper's save is another occurrence of FSDP004's failure, not the one the finding is on
    [missed] = report["runtime_only"]
    assert missed["kind"] == "dtensor_save" and missed["rules"] == ["FSDP004"]
    assert missed["lines"] == [line_of(TRAIN, "# <helper_save>")]
    assert (report["device"], report["completed"], report["ok"]) == ("cpu", False, False)
    assert result.returncode == 1
    assert (tmp_path / "ckpt.pt").exists()  # the script ran in the caller's directory


def diagnostic(code: str, line: int) -> Diagnostic:
    return Diagnostic(code, "name", "message", "hint", Severity.ERROR, "train.py", line, 1, line, 10, "")


def test_compare_classifies_each_static_finding_by_line():
    error = {"kind": "exception", "types": ["AttributeError"], "message": "'M' object has no attribute 'no_sync'",
             "line": 27, "script_lines": [27]}  # fmt: skip
    run = synthetic_record({0: [START, error], 1: [START, error]}, reached_lines=frozenset({10, 20, 27}))
    static, runtime_only = compare(
        [diagnostic("FSDP005", 27), diagnostic("FSDP004", 20), diagnostic("FSDP003", 29)], run, all_rules()
    )
    assert [(item.diagnostic.code, item.status) for item in static] == [
        ("FSDP005", CONFIRMED),
        ("FSDP004", NOT_CONFIRMED),  # line 20 ran: no DTensor save there
        ("FSDP003", NOT_REACHED),
    ]
    assert runtime_only == []
    # a finding no rank executed explains no failure elsewhere: the exception is a runtime-only FSDP005
    static, runtime_only = compare([diagnostic("FSDP005", 12)], run, all_rules())
    assert [item.status for item in static] == [NOT_REACHED]
    [missed] = runtime_only
    assert missed.evidence.kind == "exception" and "FSDP005" in missed.rules

    # one rank: a reached torch.save of DTensors cannot show FSDP004's failure (the shard is the whole)
    one_rank = synthetic_record({0: [START, error]}, world_size=1, reached_lines=frozenset({10, 20, 27}))
    static, _ = compare([diagnostic("FSDP005", 27), diagnostic("FSDP004", 20)], one_rank, all_rules())
    assert [item.status for item in static] == [CONFIRMED, NOT_RUNNABLE]


META_ERROR = {"kind": "exception", "types": ["RuntimeError"], "line": 30, "script_lines": [30, 44],
              "message": "FSDP parameters should be materialized from meta device before training"}  # fmt: skip


def step(optimizer_lines: list[int], line: int) -> dict:
    """A probed step of an optimizer over the replaced (pre-shard) tensors: FSDP001's evidence."""
    return {"kind": "step", "optimizer": "AdamW", "optimizer_id": optimizer_lines[0], "optimizer_line": optimizer_lines[0],
            "optimizer_lines": optimizer_lines, "step": 1, "optimizer_params": 4, "optimizer_dtensor": 0,
            "optimizer_replaced": 4, "optimizer_unsharded": 0, "model_params": 4, "model_dtensor": 4,
            "held_by_optimizer": 0, "not_held": [], "grads_missing": 0, "no_grad": [], "sync_off": [],
            "sync_off_count": 0, "sync_off_changed": 0, "sync_off_not_held": 0, "sync_off_lines": [], "compared": 4,
            "changed": 0, "unchanged": [], "line": line}  # fmt: skip


def test_evidence_away_from_the_finding_confirms_the_closest_finding_of_its_rule():
    # FSDP006 reported at the caller's `model = build_model()` (line 12); the error comes at the forward
    run = synthetic_record({0: [START, META_ERROR], 1: [START, META_ERROR]}, reached_lines=frozenset({12, 30, 44}))
    static, runtime_only = compare([diagnostic("FSDP006", 12)], run, all_rules())
    assert [(item.status, item.evidence.lines) for item in static] == [(CONFIRMED, (30, 44))]
    assert runtime_only == []

    # two stale optimizers (FSDP001 at lines 14 and 25); each step's evidence goes to its own finding,
    # through the construction's lines or, where none is the finding's, the nearest
    events = [START, step([25], 40), step([15, 60], 41), EXIT]
    run = synthetic_record({0: events, 1: [START, EXIT]}, reached_lines=frozenset({14, 15, 25, 40, 41, 60}))
    static, runtime_only = compare([diagnostic("FSDP001", 14), diagnostic("FSDP001", 25)], run, all_rules())
    assert [(item.status, item.evidence.lines) for item in static] == [
        (CONFIRMED, (15, 60, 41)),
        (CONFIRMED, (25, 40)),
    ]
    assert runtime_only == []


def test_every_item_of_evidence_a_finding_explains_is_accounted_for():
    # FSDP009's context form: the DTensors inside it and the KeyError at its exit, both at line 55
    ignored = {"kind": "state_dict", "module": "FSDPModel", "requested": "FULL_STATE_DICT", "config_line": 55,
               "tensors": 7, "dtensors": 7, "line": 56}  # fmt: skip
    key_error = {"kind": "exception", "types": ["KeyError"], "message": "None", "line": 55, "script_lines": [55]}
    run = synthetic_record(
        {0: [START, ignored, key_error], 1: [START, ignored, key_error]}, reached_lines=frozenset({55, 56})
    )
    static, runtime_only = compare([diagnostic("FSDP009", 55)], run, all_rules())
    assert [item.status for item in static] == [CONFIRMED]
    assert runtime_only == []


def test_a_finding_whose_statement_raised_another_findings_failure_was_not_reached():
    error = {"kind": "exception", "types": ["TypeError"], "message": "fully_shard() got an unexpected keyword argument",
             "line": 53, "script_lines": [53]}  # fmt: skip
    run = synthetic_record({0: [START, error], 1: [START, error]}, reached_lines=frozenset({53}))
    static, _ = compare([diagnostic("FSDP022", 53), diagnostic("FSDP034", 53)], run, all_rules())
    assert [(item.diagnostic.code, item.status) for item in static] == [
        ("FSDP022", CONFIRMED),
        ("FSDP034", NOT_REACHED),
    ]


# Bad fixtures whose finding is away from where the failure shows (the caller of a meta-device
# helper, an optimizer state load before the failing step, ...), marks stripped, run with line
# tracing like `confirm SCRIPT`: each finding is confirmed and nothing is left over as missed.
AWAY = ("FSDP001/bad_helpers_wrong_order", "FSDP006/bad_device_kwarg_helpers", "FSDP008/bad_eval_helper",
        "FSDP021/bad_trainer_resume", "FSDP023/bad_helper_policy_kwargs", "FSDP009/bad_module_level")  # fmt: skip


def test_bad_fixtures_with_findings_away_from_their_failure_are_confirmed(pool, tmp_path):
    specs = {}
    for name in AWAY:
        source = (fixtures_root() / f"{name}.py").read_text()
        script = tmp_path / "scripts" / f"{name}.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(EXPECT_MARK.sub("", source))
        specs[RunSpec(script=script, run_dir=tmp_path / "runs" / name, timeout=60.0, trace_lines=True)] = script
    away = set()
    for record in pool.run_all(list(specs)):
        script = specs[record.spec]
        static, runtime_only = compare(lint_file(script, all_rules()), record, all_rules())
        assert static and all(item.status == CONFIRMED for item in static), (script, static)
        assert runtime_only == [], (script, runtime_only)
        away |= {script.parent.name for item in static if item.diagnostic.line not in item.evidence.lines}
    assert {"FSDP006", "FSDP021", "FSDP023"} <= away


CUDA_ONLY = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
x = torch.ones(2, device="cuda")  # hard-coded: fails on a CPU-only machine
dist.all_reduce(x)
dist.destroy_process_group()
"""


def test_a_script_that_hard_codes_cuda_gets_told_how_to_read_the_harness_device(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_ONLY)
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", "--device", "cpu",
               "--output-format", "json", "train.py"]  # fmt: skip
    report = json.loads(subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300).stdout)
    assert report["completed"] is False
    assert "FSDP2_LINT_DEVICE" in report["hint"] and "cpu (gloo)" in report["hint"]


def _ended_with(message: str) -> dict[int, list[dict]]:
    exception = {"kind": "exception", "types": ["RuntimeError"], "message": message, "line": 5}
    return {0: [START, exception], 1: [START, EXIT]}


def test_the_device_hint_needs_a_cuda_only_error_on_a_run_without_cuda():
    assert device_hint(synthetic_record(_ended_with("Distributed package doesn't have NCCL built in"))) is not None
    assert device_hint(synthetic_record(_ended_with("Found no NVIDIA driver on your system."))) is not None
    assert device_hint(synthetic_record(_ended_with("shape mismatch in all_reduce"))) is None
    on_cuda = replace(synthetic_record(_ended_with("Torch not compiled with CUDA enabled")), device=CUDA)
    assert device_hint(on_cuda) is None


RANK0_ONLY_THEN_EXIT = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
x = torch.ones(2)
if dist.get_rank() == 0:
    dist.all_reduce(x)  # <reduce>
dist.destroy_process_group()
"""


def test_a_rank_local_collective_that_raises_instead_of_hanging_confirms_fsdp007(tmp_path):
    (tmp_path / "train.py").write_text(RANK0_ONLY_THEN_EXIT)
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", "--device", "cpu",
               "--output-format", "json", "train.py"]  # fmt: skip
    report = json.loads(subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300).stdout)
    [finding] = report["static"]
    assert (finding["code"], finding["line"], finding["status"]) == (
        "FSDP007",
        line_of(RANK0_ONLY_THEN_EXIT, "# <reduce>"),
        "confirmed",
    )
    assert finding["evidence"]["kind"] == "unmatched_collective"
    assert report["runtime_only"] == []  # the connection error is that failure, not another one


HANGS = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
x = torch.ones(2)
if dist.get_rank() == 0:
    dist.all_reduce(x)  # <reduce>
dist.barrier()
dist.destroy_process_group()
"""


def test_a_hanging_script_is_ended_by_the_stall_watch_not_its_timeout(tmp_path):
    (tmp_path / "train.py").write_text(HANGS)
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", "--device", "cpu",
               "--timeout", "600", "--output-format", "json", "train.py"]  # fmt: skip
    report = json.loads(subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300).stdout)
    [finding] = report["static"]
    assert (finding["code"], finding["status"], finding["evidence"]["kind"]) == ("FSDP007", "confirmed", "hang")
    assert finding["evidence"]["summary"].startswith("stalled after")  # not "timed out after 600s"
    assert report["timed_out_ranks"] == [0, 1]
