"""Helpers shared by the runtime harness tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from fsdp2_lint.runtime.evidence.device import CPU
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec

START = {"kind": "start", "pid": 1}
EXIT = {"kind": "exit", "code": 0}

# Every probe test script starts with this: a 2-block model sharded bottom-up, and a train loop.
PRELUDE = """\
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
torch.manual_seed(0)
rank = dist.get_rank()


def make_model():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))


def shard(model):
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    return model


def train(model, optimizer, steps=2):
    x = torch.randn(4, 8)
    for _ in range(steps):
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def line_of(source: str, marker: str) -> int:
    """1-based line of the only line containing ``marker`` (a `# <name>` comment in the test script)."""
    found = [number for number, text in enumerate(source.splitlines(), start=1) if marker in text]
    assert len(found) == 1, f"{marker!r} must mark exactly one line, found {found}"
    return found[0]


def script_source(body: str) -> str:
    return PRELUDE + textwrap.dedent(body)


def synthetic_record(events: dict[int, list[dict]], world_size: int = 2, **fields) -> RunRecord:
    """A run record built from hand-written events (no processes), for evidence and verdict tests."""
    spec = RunSpec(script=Path("/nowhere/train.py"), run_dir=Path("/nowhere/run"), timeout=fields.pop("timeout", 10.0))
    return RunRecord(spec=spec, world_size=world_size, device=CPU, seconds=1.0, events=events, **fields)
