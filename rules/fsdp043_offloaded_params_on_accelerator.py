from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, ObjKind, Ref, Value, canonical, const, may_overlap, options, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

CPU_OFFLOAD = f"{apis.FSDP}.CPUOffloadPolicy"
# Device types that are not the CPU the offloaded shards must stay on.
ACCELERATORS = frozenset({"cuda", "xpu", "npu", "hpu", "mtia"})


class OffloadedParamsOnAccelerator(Rule):
    code = "FSDP043"
    name = "offloaded-params-on-accelerator"
    summary = "a module sharded with `CPUOffloadPolicy` is moved to the accelerator afterwards"
    hint = (
        'keep it on the CPU: materialise with `to_empty(device="cpu")` (or load a CPU state dict) and drop the '
        '`.cuda()` / `.to("cuda")` after `fully_shard`: FSDP2 moves each group\'s parameters to the GPU for '
        "forward and backward itself"
    )
    failure = (
        "`RuntimeError: FSDP parameters should be materialized on CPU when enabling CPU offloading` at the first "
        "forward (CUDA only)"
    )
    docs = """
## What it does
Flags a module given to `fully_shard(..., offload_policy=CPUOffloadPolicy())` (the policy on every
path) that is then moved to an accelerator: `model.cuda()`, `model.to("cuda")`,
`model.to(torch.device("cuda", rank))`, `model.to_empty(device="cuda")`, on the sharded module, a
module inside it or one that contains it, after the `fully_shard` call. Not flagged: the same
calls before `fully_shard` (FSDP2 offloads the shards it makes), `to_empty(device="cpu")`,
`.to(torch.bfloat16)`, a device the analysis does not know (`.to(device)` with `device` from a
config), and an offload policy chosen at run time (`CPUOffloadPolicy() if offload else
OffloadPolicy()`).

## Why is this bad?
With `CPUOffloadPolicy` FSDP2 keeps each rank's parameter shards (and gradients, optimizer
state) on the CPU and copies a group to the GPU only for its all-gather. Its lazy
initialisation at the first forward checks that (torch 2.13,
`FSDPParamGroup._validate_cpu_offload_params`): a shard moved to the GPU afterwards raises
`RuntimeError: FSDP parameters should be materialized on CPU when enabling CPU offloading. For
example, load a CPU state dict or call module.to_empty(device="cpu")` (pytorch/pytorch#157209;
LlamaFactory#10318, NeMo-RL#861). The failure needs a CUDA device: `confirm` reports this rule's
fixtures as not runnable on a CPU-only machine; the static check is tested by its style cases.

A device-fused optimizer (`fused=True`), which the rule candidate listed too, is not flagged:
torch 2.13 has fused optimizer kernels for CPU tensors, and the failure reported for it
(pytorch/pytorch#192441) could not be reproduced here.

## Known problems
Not observed here: the failure needs CUDA and this rule's fixtures have not been run on a GPU. On
torch 2.13 `FSDPModule._apply` (behind `.cuda()`, `.to()`, `to_empty()`) calls
`FSDPParam.reset_sharded_param`, which moves a shard's local tensor back into pinned CPU memory
when the policy pins (`CPUOffloadPolicy()`'s default); whether the wrapper still reports a CUDA
device to `_validate_cpu_offload_params` (the error) in that case, or the move is silently undone,
is to be confirmed on a GPU. With `pin_memory=False` nothing moves the shard back.

Use instead:

```python
with torch.device("meta"):
    model = Model()
for block in model.layers:
    fully_shard(block, offload_policy=CPUOffloadPolicy())
fully_shard(model, offload_policy=CPUOffloadPolicy())
model.to_empty(device="cpu")
model.reset_parameters()
```
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

model = Model().cuda()
fully_shard(model, offload_policy=CPUOffloadPolicy())
""",
        """
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

fully_shard(model, offload_policy=CPUOffloadPolicy())
model.to_empty(device="cpu")
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

fully_shard(model, offload_policy=CPUOffloadPolicy())
model.to_empty(device="cuda")  # expect: FSDP043
""",
        """
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

for block in model.layers:
    fully_shard(block, offload_policy=CPUOffloadPolicy(pin_memory=False))
fully_shard(model)
model.cuda()  # expect: FSDP043
""",
    )
    requires = (("CPUOffloadPolicy",), ("fully_shard",), ("cuda", "xpu", "npu", "hpu", "mtia"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("RuntimeError",),
        message=r"should be materialized on CPU when enabling CPU offloading",
        min_gpus=1,
        note="needs a CUDA device",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        seen: set[int] = set()
        for trace in facts.traces:
            for shard in trace.shards:
                if not _offloads(shard.kwargs.get("offload_policy")):
                    continue
                for move, how in _moves(trace, shard):
                    if id(move.node) not in seen:
                        seen.add(id(move.node))
                        yield Finding(
                            move.node,
                            f"`{_short(facts.code(move.node))}` {how} after `fully_shard(..., "
                            "offload_policy=CPUOffloadPolicy())` "
                            f"({facts.where(shard.node, move.node)}): the offloaded shards must stay on the CPU; "
                            "`RuntimeError` at the first forward",
                            related=((shard.node, "sharded with CPU offloading here"),),
                        )


def _short(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= 60 else code[:57] + "..."


def _offloads(policy: Value | None) -> bool:
    """Is the policy a ``CPUOffloadPolicy(...)`` on every path?"""
    if policy is None:
        return False
    found = options(policy)
    return all(
        isinstance(option, Ref)
        and not option.path
        and option.root.qname == CPU_OFFLOAD
        and option.root.kind is ObjKind.NEW
        for option in found
    )


def _moves(trace: Trace, shard: Event) -> Iterator[tuple[Event, str]]:
    """Calls after ``shard`` that move a module overlapping what it sharded to an accelerator."""
    targets = [canonical(target) for target in shard.targets]
    for name in ("cuda", "to", "to_empty"):
        for event in trace.methods(name):
            if event.index <= shard.index or event.exclusive_with(shard):
                continue
            if not any(may_overlap(canonical(ref), target) for ref in refs(event.receiver) for target in targets):
                continue
            if name == "cuda":
                yield event, "moves the offloaded parameters to the GPU"
            elif name == "to" and _accelerator(event.arg(0, "device")):
                yield event, "moves the offloaded parameters to an accelerator"
            elif name == "to_empty" and _accelerator(event.kwargs.get("device")):
                yield event, "materialises the offloaded parameters on an accelerator"


def _accelerator(device: Value | None) -> bool:
    """Is the value an accelerator device on every path (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", i)``)?"""
    if device is None:
        return False
    return all(_accelerator_option(option) for option in options(device))


def _accelerator_option(option: Value) -> bool:
    text = const(option)
    if isinstance(text, str):
        return text.partition(":")[0] in ACCELERATORS
    if isinstance(option, Ref) and not option.path and option.root.qname == "torch.device" and option.root.event:
        return _accelerator(option.root.event.arg(0, "type"))
    return False
