from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Loaded, Obj, ObjKind, StateDict, Value, refs, report_node, walk_contents
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class LoadPlainOptimizerState(Rule):
    code = "FSDP021"
    name = "load-plain-optimizer-state"
    summary = (
        "`optimizer.load_state_dict` of a single-process (plain-tensor) state into an optimizer over sharded parameters"
    )
    hint = (
        "`set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))` "
        "with a full, FQN-keyed optimizer state (e.g. from `get_optimizer_state_dict(..., full_state_dict=True)`)"
    )
    failure = "the load succeeds; the first `step()` fails with `RuntimeError: ... got mixed torch.Tensor and DTensor`"
    docs = """
## What it does
Flags `optimizer.load_state_dict(state)` for an optimizer built over sharded (DTensor) parameters
when `state` is single-process state: read with `torch.load` from one file, or taken from an
optimizer over unsharded parameters. Loading what the same sharded setup saved per rank (the
path varies with the rank) is not flagged.

## Where it is reported
At the `load_state_dict` when the function that loads also reads the state (a resume helper is
wrong on its own); when a helper loads whatever it is given, at the call that hands it the
single-process state, in the innermost function that both obtains it and loads.

## Why is this bad?
The optimizer state of a single-process run holds plain tensors (`exp_avg`, `exp_avg_sq`), keyed
and shaped for the unsharded parameters. `load_state_dict` accepts it without complaint; the first
step then mixes them with the DTensor parameters. Observed with torch 2.13 (AdamW):
`RuntimeError: aten.lerp_.Scalar got mixed torch.Tensor and DTensor` at `opt.step()`.
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
optimizer.load_state_dict(torch.load(f"optim_rank{dist.get_rank()}.pt"))
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
warmup = torch.optim.AdamW(model.parameters(), lr=1e-3)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
optimizer.load_state_dict(warmup.state_dict())
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
optimizer.load_state_dict(torch.load("optim_single_gpu.pt"))  # expect: FSDP021
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

reference = Model()
reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
optimizer.load_state_dict(reference_optimizer.state_dict())  # expect: FSDP021
""",
    )
    requires = (("fully_shard",), ("load_state_dict",))
    signature = RuntimeSignature(
        evidence="exception", exception=("RuntimeError",), message=r"mixed torch\.Tensor and DTensor"
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for load in trace.methods("load_state_dict"):
                state = load.arg(0, "state_dict")
                if state is None or not any(trace.sharded_optimizer(ref, load) for ref in refs(load.receiver)):
                    continue
                plain = _single_process(trace, state)
                if plain is not None:
                    source = trace.obtained(plain, load)
                    yield Finding(
                        report_node(load, source) if source is not None else load.node,
                        "this optimizer steps sharded (DTensor) parameters but loads single-process, plain-tensor "
                        "state: its first `step()` fails with `... mixed torch.Tensor and DTensor`; use "
                        "`set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))`",
                    )


def _single_process(trace: Trace, state) -> Value | None:
    """The single-process state (file contents, or a plain optimizer's state dict) ``state`` may be."""
    for value in walk_contents(state):
        if isinstance(value, Loaded) and not value.per_rank:
            return value
        if isinstance(value, StateDict) and isinstance(value.owner, Obj) and value.owner.kind is ObjKind.OPTIMIZER:
            if not trace.optimizes_sharded(value.owner):
                return value
    return None
