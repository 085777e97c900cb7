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


# --- files of mutually calling helpers (an exponential call tree, as in sympy's gruntz.py) -------

HELPERS = 12
FAN_OUT = 5  # each helper calls the next five: 5**8 calls at the depth limit, for one call of the first


def _helper(receiver: str, index: int, count: int, fan_out: int) -> list[str]:
    """A helper's lines (unindented); ``receiver`` is what its calls go through ("self." or "")."""
    calls = " + ".join(f"{receiver}helper_{(index + step) % count}(z)" for step in range(1, fan_out + 1))
    params = "self, x" if receiver else "x"
    return [f"def helper_{index}({params}):", "    y = x + 1", "    z = y * 2", f"    return {calls}"]


def function_cluster(count: int = HELPERS, fan_out: int = FAN_OUT) -> str:
    """Helpers that call each other."""
    return "".join(line + "\n" for index in range(count) for line in _helper("", index, count, fan_out))


def method_cluster(count: int = HELPERS, fan_out: int = FAN_OUT) -> str:
    """Methods that call each other through ``self``."""
    lines = [line for index in range(count) for line in _helper("self.", index, count, fan_out)]
    return "class Helpers:\n" + "".join(f"    {line}\n" for line in lines)


# cluster kind -> (the cluster's source, given its size and fan-out; the module-level call of its first helper)
CLUSTERS = {
    "functions": (function_cluster, "helper_0(1)"),
    "methods": (method_cluster, "Helpers().helper_0(1)"),
}
