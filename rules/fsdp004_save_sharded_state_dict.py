from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, EventKind, RankDep, Ref, StateDict, options, report_node, walk_contents
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class SaveShardedStateDict(Rule):
    code = "FSDP004"
    name = "torch-save-sharded-state-dict"
    summary = "`torch.save` of a sharded (DTensor) state dict: the file holds only this rank's shards"
    hint = (
        "save with DCP (`dcp.save`) on all ranks, or gather a full state dict on all ranks with "
        "`get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))` "
        "and save that on rank 0"
    )
    failure = "silent: the checkpoint holds half of every parameter; loading it elsewhere fails"
    docs = """
## What it does
Flags `torch.save` of `m.state_dict()` or `opt.state_dict()` where `m` is sharded with
`fully_shard` (or `opt` optimizes a sharded module), whether passed directly, inside a dict or
list, or through a variable; also `get_model_state_dict`/`get_state_dict` results taken without
`StateDictOptions(full_state_dict=True)`. Not flagged: full state dicts, values mapped through
`.full_tensor()` (into a new dict, or stored back: `sd[k] = v.full_tensor()` over its items),
DCP (`dcp.save`), and deliberate per-rank shard files (the path varies with the rank).

## Where it is reported
At the `torch.save` when the function that saves also takes the state dict (a `save_checkpoint(model)`
helper is wrong on its own); when a helper saves whatever it is given (`save(obj, path)`), at the
call that hands it the sharded state dict, in the innermost function that runs both.

## Why is this bad?
After `fully_shard`, `state_dict()` returns DTensors holding only the local shard. The save is
silent and `torch.load` of the file even succeeds, but the file holds half of every parameter
(16 of 32 rows of a (32, 16) embedding with 2 ranks). Loading it into a plain model fails later,
often in another job: `RuntimeError: Error(s) in loading state_dict ... got mixed torch.Tensor
and DTensor`.
"""
    valid = (
        """
import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(model)
state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if rank == 0:
    torch.save(state, "model.pt")
""",
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
torch.save(model.state_dict(), f"shard_{dist.get_rank()}.pt")
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
sharded = optimizer.state_dict()
full = {key: {k: v.full_tensor() for k, v in state.items()} for key, state in sharded["state"].items()}
if rank == 0:
    # param_groups holds hyperparameters and parameter ids, no tensor
    torch.save({"param_groups": sharded["param_groups"], "state": full}, "optim.pt")
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
checkpoint = {}
checkpoint.update({"model": model.state_dict(), "seed": 0})
# the seed merged beside the state dict, not the state dict
torch.save({"seed": checkpoint["seed"]}, "progress.pt")
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
if rank == 0:
    torch.save({"model": model.state_dict(), "optim": optimizer.state_dict()}, "ckpt.pt")  # expect: FSDP004
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
sharded = optimizer.state_dict()
if rank == 0:
    torch.save({"param_groups": sharded["param_groups"], "state": sharded["state"]}, "optim.pt")  # expect: FSDP004
""",
    )
    requires = (("fully_shard",), ("save",), ("state_dict",))
    signature = RuntimeSignature(
        evidence="dtensor_save",
        note="torch.save from user code writes an object that holds DTensors, to the same path on every rank",
        min_ranks=2,  # with one rank the shard is the whole tensor: the file is complete
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for save in trace.calls(apis.TORCH_SAVE):
                target = save.arg(1, "f")
                if target is not None and any(isinstance(v, RankDep) for v in walk_contents(target)):
                    continue  # every rank writes its own file: deliberate sharded checkpoint
                saved = save.arg(0, "obj")
                for value in walk_contents(saved) if saved is not None else ():
                    if (
                        isinstance(value, StateDict)
                        and value.full is False
                        and not _gathered_in_place(trace, value, save)
                    ):
                        reported = report_node(save, trace.obtained(value, save) or _at(trace, value.at))
                        owner = _sharded_owner(facts, trace, value, reported)
                        if owner:
                            message, related = owner
                            yield Finding(
                                reported,
                                f"`torch.save` of the state dict of {message}: the file holds DTensors with only "
                                "this rank's shard of every parameter",
                                related=related,
                            )
                            break


def _sharded_owner(facts: FileFacts, trace: Trace, state: StateDict, reported: cst.CSTNode) -> tuple[str, tuple] | None:
    """A description of the state dict's owner if it held DTensors when it was taken, and where
    it was sharded when that is in another file than the finding (at ``reported``)."""
    owner = state.owner if isinstance(state.owner, Ref) else Ref(state.owner)
    if trace.sharded_optimizer(owner):
        return "an optimizer over sharded parameters", ()
    shard = isinstance(state.owner, Ref) and trace.sharded_overlap(state.owner, _at(trace, state.at))
    if shard:
        name = facts.name_as_written(state.owner, reported)
        at, related = facts.sharded_elsewhere(name, shard, reported)
        return f"`{name}`, which is sharded{at}", related
    return None


def _gathered_in_place(trace: Trace, state: StateDict, save: Event) -> bool:
    """Were the state dict's items stored back gathered before ``save`` (``sd[k] = v.full_tensor()``
    in a loop over its items)?"""
    return any(
        state in options(store.receiver)
        and any(isinstance(v, StateDict) and v.full and v.owner == state.owner for v in options(store.args[0]))
        for store in trace.of_kind(EventKind.STORE)
        if store.index < save.index and store.receiver is not None and store.args
    )


def _at(trace: Trace, index: int) -> Event:
    return trace.events[min(index, len(trace.events) - 1)]
