from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.facts import Event, FileFacts, Trace, canonical
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature
from fsdp2_lint.values import Derived, Params, may_overlap, walk_contents

CLIPPING = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grads_with_norm_",
    }
)
NORM_CALLS = frozenset(
    {"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.sqrt", "torch.sum", "builtins.sum"}
)
NORM_METHODS = frozenset({"norm", "sqrt"})
REDUCTIONS = frozenset(
    {
        "torch.distributed.all_reduce",
        "torch.distributed.reduce",
        "torch.distributed.all_gather",
        "torch.distributed.all_gather_into_tensor",
        "torch.distributed.nn.functional.all_reduce",
    }
)


class StaleOrLocalGradNorm(Rule):
    code = "FSDP015"
    name = "stale-or-local-grad-norm"
    summary = "gradient norm/clipping over parameters captured before sharding, or over local shards only"
    hint = (
        "clip `model.parameters()` after sharding: `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` "
        "returns the global norm; a hand-written norm must all-reduce the squared local sums"
    )
    failure = "silent: the norm is 0 (stale list: nothing is clipped) or this rank's local value, not the global one"
    docs = """
## What it does
Flags gradient clipping or a gradient norm that does not see the sharded gradients:
- `clip_grad_norm_(params, ...)` (also `clip_grad_value_`, `get_total_norm`) where `params` was
  captured (`list(model.parameters())`) before the module was sharded;
- a norm built from `p.grad.to_local()` (this rank's shard) and never all-reduced across ranks.

## Why is this bad?
`fully_shard` replaces the parameters: a list captured before holds old tensors that never get a
gradient. Observed with torch 2.13: 0 of 10 of them have grads, the returned norm is 0.000000 (true
norm 0.654236) and nothing is ever clipped. `to_local()` drops the other ranks' shards: the "global"
norm was 0.502250 instead of 0.654236, and differs across ranks, so clipping is wrong and
inconsistent. (`clip_grad_norm_(model.parameters())` after sharding returns the correct global
norm as a replicated DTensor.)
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""",
        """
import torch
import torch.distributed as dist

squares = sum(p.grad.to_local().pow(2).sum() for p in model.parameters())
dist.all_reduce(squares)
norm = squares.sqrt()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

params = list(model.parameters())
fully_shard(model)
torch.nn.utils.clip_grad_norm_(params, 1.0)  # expect: FSDP015
""",
        """
import torch

grad_norm = torch.sqrt(sum(p.grad.to_local().pow(2).sum() for p in model.parameters()))  # expect: FSDP015
""",
    )
    # clipping over a list captured before a `fully_shard`, or a norm of `to_local()` shards
    requires = (("clip_grad", "get_total_norm", "to_local"), ("fully_shard", "to_local"))
    signature = RuntimeSignature(
        evidence="wrong_grad_norm", note="the norm the script computes differs from the true global gradient norm"
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for clip in trace.calls(*CLIPPING):
                stale = _stale_shard(trace, clip)
                if stale is not None:
                    line = facts.position(stale.node).start.line
                    yield Finding(
                        clip.node,
                        f"clips parameters captured before `fully_shard` (line {line}): they never receive "
                        "gradients, so the norm is 0 and nothing is clipped",
                    )
            yield from _local_norms(facts, trace)


def _stale_shard(trace: Trace, clip: Event) -> Event | None:
    params = clip.arg(0, "parameters")
    for option in walk_contents(params) if params is not None else ():
        if not isinstance(option, Params):
            continue
        for source in option.sources:
            if source.captured_at is None:
                continue  # a generator read now: current parameters
            for shard, target in trace.shards_between(source.captured_at, clip.index, clip):
                if may_overlap(target, canonical(source.ref)):
                    return shard
    return None


def _local_norms(facts: FileFacts, trace: Trace) -> Iterator[Finding]:
    """Norms over local gradient shards that are never reduced across ranks (an all-reduce of
    the norm, or of what it is computed from, makes it global). Only the final norm is reported:
    a per-parameter ``.norm()`` that a later norm consumes is part of the same total."""
    norms = [event for event in trace.events if _is_norm(event) and _local(event)]
    if not norms:
        return
    consumed = set().union(*(step for event in norms for step in _input_steps(event)))
    reductions = [event for event in trace.events if event.kind == "call" and event.qname in REDUCTIONS]
    reduced = set().union(*(step for event in reductions for step in _input_steps(event)))
    for event in norms:
        lineage = set().union({event.index}, *_input_steps(event))
        if event.index not in consumed and not lineage & reduced:
            yield Finding(
                event.node,
                "gradient norm over `to_local()` shards only: this is this rank's partial norm, not the global one",
            )


def _input_steps(event: Event) -> Iterator[frozenset[int]]:
    values = (event.receiver, *event.args) if event.receiver is not None else event.args
    for value in values:
        for option in walk_contents(value):
            if isinstance(option, Derived):
                yield option.steps


def _is_norm(event: Event) -> bool:
    if event.kind == "call":
        return event.qname in NORM_CALLS
    return event.kind == "method" and event.name in NORM_METHODS


def _local(event: Event) -> bool:
    values = (event.receiver, *event.args) if event.receiver is not None else event.args
    return any(isinstance(v, Derived) and "local" in v.tags for value in values for v in walk_contents(value))
