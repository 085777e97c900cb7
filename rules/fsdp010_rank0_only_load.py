from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, EventKind, GuardRanks, Ref, canonical, may_overlap, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

LOAD_METHODS = frozenset({"load_state_dict", "from_pretrained", "load_checkpoint", "load_weights"})
BROADCASTS = frozenset({"torch.distributed.broadcast", "torch.distributed.broadcast_object_list"})


class Rank0OnlyLoad(Rule):
    code = "FSDP010"
    name = "rank0-only-load"
    summary = "weights loaded on rank 0 only, then sharded without a broadcast: FSDP2 has no `sync_module_states`"
    hint = (
        "shard first, then `set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, "
        "broadcast_from_rank0=True))` with the checkpoint read on rank 0; or load it on every rank"
    )
    failure = "silent: each rank keeps its own chunk, so only rank 0's slice of every parameter is pretrained"
    docs = """
## What it does
Flags a checkpoint load (`model.load_state_dict(...)`, `from_pretrained(...)`) that only rank 0
runs (`if rank == 0:`, `is_main_process`, ...) when the model is sharded afterwards with no
broadcast (`dist.broadcast`, `set_model_state_dict(..., broadcast_from_rank0=True)`).
Reported at the statement the rank condition holds, as FSDP007 is: the load itself when the
condition is around it, or the call of a loading helper (right on its own: it loads on every rank
that runs it) that the caller runs on rank 0 only.

## Why is this bad?
This is FSDP1's `sync_module_states=True` habit. FSDP2 has no such option: `fully_shard` keeps, on
each rank, that rank's chunk of the parameters as they are on that rank. Rank 0's chunk comes from
the checkpoint, every other rank's chunk is its random initialisation. Observed with torch 2.13 on
two ranks: 10 of 10 parameters differ from the checkpoint (rows [:16] of the embedding equal it,
rows [16:] are rank 1's random init). Nothing errors; fine-tuning starts from a half-loaded model.
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(model)
state = torch.load("pretrained.pt") if dist.get_rank() == 0 else {}
set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
""",
    )
    invalid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

if dist.get_rank() == 0:
    model.load_state_dict(torch.load("pretrained.pt"))  # expect: FSDP010
fully_shard(model)
""",
    )
    requires = (("fully_shard",), ("load", "from_pretrained"))
    signature = RuntimeSignature(
        evidence="not_loaded",
        note="right after fully_shard, the other ranks' shards are not their chunks of what rank 0 loaded",
        min_ranks=2,  # with one rank there is no other rank to miss the load
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for load in trace.events:
                guard = load.ctx.rank_guard
                if (
                    guard is None
                    or guard.ranks is not GuardRanks.ZERO
                    or load.kind not in (EventKind.METHOD, EventKind.CALL)
                ):
                    continue
                if load.name not in LOAD_METHODS:
                    continue
                for module in _loaded_modules(load):
                    shard = _sharded_later_without_broadcast(trace, load, module)
                    if shard is not None:
                        frames = load.frames()
                        reported = frames[min(guard.depth, len(frames) - 1)]  # the statement the guard holds
                        name = facts.name_as_written(module, reported)
                        yield Finding(
                            reported,
                            f"`{name}` is loaded on rank 0 only and sharded at {facts.where(shard.node, reported)} "
                            "with no broadcast: the other ranks keep their random initialisation",
                            related=((shard.node, f"`{name}` is sharded here"),),
                        )
                        break


def _loaded_modules(load: Event) -> list[Ref]:
    if load.name == "from_pretrained":
        return list(refs(load.result)) if load.result is not None else []
    return list(refs(load.receiver)) if load.receiver is not None else []


def _sharded_later_without_broadcast(trace: Trace, load: Event, module: Ref) -> Event | None:
    module = canonical(module)
    sharded = None
    for event in trace.events[load.index + 1 :]:
        if event.exclusive_with(load):
            continue
        if _broadcasts(event):
            return None
        is_shard = event.kind is EventKind.CALL and event.qname == apis.FULLY_SHARD
        if sharded is None and is_shard and any(may_overlap(canonical(t), module) for t in event.targets):
            sharded = event
    return sharded


def _broadcasts(event: Event) -> bool:
    if event.kind is not EventKind.CALL:
        return False
    if event.qname in BROADCASTS or (event.name or "").endswith("sync_module_states"):
        return True
    if event.qname == apis.SET_MODEL_STATE_DICT:
        for ref in refs(event.kwargs.get("options") or Const(None)):
            creation = ref.root.event
            if creation is not None and creation.kwargs.get("broadcast_from_rank0") == Const(True):
                return True
    return False
