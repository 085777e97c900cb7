"""Small training code the tests lint: one place for each sample, so that the tests agree on it; and
`write`, which puts one on disk."""

from __future__ import annotations

import textwrap
from pathlib import Path

# FSDP001 at line 5 (the optimizer is built before sharding)
BAD = textwrap.dedent(
    """\
    import torch
    from torch.distributed.fsdp import fully_shard

    model = Net()
    opt = torch.optim.AdamW(model.parameters())
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt.step()
    """
)

# FSDP001 at line 5 and FSDP003 at line 9 (a direct `.forward` call, which has a safe fix)
BAD_WITH_FIX = BAD.replace("opt.step()\n", "out = model.forward(batch)\nopt.step()\n")

# BAD with the optimizer built after the last `fully_shard`: no diagnostic
GOOD = BAD.replace("opt = torch.optim.AdamW(model.parameters())\n", "").replace(
    "opt.step()", "opt = torch.optim.AdamW(model.parameters())\nopt.step()"
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
