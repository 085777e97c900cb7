from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, EventKind, Ref, canonical, is_exact, may_be_same, refs, report_node
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

CHECKPOINT = "torch.utils.checkpoint.checkpoint"
# how the analysis names `torch.autograd.backward` / `.grad` (also the plain spellings, for other resolutions)
BACKWARDS = ("torch.autograd.backward", "torch.autograd.grad", "torch.backward", "torch.grad")


class ReentrantCheckpointOfShardedBlock(Rule):
    code = "FSDP036"
    name = "reentrant-checkpoint-of-sharded-block"
    summary = (
        "a block already sharded with `fully_shard` runs inside a reentrant `checkpoint` more than once "
        "before one backward: its gradients silently miss some of the runs"
    )
    hint = (
        "checkpoint the block before sharding it (`checkpoint_wrapper(block)` or "
        "`apply_activation_checkpointing(model)`, then `fully_shard(block)`), or pass `use_reentrant=False`"
    )
    failure = (
        "silent: the sharded block's gradients miss the contribution of some of the forwards (the last one "
        "of two) run before the backward"
    )
    docs = """
## What it does
Flags `torch.utils.checkpoint.checkpoint(block, ...)` where `block` was already given to
`fully_shard` (activation checkpointing wrapped around the FSDP module, the AC(FSDP) order),
the checkpoint is reentrant (`use_reentrant=True`, or the argument left out: torch 2.13 still
defaults to the reentrant variant, with a warning), and the same block runs through that
checkpoint two or more times before one `backward()` (two forwards of the model before one loss,
as a pairwise/DPO loss or a contrastive pair does, or one block called twice in a forward).
Not flagged: `use_reentrant=False`; a checkpoint applied before `fully_shard` (the FSDP(AC)
order: `checkpoint_wrapper(block)` / `apply_activation_checkpointing(model)`, then
`fully_shard(block)`); a checkpoint of a module that is not sharded itself, or of a function; one
forward per backward (gradient accumulation included).

## Why is this bad?
The reentrant checkpoint runs the block without autograd in forward, and in backward recomputes
it and runs a nested backward through it. For an FSDP module each recompute runs FSDP's forward
hooks again and its gradient reduce-scatter inside that nested backward. Observed with torch
2.13 (CPU/gloo, 2 ranks): with two forwards before one backward, the sharded blocks' gradients
equal those of the first forward alone (the second forward's contribution is lost; the
embedding and head, sharded with the root, are right), and the blocks are left unsharded after
the backward, so the next forward reuses their parameters from before the optimizer step (the
harness also records FSDP044's `stale_unsharded_params` there); a block applied twice in one
forward loses part of its gradient the same way. Nothing raises; with one forward per backward, or `use_reentrant=False`, or the checkpoint inside the
sharded block, the gradients match an unsharded run exactly. The harness's probe sees the cause:
a reentrant checkpoint ran an FSDP2 module twice before the backward that recomputes it.

Use instead:

```python
for block in model.layers:
    fully_shard(checkpoint_wrapper(block))   # or apply_activation_checkpointing(model, ...) first
fully_shard(model)
```

## Known problems
Only `torch.utils.checkpoint.checkpoint` given the sharded module itself is checked;
`checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.REENTRANT)` or
`apply_activation_checkpointing` applied after `fully_shard`, and HF's
`gradient_checkpointing_enable()` after sharding, are not (yet) reported. The two forwards must
be visible in one flow: forwards collected in a loop and backpropagated once are not counted.
The non-reentrant AC(FSDP) order trains correctly on torch 2.13; on older torch it was reported
to fail with a bf16 `MixedPrecisionPolicy` (`CheckpointError: Recomputed values ... have
different metadata`, fixed by pytorch/pytorch#182580) and with nested `fully_shard` plus two
forwards (`got mixed torch.Tensor and DTensor`, pytorch/pytorch#153354, fixed by #171779); those
versions were not checked here and those shapes are not reported.
"""
    valid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x

model = Model()
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
loss = model(a).sum() - model(b).sum()
loss.backward()
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=True)
        return x

model = Model()
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
for batch in batches:
    model(batch).sum().backward()
""",
    )
    invalid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=True)  # expect: FSDP036
        return x

model = Model()
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
loss = model(chosen).sum() - model(rejected).sum()
loss.backward()
""",
    )
    requires = (("fully_shard",), ("checkpoint",), ("backward", "autograd"))
    signature = RuntimeSignature(
        evidence="reentrant_checkpoint_of_sharded",
        note="silent wrong gradients; the probe sees the cause (a sharded module run twice by a reentrant checkpoint)",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        for trace in facts.traces:
            calls = [(event, block, shard) for event, block, shard in _checkpoints(trace)]
            for position, (first, block, shard) in enumerate(calls):
                if id(first.node) in reported:
                    continue
                second = _runs_again(trace, first, block, calls[position + 1 :])
                if second is None:
                    continue
                reported.add(id(first.node))
                again = report_node(second, first)  # where the second run departs from the first
                related = [(again, f"`{block.text}` runs through the checkpoint again here, before the backward")]
                if isinstance(shard, Event):
                    related.append((shard.node, f"`{block.text}` is sharded here"))
                yield Finding(
                    first.node,
                    f"`{block.text}` is already sharded with `fully_shard` and runs inside this reentrant "
                    f"`checkpoint` again (at {facts.where(again, first.node)}) before one backward: each "
                    "recompute runs FSDP's hooks in its own nested backward, and the block's gradients silently "
                    "miss part of the passes",
                    related=tuple(related),
                )


def _checkpoints(trace: Trace) -> Iterator[tuple[Event, Ref, Event | bool]]:
    """Reentrant ``checkpoint(block, ...)`` calls with grad enabled whose block is itself sharded by then."""
    for event in trace.calls(CHECKPOINT):
        if event.ctx.no_grad or not _reentrant(event):
            continue
        function = event.arg(0, "function")
        if function is None:
            continue
        for ref in refs(function):
            shard = trace.is_fsdp_module(ref, event)
            if shard:
                yield event, canonical(ref), shard
                break


def _reentrant(event: Event) -> bool:
    """``use_reentrant=True``, or left out (torch 2.13's default); unknown values are not."""
    if "use_reentrant" in event.kwargs:
        value = event.kwargs["use_reentrant"]
        return isinstance(value, Const) and value.value is True
    return not event.may_pass("use_reentrant")


def _runs_again(trace: Trace, first: Event, block: Ref, later: list[tuple[Event, Ref, Event | bool]]) -> Event | None:
    """A later checkpoint of the same block with no backward between the two, then a backward."""
    backwards = [e for e in trace.events if e.index > first.index and _is_backward(e) and not e.exclusive_with(first)]
    for second, other, _ in later:
        if not _same_block(first, block, second, other) or second.exclusive_with(first):
            continue
        if any(b.index < second.index for b in backwards):
            return None
        if any(b.index > second.index and not b.exclusive_with(second) for b in backwards):
            return second
    return None


def _same_block(first: Event, block: Ref, second: Event, other: Ref) -> bool:
    """The same checkpoint statement run again on the block (a second forward of the model), or one
    module named exactly twice (`checkpoint(self.block, x)` twice in a forward)."""
    if second.node is first.node:
        return may_be_same(block, other)
    return is_exact(block) and block == other


def _is_backward(event: Event) -> bool:
    if event.kind is EventKind.METHOD and event.name == "backward":
        return True
    return event.kind is EventKind.CALL and event.qname in BACKWARDS
