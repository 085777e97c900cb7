from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.trace import fsdp2_model
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

STATE_DICT_TYPE_CALLS = (f"{apis.FSDP1}.state_dict_type", f"{apis.FSDP1}.set_state_dict_type")


class Fsdp1StateDictType(Rule):
    code = "FSDP009"
    name = "fsdp1-state-dict-type"
    summary = "FSDP1's state-dict-type API on a `fully_shard`ed model does nothing: `state_dict()` stays sharded"
    hint = (
        "take the state dict with `get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, "
        "cpu_offload=True))` on every rank (or save with DCP)"
    )
    failure = (
        "silent: `state_dict()` still returns DTensor shards and the body runs (writing them); the context form "
        "only raises `KeyError: None` on exit"
    )
    docs = """
## What it does
Flags `FSDP.state_dict_type(model, ...)` and `FSDP.set_state_dict_type(model, ...)` (with their
`StateDictType.*`, `FullStateDictConfig`, `ShardedStateDictConfig` arguments) where `model` is
sharded with `fully_shard`. An FSDP1 model (wrapped in `FullyShardedDataParallel`) is not flagged.

## Why is this bad?
These APIs only find FSDP1 instances; on an FSDP2 model they are no-ops. Observed with torch 2.13:
inside `with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, ...)`, `model.state_dict()`
still returns DTensor shards and the body (typically the `torch.save`) runs, writing half of every
parameter; only on exit does it raise `KeyError: None`. `FSDP.set_state_dict_type(...)` is fully
silent. Both print a deprecation `FutureWarning`.
"""
    valid = (
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType

model = FSDP(model)
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
    state = model.state_dict()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import FullStateDictConfig, FullyShardedDataParallel as FSDP, StateDictType, fully_shard

fully_shard(model)
config = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):  # expect: FSDP009
    state = model.state_dict()
""",
    )
    requires = (("fully_shard",), ("state_dict_type",))
    signature = RuntimeSignature(
        evidence="state_dict_type_ignored",
        exception=("KeyError",),
        message=r"None",
        note="state_dict() returns DTensors after set_state_dict_type(FULL_STATE_DICT); the context form also "
        "raises KeyError: None on exit, after its body ran",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for call in trace.calls(*STATE_DICT_TYPE_CALLS):
                if fsdp2_model(trace, call, call.arg(0, "module")):
                    yield Finding(call.node)
