from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, refs
from fsdp2_lint.analysis.trace import Trace, fsdp2_model
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class Fsdp1SummonFullParams(Rule):
    code = "FSDP016"
    name = "fsdp1-summon-full-params"
    summary = "`FSDP.summon_full_params` does nothing on a `fully_shard`ed model: parameters stay sharded"
    hint = "use `model.unshard()` ... `model.reshard()` on the FSDP modules, or `p.full_tensor()` to read a parameter"
    failure = "silent: inside the context the parameters are still DTensor shards"
    docs = """
## What it does
Flags `FSDP.summon_full_params(model)` (FSDP1's `FullyShardedDataParallel.summon_full_params`)
where `model` is sharded with `fully_shard`.

## Why is this bad?
The context manager only acts on FSDP1 instances. On an FSDP2 model it is a silent no-op: observed
with torch 2.13, inside it a parameter is still a `DTensor` (global shape (16, 16), local (8, 16)),
with no error and no warning, so code that reads or edits "full" parameters there works on shards.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
weight = model.layers[0].weight.full_tensor()
""",
        """
from contextlib import nullcontext
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
from utils import fsdp_version


def lora_weights(model):
    is_fsdp1 = fsdp_version(model) == 1  # 1: FSDP1 wrapper, 2: FSDP2 module
    with FSDP.summon_full_params(model) if is_fsdp1 else nullcontext():
        weights = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    if fsdp_version(model) != 2:
        with FSDP.summon_full_params(model, writeback=True):
            merge(model)
    return weights


fully_shard(model)
lora_weights(model)
""",
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard


def lora_weights(model):  # FSDP1 or FSDP2: on FSDP2 the context is a no-op and full_tensor() gathers
    with FSDP.summon_full_params(model, writeback=False):
        return {n: p.full_tensor() if hasattr(p, "full_tensor") else p for n, p in model.named_parameters()}


fully_shard(model)
lora_weights(model)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard

fully_shard(model)
with FSDP.summon_full_params(model):  # expect: FSDP016
    weight = model.layers[0].weight.clone()
""",
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
from utils import fsdp_version


def merge_lora(model):
    version = fsdp_version(model)
    if version == 1:
        with FSDP.summon_full_params(model, writeback=True):
            merge(model)
    elif version == 2:
        with FSDP.summon_full_params(model, writeback=True):  # expect: FSDP016
            merge(model)


fully_shard(model)
merge_lora(model)
""",
    )
    requires = (("fully_shard",), ("summon_full_params",))
    signature = RuntimeSignature(
        evidence="still_sharded",
        note="inside the context the module's parameters are still DTensor shards",
        min_ranks=2,  # with one rank a shard is the whole parameter
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for call in trace.calls(f"{apis.FSDP1}.summon_full_params"):
                if fsdp2_model(trace, call, call.arg(0, "module")) and not _gathers_inside(trace, call):
                    yield Finding(call.node)


def _gathers_inside(trace: Trace, call: Event) -> bool:
    """Does code inside the context gather DTensor parameters itself (``p.full_tensor()``)? It was
    written for parameters that stay sharded, as an FSDP2 model's do: the context is a no-op there."""
    context = [ref.root for ref in refs(call.result)] if call.result is not None else []
    return any(
        any(ref.root in context for manager in event.ctx.managers for ref in refs(manager))
        for event in trace.methods("full_tensor")
    )
