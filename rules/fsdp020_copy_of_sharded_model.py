from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import canonical, may_be_wrapper, refs
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Calls that `copy.deepcopy` the module they are given, and where they take it.
_COPIERS = {
    "copy.deepcopy": (0, "x"),
    "torch.optim.swa_utils.AveragedModel": (0, "model"),
    # timm's EMA wrappers deepcopy the model in their constructor.
    "timm.utils.ModelEma": (0, "model"),
    "timm.utils.ModelEmaV2": (0, "model"),
    "timm.utils.ModelEmaV3": (0, "model"),
    "timm.utils.model_ema.ModelEma": (0, "model"),
    "timm.utils.model_ema.ModelEmaV2": (0, "model"),
    "timm.utils.model_ema.ModelEmaV3": (0, "model"),
}


class CopyOfShardedModel(Rule):
    code = "FSDP020"
    name = "deepcopy-of-sharded-model"
    summary = "`copy.deepcopy` / `AveragedModel` of a module already sharded with `fully_shard`"
    hint = (
        "make the copy before sharding and shard it with the same plan (`ema = copy.deepcopy(model)`, then "
        "`fully_shard` both), or keep the EMA as copies of the local shards (`p.detach().clone()`)"
    )
    failure = "`AssertionError: FSDP does not support deepcopy. Please use state dict for serialization.`"
    docs = """
## What it does
Flags `copy.deepcopy(m)`, `torch.optim.swa_utils.AveragedModel(m)` and timm's
`ModelEma`/`ModelEmaV2`/`ModelEmaV3(m)` (which deepcopy the model they are given) where `fully_shard`
has already been applied to `m` or to a module inside it: the usual EMA / SWA / teacher-model copy
made after the model was sharded. Not flagged: the copy made before sharding (then shard the copy
too), a copy of a module that is only *managed* by an ancestor's `fully_shard` (a plain module whose
parameters are DTensors: torch copies it), copies of state dicts or tensors, and modules wrapped in
`DistributedDataParallel` or FSDP1 `FullyShardedDataParallel`.

## Why is this bad?
`fully_shard` gives every module it is applied to a `__deepcopy__` that raises. Observed with torch
2.13, on every rank: `AssertionError: FSDP does not support deepcopy. Please use state dict for
serialization.` for `copy.deepcopy(model)`, for `AveragedModel(model)` (its constructor deepcopies
the model, with or without `use_buffers`), and for the deepcopy of any module or object that holds a
sharded submodule. The job dies at the line that builds the EMA or teacher model.

Use instead: build the copy before sharding and shard it with the same plan, so that its
parameters are DTensors placed like the model's and `ema_p.lerp_(p, 1 - decay)` works shard by shard:

```python
ema = copy.deepcopy(model)
for m in (model, ema):
    for block in m.blocks:
        fully_shard(block)
    fully_shard(m)
```

An evaluation forward of the sharded copy without a backward (`with torch.no_grad(): ema(x)`)
leaves its root's parameters unsharded (plain tensors) until its next forward; call `ema.reshard()`
after it, or the next `lerp_` against the model's DTensors fails with `mixed torch.Tensor and DTensor`.

## Known problems
Copies made by other libraries' EMA helpers (`ema_pytorch.EMA(model)`) are not recognised. A copy
made before sharding but never sharded itself fails later instead, when it is updated from the
sharded parameters (`RuntimeError: aten.lerp_.Scalar got mixed torch.Tensor and DTensor`): that
shape is not flagged by this rule.
"""
    valid = (
        """
import copy
from torch.distributed.fsdp import fully_shard

ema = copy.deepcopy(model)
fully_shard(model)
fully_shard(ema)
""",
        """
import copy
from torch.distributed.fsdp import fully_shard

fully_shard(model)
snapshot = copy.deepcopy(model.state_dict())
""",
        """
import copy
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model)
ema = copy.deepcopy(model.module)
""",
    )
    invalid = (
        """
import copy
from torch.distributed.fsdp import fully_shard

for block in model.blocks:
    fully_shard(block)
fully_shard(model)
ema = copy.deepcopy(model)  # expect: FSDP020
""",
        """
from torch.distributed.fsdp import fully_shard
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

fully_shard(model)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))  # expect: FSDP020
""",
        """
from copy import deepcopy
from torch.distributed.fsdp import fully_shard

for block in model.blocks:
    fully_shard(block)
teacher = deepcopy(model).eval()  # expect: FSDP020
""",
    )
    requires = (("fully_shard",), ("deepcopy", "AveragedModel", "ModelEma"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("AssertionError",),
        message=r"FSDP does not support deepcopy",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for copy in trace.calls(*_COPIERS):
                position, keyword = _COPIERS[copy.qname or ""]
                value = copy.arg(position, keyword)
                if value is None or may_be_wrapper(value):
                    continue  # DDP / FSDP1 wrappers copy (FSDP1 has its own checks)
                for module in refs(value):
                    shard = trace.holds_fsdp_module(module, copy)
                    if shard:
                        name = canonical(module).text
                        at, related = facts.sharded_elsewhere(name, shard, copy.node)
                        copier = (copy.qname or "").rsplit(".", 1)[-1]
                        how = "" if copier == "deepcopy" else f" (`{copier}` deepcopies the module it is given)"
                        yield Finding(
                            copy.node,
                            f"`{name}` is (or holds) a module sharded with `fully_shard`{at}, which cannot be "
                            f"deepcopied{how}: `AssertionError: FSDP does not support deepcopy`",
                            related=related,
                        )
                        break
