"""What a rule leaves alone is as much its behaviour as what it reports: each exemption a rule
documents, shown on code it must not flag beside the nearest code it must (so that the test fails
when the rule stops firing as much as when the exemption is lost)."""

from __future__ import annotations

import textwrap

import pytest

from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

HEADER = """\
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
"""

TRAINER = """
class Trainer:
    def __init__(self, model, optimizer):
        fully_shard(model)
        self.model, self.optimizer = model, optimizer

    def train_step(self, batch):
        self.model.set_requires_gradient_sync(False)
        self.model(batch).sum().backward()
        self.optimizer.step()

    def end_accumulation(self):
        {}
"""

# rule, code it must not flag, the nearest code it must flag (and on which line of that code)
CASES = {
    # code that receives either a wrapper or an FSDP2 model usually checks which one it has
    "FSDP005-DDP-wrapper": (
        "FSDP005",
        "if use_ddp:\n    model = DDP(model)\nelse:\n    fully_shard(model)\nwith model.no_sync():\n    loss.backward()\n",
        "if use_ddp:\n    model = model.cuda()\nelse:\n    fully_shard(model)\nwith model.no_sync():\n    loss.backward()\n",
        5,
    ),
    "FSDP005-FSDP1-wrapper": (
        "FSDP005",
        "if fsdp1:\n    model = FSDP(model)\nelse:\n    fully_shard(model)\nwith model.no_sync():\n    loss.backward()\n",
        "if fsdp1:\n    model = model.cuda()\nelse:\n    fully_shard(model)\nwith model.no_sync():\n    loss.backward()\n",
        5,
    ),
    "FSDP007-process-group": (
        "FSDP007",
        "fully_shard(model)\nif dist.get_rank() == 0:\n    dcp.save(state, checkpoint_id='ckpt', process_group=group)\n",
        "fully_shard(model)\nif dist.get_rank() == 0:\n    dcp.save(state, checkpoint_id='ckpt')\n",
        3,
    ),
    "FSDP014-sibling-method": (
        "FSDP014",
        TRAINER.format("self.model.set_requires_gradient_sync(True)"),
        TRAINER.format("self.model.zero_grad()"),
        8,
    ),
    "FSDP001-stale-optimizer-not-used": (
        "FSDP001",
        "opt = torch.optim.AdamW(model.parameters())\nfully_shard(model)\n"
        "opt = torch.optim.AdamW(model.parameters())\nopt.step()\n",
        "opt = torch.optim.AdamW(model.parameters())\nfully_shard(model)\nopt.step()\n",
        1,
    ),
}


def findings(code: str, body: str) -> list[tuple[str, int]]:
    [rule] = [rule for rule in all_rules() if rule.code == code]
    source = HEADER + textwrap.dedent(body)
    offset = HEADER.count("\n")
    return [(d.code, d.line - offset) for d in lint_source(source.encode(), "train.py", [rule])]


@pytest.mark.parametrize("code, exempt, flagged, line", CASES.values(), ids=CASES.keys())
def test_a_documented_exemption_is_not_reported_and_the_code_beside_it_is(code, exempt, flagged, line):
    assert findings(code, flagged) == [(code, line)]
    assert findings(code, exempt) == []
