from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, Ref, StateDict, Value, const, options, refs, report_node
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class ShardedStateDictBroadcastAsFull(Rule):
    code = "FSDP042"
    name = "sharded-state-dict-broadcast-as-full"
    summary = (
        "a sharded (DTensor) state dict given to `set_model_state_dict` with `full_state_dict=True, "
        "broadcast_from_rank0=True`, which broadcasts it from rank 0 as full tensors"
    )
    hint = (
        "gather it first, `get_model_state_dict(src, options=StateDictOptions(full_state_dict=True))`, or load the "
        "shards as they are: `set_model_state_dict(dst, src.state_dict())` with no broadcast"
    )
    failure = (
        "`NotImplementedError: Operator c10d.broadcast_.default does not have a sharding strategy registered` "
        "on rank 0 (the other ranks fail in the broadcast) at the call"
    )
    docs = """
## What it does
Flags `set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True,
broadcast_from_rank0=True))` where `state` is, on every path, the state dict of a sharded model taken
without gathering it: `other.state_dict()` or `get_model_state_dict(other)` after `fully_shard(other)`
(its values are DTensor shards). A typical shape: a sharded reference or EMA model loaded from the
sharded policy model. Not flagged: a state dict gathered with
`get_model_state_dict(src, options=StateDictOptions(full_state_dict=True))`, one taken before
sharding, a loaded file, the sharded state dict loaded without `broadcast_from_rank0`, and options
the analysis cannot read. When the state dict is handed to a loading helper that is right for a full
state dict, the finding is at the caller's call of that helper.

## Why is this bad?
With `broadcast_from_rank0=True`, `set_model_state_dict` treats rank 0's values as the full tensors
and broadcasts each into the other ranks' shards. DTensor shards cannot be broadcast as plain tensors:
observed with torch 2.13 on CPU/gloo, rank 0 raises `NotImplementedError: Operator
c10d.broadcast_.default does not have a sharding strategy registered` at the call and the other
ranks fail in the broadcast that lost its partner (pytorch/pytorch#164843 reports an
`AssertionError: found no DeviceMesh from dtensor args for c10d.broadcast_.default!` on other
versions). The same state dict without `broadcast_from_rank0` loads shard for shard and works.

Use instead:

```python
full = get_model_state_dict(policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
set_model_state_dict(reference, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
```

## Known problems
A load with `broadcast_from_rank0=True` into a model still on the meta device (before `to_empty()`)
is lost silently; that order is FSDP006's (the `to_empty()` that nothing initialises after).
"""
    valid = (
        """
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(policy)
fully_shard(reference)
full = get_model_state_dict(policy, options=StateDictOptions(full_state_dict=True))
set_model_state_dict(reference, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
""",
        """
from torch.distributed.checkpoint.state_dict import set_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(policy)
fully_shard(reference)
set_model_state_dict(reference, policy.state_dict())
""",
    )
    invalid = (
        """
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(policy)
fully_shard(reference)
options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
set_model_state_dict(reference, policy.state_dict(), options=options)  # expect: FSDP042
""",
    )
    requires = (("fully_shard",), ("set_model_state_dict",), ("broadcast_from_rank0",))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("NotImplementedError", "AssertionError"),
        message=r"c10d\.broadcast_\.default",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        for trace in facts.traces:
            for load in trace.calls(apis.SET_MODEL_STATE_DICT):
                state = load.arg(1, "model_state_dict")
                if state is None or not _broadcasts_full(load.kwargs.get("options")):
                    continue
                sharded = _sharded_state_dict(trace, state)
                if sharded is None:
                    continue
                source = trace.obtained(sharded, load)
                node = report_node(load, source) if source is not None else load.node
                if id(node) in reported:
                    continue
                reported.add(id(node))
                taken = f"`{facts.code(source.node)}`" if source is not None else "the state dict"
                yield Finding(
                    node,
                    f"{taken} is a sharded model's: it holds DTensor shards, and `broadcast_from_rank0=True` "
                    "broadcasts rank 0's values as full tensors: `NotImplementedError: Operator "
                    "c10d.broadcast_.default does not have a sharding strategy registered`",
                )


def _broadcasts_full(value: Value | None) -> bool:
    """Is the value a `StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)`?"""
    made = [ref.root.event for ref in refs(value)] if value is not None else []
    return bool(made) and all(
        event is not None
        and event.qname == apis.STATE_DICT_OPTIONS
        and const(event.kwargs.get("full_state_dict")) is True
        and const(event.kwargs.get("broadcast_from_rank0")) is True
        for event in made
    )


def _sharded_state_dict(trace: Trace, state: Value) -> StateDict | None:
    """The state dict when, on every path, it is a sharded model's, taken after sharding without gathering."""
    found = list(options(state))
    if found and all(_of_sharded(trace, option) for option in found):
        return found[0]  # type: ignore[return-value]
    return None


def _of_sharded(trace: Trace, value: Value) -> bool:
    if not (isinstance(value, StateDict) and value.full is False and isinstance(value.owner, Ref)):
        return False
    taken: Event = trace.events[value.at]
    return bool(trace.sharded_overlap(value.owner, taken))
