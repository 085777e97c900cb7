"""`fsdp2-lint confirm path/to/train.py`: static findings next to what one torchrun run showed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from runtime_helpers import START, line_of, synthetic_record

from fsdp2_lint.engine import Diagnostic
from fsdp2_lint.rule import Severity, all_rules
from fsdp2_lint.runtime.confirm_script import CONFIRMED, NOT_CONFIRMED, NOT_REACHED, compare

# The optimizer comes from a helper in another file: the static pass, which sees one file, cannot
# know it captured the parameters before sharding (FSDP001); the run shows it.
HELPER = """
import torch


def make_optimizer(model, lr=1e-2):
    return torch.optim.AdamW(model.parameters(), lr=lr)
"""
TRAIN = """
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

from my_optim import make_optimizer

dist.init_process_group("gloo")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
optimizer = make_optimizer(model)  # <optimizer>
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)

x, y = torch.randn(4, 8), torch.randn(4, 4)
for _ in range(2):
    F.mse_loss(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()

if dist.get_rank() == 0:
    torch.save(model.state_dict(), "ckpt.pt")  # <save>
with model.no_sync():  # <no_sync>
    F.mse_loss(model(x), y).backward()
out = model.forward(x)  # <forward>
dist.destroy_process_group()
"""


def test_confirm_on_a_script_reports_confirmed_unreached_and_runtime_only_findings(tmp_path):
    (tmp_path / "my_optim.py").write_text(textwrap.dedent(HELPER))
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
    [missed] = report["runtime_only"]
    assert missed["kind"] == "params_unchanged" and missed["rules"] == ["FSDP001"]
    assert line_of(TRAIN, "# <optimizer>") in missed["lines"]
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
    # the same exception with no static finding at its line is a runtime-only finding of FSDP005
    static, runtime_only = compare([diagnostic("FSDP005", 10)], run, all_rules())
    assert [item.status for item in static] == [NOT_CONFIRMED]
    [missed] = runtime_only
    assert missed.evidence.kind == "exception" and "FSDP005" in missed.rules
