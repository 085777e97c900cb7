from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Derived,
    Event,
    ObjKind,
    Params,
    Ref,
    Value,
    canonical,
    const,
    may_overlap,
    options,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

CPU_OFFLOAD = f"{apis.FSDP}.CPUOffloadPolicy"
INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
# Calls that compute a norm over the gradients: a DTensor reduction, an all-reduce on their (CPU) device.
NORMS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grad.get_total_norm",
    }
)


class OffloadWithNcclOnlyGroup(Rule):
    code = "FSDP037"
    name = "offload-with-nccl-only-group"
    summary = "gradient norm of CPU-offloaded parameters with an NCCL-only process group"
    hint = (
        'give the process group a CPU backend too, `init_process_group("cuda:nccl,cpu:gloo")`, or leave the '
        "backend out (torch then sets up both)"
    )
    failure = "`RuntimeError: No backend type associated with device type cpu` at the first clipping (CUDA only)"
    docs = """
## What it does
Flags `clip_grad_norm_(...)` / `get_total_norm(...)` over the parameters (or gradients) of a module
sharded with `fully_shard(..., offload_policy=CPUOffloadPolicy())` (the policy on every path), in a
file whose process group is created NCCL-only: `init_process_group("nccl")`, also
`init_process_group("nccl" if cuda else "gloo")` (NCCL-only on every CUDA run). Not flagged: a
backend string with a CPU backend (`"cuda:nccl,cpu:gloo"`), no backend (torch sets up gloo for CPU
and NCCL for CUDA), `"gloo"` alone, a backend from a config or computed on some path (torchtune's
`get_distributed_backend(device, offload_ops_to_cpu=cpu_offload)` returns `"nccl"`, or
`"cuda:nccl,cpu:gloo"` when offloading), clipping a module sharded without offloading, and
`clip_grad_value_` (element-wise: no collective).

## Why is this bad?
With `CPUOffloadPolicy` the reduced gradients are DTensor shards on the CPU. The total norm of
DTensors is a DTensor reduction: each rank's partial norm is all-reduced over the mesh on the
tensors' device, the CPU, and an NCCL-only process group has no backend for CPU tensors:
`RuntimeError: No backend type associated with device type cpu` at the first clipping, after
the first forward and backward (pytorch/pytorch#148532, torchtune#1977 fixed in torchtune#2108,
axolotl#3058, slime#847). The failure needs CUDA and NCCL: on a CPU-only machine gloo serves
every tensor, so `confirm` reports this rule's fixtures as not runnable there; the static check is
tested by its style cases. Not observed here (no GPU in this session).

Use instead:

```python
dist.init_process_group("cuda:nccl,cpu:gloo")
```

## Known problems
The process group and the clipping are related per file: a group created NCCL-only in another
module of the project is not seen, and a file that creates one group NCCL-only for another purpose
is taken as the training's. Other DTensor reductions of the CPU gradients (`p.grad.full_tensor()`,
a hand-written norm) fail the same way and are not flagged.
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

dist.init_process_group("cuda:nccl,cpu:gloo")
fully_shard(model, offload_policy=CPUOffloadPolicy())
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""",
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("nccl")
fully_shard(model)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""",
    )
    invalid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

dist.init_process_group("nccl")
fully_shard(model, offload_policy=CPUOffloadPolicy())
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: FSDP037
""",
    )
    requires = (("CPUOffloadPolicy",), ("nccl",), ("clip_grad_norm_", "get_total_norm"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("RuntimeError",),
        message=r"No backend type associated with device type cpu",
        min_gpus=1,
        min_ranks=2,  # on one rank DTensor's reduction of the norm is a shortcut: no collective, no error
        note="needs a CUDA device and NCCL",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        inits = [event for trace in facts.traces for event in trace.calls(INIT_PROCESS_GROUP) if _nccl_only(event)]
        if not inits:
            return
        seen: set[int] = set()
        for trace in facts.traces:
            for norm in trace.calls(*NORMS):
                shard = _offloaded_source(trace, norm)
                if shard is None or id(norm.node) in seen:
                    continue
                seen.add(id(norm.node))
                init = inits[0]
                yield Finding(
                    norm.node,
                    "the gradient norm of parameters sharded with `CPUOffloadPolicy` "
                    f"({facts.where(shard.node, norm.node)}) is all-reduced on the CPU, and the process group "
                    f"({facts.where(init.node, norm.node)}) is NCCL-only: `RuntimeError: No backend type "
                    "associated with device type cpu`",
                    related=((shard.node, "sharded with CPU offloading here"), (init.node, "NCCL-only process group")),
                )


def _nccl_only(init: Event) -> bool:
    """A backend that is NCCL alone on some path, and a single backend on every other
    (``"nccl"``; ``"nccl" if cuda else "gloo"``: NCCL-only on every CUDA run). A backend computed on
    some path (torchtune's ``get_distributed_backend(device, offload_ops_to_cpu=...)``: ``"nccl"``,
    or ``"cuda:nccl,cpu:gloo"`` when offloading) or a per-device string on another may be the fix."""
    backend = init.arg(0, "backend")
    if backend is None:
        return False
    found = options(backend)
    if not all(isinstance(option, Const) and isinstance(option.value, str) for option in found):
        return False
    names = [str(const(option)).strip().lower() for option in found]
    return "nccl" in names and not any(":" in name or "," in name for name in names)


def _offloads(policy: Value | None) -> bool:
    """Is the policy a ``CPUOffloadPolicy(...)`` on every path?"""
    if policy is None:
        return False
    return all(
        isinstance(option, Ref)
        and not option.path
        and option.root.kind is ObjKind.NEW
        and option.root.qname == CPU_OFFLOAD
        for option in options(policy)
    )


def _offloaded_source(trace: Trace, norm: Event) -> Event | None:
    """The ``fully_shard`` with CPU offloading, before ``norm``, of a module whose parameters (or
    gradients) ``norm`` reads."""
    modules = [canonical(ref) for ref in _parameter_owners(norm.arg(0, "parameters"))]
    if not modules:
        modules = [canonical(ref) for ref in _parameter_owners(norm.arg(0, "tensors"))]
    for shard in trace.shards:
        if shard.index >= norm.index or shard.exclusive_with(norm):
            continue
        if not _offloads(shard.kwargs.get("offload_policy")):
            continue
        if any(may_overlap(module, canonical(target)) for module in modules for target in shard.targets):
            return shard
    return None


def _parameter_owners(value: Value | None) -> Iterator[Ref]:
    if value is None:
        return
    for item in walk_contents(value):
        params = item if isinstance(item, Params) else item.params if isinstance(item, Derived) else None
        if params is not None:
            yield from (source.ref for source in params.sources)
