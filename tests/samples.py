"""Small training code the tests lint: one place for each sample, so that the tests agree on it."""

from __future__ import annotations

import textwrap

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
