from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Derived, Event, GradTag, Params, canonical, report_node, walk_contents
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# The collectives a DDP-style gradient sync runs (their first argument: the tensor or tensors).
REDUCTIONS = {
    "torch.distributed.all_reduce": "tensor",
    "torch.distributed.all_reduce_coalesced": "tensors",
    "torch.distributed.reduce": "tensor",
    "torch.distributed.nn.functional.all_reduce": "tensor",
    "torch.distributed.nn.all_reduce": "tensor",
}
# What is no DTensor any more: this rank's shard, or the gathered full value.
PLAIN = frozenset({GradTag.LOCAL, GradTag.FULL})


class ManualGradientSync(Rule):
    code = "FSDP045"
    name = "manual-gradient-sync"
    summary = "DDP-style manual gradient all-reduce over the gradients of a `fully_shard`ed model"
    hint = (
        "delete the manual sync: FSDP2's backward already reduce-scatters and averages the gradients "
        "across the mesh (`set_gradient_divide_factor()` / `set_reduce_op()` change how)"
    )
    failure = (
        "`NotImplementedError: Operator c10d.allreduce_.default does not have a sharding strategy registered` "
        "at the first all-reduce (older torch: `found no DeviceMesh from dtensor args for c10d::allreduce_`)"
    )
    docs = """
## What it does
Flags a collective that reduces gradients by hand — `dist.all_reduce(p.grad)`,
`dist.all_reduce(p.grad.data)`, `dist.all_reduce_coalesced(grads)`, `dist.reduce(p.grad, dst)`,
`torch.distributed.nn.functional.all_reduce(...)`, also of a tensor computed from them (a
flattened buffer, a `.detach()`) — where the parameters belong to a module sharded with
`fully_shard` (the model, a module inside it, or one around it) when the collective runs. The
usual shape is DDP's recipe copied over: `for p in model.parameters(): dist.all_reduce(p.grad);
p.grad /= world_size` after `loss.backward()`, often in a helper (`average_gradients(model)`).

Not flagged: the same loop over a model that is not sharded (plain or `DistributedDataParallel`),
over the parameters of a submodule that nothing shards, all-reduces of a loss or a metric, and
reductions of `p.grad.to_local()` (this rank's shard: a local norm that is then all-reduced) or of
`p.grad.full_tensor()` (a plain gathered copy, e.g. for logging).

## Where it is reported
At the collective when the code that runs it chose the model (module-level code, a method that
reads `self.model`); a helper handed the model by its caller (`average_gradients(model)`) is right
for an unsharded model, so the finding goes at the caller's call of the helper, in the innermost
function that also got the model.

## Why is this bad?
After `backward()`, an FSDP2 model's gradients are DTensors that FSDP already reduce-scattered and
averaged across the data-parallel ranks: each rank holds its shard of the averaged gradient. A
manual sync is redundant, and c10d's collectives do not accept DTensors. Observed with torch 2.13
on CPU/gloo: `dist.all_reduce(p.grad)` (also on `p.grad.data`, `p.grad.detach()`, a flattened
buffer, with `async_op=True`, and `dist.reduce`) raises `NotImplementedError: Operator
c10d.allreduce_.default does not have a sharding strategy registered.`, and
`dist.all_reduce_coalesced` raises `RuntimeError: c10d.allreduce_coalesced_.default`. Older torch
fails with `found no DeviceMesh from dtensor args for c10d::allreduce_` (an `AssertionError` in
torch's DTensor dispatch; reported as a `RuntimeError` in torchtitan PR #2777; not re-checked here).

Code written for both DDP and FSDP2 that syncs only where `isinstance(p.grad, DTensor)` (or
`isinstance(p, DTensor)`) is false, or skips DTensors with `continue`, is not flagged either.

## Known problems
Working around the error with `dist.all_reduce(p.grad.to_local())` runs without an error and is
silently wrong (it sums different shards of the averaged gradient); it is not flagged, as a
reduction of `to_local()` values is also how a correct global norm is computed.

Two tests of the same setting (`if args.fsdp:` ... `if not args.fsdp:`, `mode == "fsdp2"` ...
`mode == "ddp"`) exclude each other only while the setting provably keeps its value between them:
a store to an attribute, or a call the analysis cannot see into (other than torch's API), between
the two tests makes them unrelated and the sync is reported. A setting copied elsewhere
(`self.fsdp = args.fsdp`) and tested there is not related to the original either. Testing the
model itself (`if not isinstance(model, FSDPModule):`) always works.
"""
    valid = (
        """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model)
loss.backward()
for p in model.parameters():
    dist.all_reduce(p.grad)
""",
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
loss = model(batch).sum()
loss.backward()
dist.all_reduce(loss.detach())
""",
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model.encoder)
loss.backward()
for p in model.head.parameters():
    dist.all_reduce(p.grad)
""",
    )
    invalid = (
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
loss.backward()
for p in model.parameters():
    dist.all_reduce(p.grad)  # expect: FSDP045
    p.grad /= dist.get_world_size()
""",
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


fully_shard(model)
loss.backward()
average_gradients(model)  # expect: FSDP045
""",
    )
    requires = (("fully_shard",), ("reduce",), ("grad",))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("NotImplementedError", "RuntimeError", "AssertionError"),
        message=r"c10d[.:]+(all)?reduce",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for qname, keyword in REDUCTIONS.items():
                for event in trace.calls(qname):
                    found = _sharded_gradients(trace, event, keyword)
                    if found is None:
                        continue
                    shard, module = found
                    cause = trace.obtained(module, event)
                    reported = report_node(event, cause) if cause is not None else event.node
                    name = facts.name_as_written(module, reported)
                    at, related = facts.sharded_elsewhere(name, shard, reported)
                    yield Finding(
                        reported,
                        f"gradients of `{name}`, sharded with `fully_shard`{at}, reduced by hand: FSDP2's "
                        "backward already averaged them across ranks, and they are DTensors, which c10d "
                        "collectives reject",
                        related=related,
                    )


def _sharded_gradients(trace: Trace, event: Event, keyword: str) -> tuple[Event | bool, object] | None:
    """The shard, and the module, that make the reduced tensor a DTensor gradient at ``event``."""
    value = event.arg(0, keyword)
    for option in walk_contents(value) if value is not None else ():
        if not isinstance(option, Derived) or option.params is None or option.tags & PLAIN:
            continue
        if _proved_plain(event, option):
            continue  # the arm of `isinstance(p.grad, DTensor)` (or of `p`) where it is not one
        for source in sorted(option.params.sources, key=lambda s: canonical(s.ref).text):
            shard = trace.sharded_overlap(source.ref, event)
            if shard:
                return shard, source.ref
    return None


def _proved_plain(event: Event, gradient: Derived) -> bool:
    """Does a type test the collective runs under prove the gradient, or its parameter, no DTensor?"""
    sources = gradient.params.sources if gradient.params is not None else frozenset()
    for value in event.ctx.not_dtensor:
        for option in walk_contents(value):
            if option == gradient:
                return True
            tested = option.params if isinstance(option, Derived) else option
            if isinstance(tested, Params) and tested.sources & sources:
                return True
    return False
