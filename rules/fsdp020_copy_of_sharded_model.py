from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Event,
    EventKind,
    ObjKind,
    Params,
    ParamSource,
    Ref,
    StateDict,
    canonical,
    may_be_wrapper,
    refs,
    report_node,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Calls that `copy.deepcopy` the module they are given, and where they take it.
_COPIERS = {
    "copy.deepcopy": (0, "x"),
    "torch.optim.swa_utils.AveragedModel": (0, "model"),
    # timm's EMA wrappers deepcopy the model in their constructor.
    "timm.utils.ModelEma": (0, "model"),
    "timm.utils.ModelEmaV2": (0, "model"),
    "timm.utils.ModelEmaV3": (0, "model"),
    "timm.utils.model_ema.ModelEma": (0, "model"),
    "timm.utils.model_ema.ModelEmaV2": (0, "model"),
    "timm.utils.model_ema.ModelEmaV3": (0, "model"),
}


class CopyOfShardedModel(Rule):
    code = "FSDP020"
    name = "deepcopy-of-sharded-model"
    summary = (
        "`copy.deepcopy` / `AveragedModel` of a module already sharded with `fully_shard`, or an unsharded copy "
        "updated from a sharded model"
    )
    hint = (
        "make the copy before sharding and shard it with the same plan (`ema = copy.deepcopy(model)`, then "
        "`fully_shard` both), or keep the EMA as copies of the local shards (`p.detach().clone()`)"
    )
    failure = (
        "`AssertionError: FSDP does not support deepcopy. Please use state dict for serialization.`; a copy made "
        "before sharding and left unsharded: `RuntimeError: ... got mixed torch.Tensor and DTensor` at its update"
    )
    docs = """
## What it does
Flags `copy.deepcopy(m)`, `torch.optim.swa_utils.AveragedModel(m)` and timm's
`ModelEma`/`ModelEmaV2`/`ModelEmaV3(m)` (which deepcopy the model they are given) where `fully_shard`
has already been applied to `m` or to a module inside it: the usual EMA / SWA / teacher-model copy
made after the model was sharded. Not flagged: the copy made before sharding (then shard the copy
too), a copy of a module that is only *managed* by an ancestor's `fully_shard` (a plain module whose
parameters are DTensors: torch copies it), copies of state dicts or tensors, and modules wrapped in
`DistributedDataParallel` or FSDP1 `FullyShardedDataParallel`.

Also flags the other half of the same mistake: a copy made *before* sharding (so the copy works)
that nothing shards, later combined in one tensor op with the parameters (or state dict) of the
sharded model: `ema_p.lerp_(p, w)`, `ema_p.mul_(d).add_(p, alpha=...)`, `ema_p.copy_(p)` (also on
`.data` and `p.detach()`), arithmetic on them (`ema_p.sub_((1 - d) * (ema_p - p))`,
`ema_p.data = d * ema_p.data + (1 - d) * p.data`, and timm `ModelEmaV2`'s
`ema_v.copy_(ema_v * d + (1 - d) * model_v)` over the two state dicts),
`torch._foreach_lerp_(ema_params, params, w)`, `ema.update_parameters(model)` of an
`AveragedModel`, and copying the EMA back (`p.copy_(ema_p)`). The finding is at the update
statement (the error is raised on that line); not flagged: an update from the
gathered values (`p.full_tensor()`: plain tensors, a full EMA on every rank), a copy sharded with
the same plan, and a copy handed to code the analysis does not see (which may shard it). A helper
that is right for two unsharded (or two sharded) models is reported at the caller's call of it.

## Why is this bad?
`fully_shard` gives every module it is applied to a `__deepcopy__` that raises. Observed with torch
2.13, on every rank: `AssertionError: FSDP does not support deepcopy. Please use state dict for
serialization.` for `copy.deepcopy(model)`, for `AveragedModel(model)` (its constructor deepcopies
the model, with or without `use_buffers`), and for the deepcopy of any module or object that holds a
sharded submodule. The job dies at the line that builds the EMA or teacher model. A copy made
before sharding and left unsharded holds plain tensors while the model's parameters are DTensors:
observed with torch 2.13, every rank fails at the first update with `RuntimeError:
aten.lerp_.Scalar got mixed torch.Tensor and DTensor` (`aten.add_.Tensor` for `mul_().add_()`,
`aten.copy_.default` for `copy_` and for `AveragedModel.update_parameters`, `aten.add.Tensor` for
`ema_v * d + (1 - d) * model_v`, `aten._foreach_lerp_.Scalar` for `torch._foreach_lerp_`).

Use instead: build the copy before sharding and shard it with the same plan, so that its
parameters are DTensors placed like the model's and `ema_p.lerp_(p, 1 - decay)` works shard by shard:

```python
ema = copy.deepcopy(model)
for m in (model, ema):
    for block in m.blocks:
        fully_shard(block)
    fully_shard(m)
```

An evaluation forward of the sharded copy without a backward (`with torch.no_grad(): ema(x)`)
leaves its root's parameters unsharded (plain tensors) until its next forward; call `ema.reshard()`
after it, or the next `lerp_` against the model's DTensors fails with `mixed torch.Tensor and DTensor`.

## Known problems
Copies made by other libraries' EMA helpers (`ema_pytorch.EMA(model)`) are not recognised, nor an
unsharded module built another way (a second `Model()`) that is updated from the sharded one, nor a
"shadow" dict of tensors cloned before sharding (`{n: p.clone() for n, p in
model.named_parameters()}`) and updated from the sharded parameters, nor an update that goes
through a function value (timm's `update_fn` lambdas).
"""
    valid = (
        """
import copy
from torch.distributed.fsdp import fully_shard

ema = copy.deepcopy(model)
fully_shard(model)
fully_shard(ema)
""",
        """
import copy
from torch.distributed.fsdp import fully_shard

fully_shard(model)
snapshot = copy.deepcopy(model.state_dict())
""",
        """
import copy
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model)
ema = copy.deepcopy(model.module)
""",
        """
import copy
import torch
from torch.distributed.fsdp import fully_shard

ema = copy.deepcopy(model)
fully_shard(model)
with torch.no_grad():
    for ema_p, p in zip(ema.parameters(), model.parameters()):
        ema_p.lerp_(p.full_tensor(), 0.001)
""",
    )
    invalid = (
        """
import copy
from torch.distributed.fsdp import fully_shard

for block in model.blocks:
    fully_shard(block)
fully_shard(model)
ema = copy.deepcopy(model)  # expect: FSDP020
""",
        """
from torch.distributed.fsdp import fully_shard
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

fully_shard(model)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))  # expect: FSDP020
""",
        """
from copy import deepcopy
from torch.distributed.fsdp import fully_shard

for block in model.blocks:
    fully_shard(block)
teacher = deepcopy(model).eval()  # expect: FSDP020
""",
        """
import copy
import torch
from torch.distributed.fsdp import fully_shard

ema = copy.deepcopy(model)
fully_shard(model)
with torch.no_grad():
    for ema_p, p in zip(ema.parameters(), model.parameters()):
        ema_p.lerp_(p, 0.001)  # expect: FSDP020
""",
    )
    requires = (("fully_shard",), ("deepcopy", "AveragedModel", "ModelEma"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("AssertionError", "RuntimeError"),
        message=r"FSDP does not support deepcopy|got mixed torch\.Tensor and DTensor",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            yield from _copies_of_sharded(facts, trace)
            yield from _unsharded_copies_mixed(facts, trace)


def _copies_of_sharded(facts: FileFacts, trace: Trace) -> Iterator[Finding]:
    for copy in trace.calls(*_COPIERS):
        found = _copied_fsdp_module(trace, copy)
        if found is None:
            continue
        module, shard = found
        name = facts.name_as_written(module, copy.node)
        at, related = facts.sharded_elsewhere(name, shard, copy.node)
        copier = (copy.qname or "").rsplit(".", 1)[-1]
        how = "" if copier == "deepcopy" else f" (`{copier}` deepcopies the module it is given)"
        yield Finding(
            copy.node,
            f"`{name}` is (or holds) a module sharded with `fully_shard`{at}, which cannot be "
            f"deepcopied{how}: `AssertionError: FSDP does not support deepcopy`",
            related=related,
        )


def _copied_fsdp_module(trace: Trace, copy: Event) -> tuple[Ref, Event | bool] | None:
    """The module the copier is given, if it is (or holds) an FSDP module, and its shard."""
    position, keyword = _COPIERS[copy.qname or ""]
    value = copy.arg(position, keyword)
    if value is None or may_be_wrapper(value):
        return None  # DDP / FSDP1 wrappers copy (FSDP1 has its own checks)
    for module in refs(value):
        shard = trace.holds_fsdp_module(module, copy)
        if shard:
            return module, shard
    return None


def _unsharded_copies_mixed(facts: FileFacts, trace: Trace) -> Iterator[Finding]:
    """Tensor ops between the parameters (or state dict) of a copy nothing shards and those of a
    sharded module: the EMA made before sharding, then updated from the model's DTensors."""
    for event in trace.events:
        operands = _tensor_operands(event)
        plain = next((ref for ref in _copies(operands) if _unsharded_copy(trace, ref, event)), None)
        sharded = next(((ref, shard) for ref in _modules(operands) if (shard := _sharded(trace, ref, event))), None)
        if plain is None or sharded is None:
            continue
        module, shard = sharded
        name, copy = canonical(module).text, canonical(plain).text
        cause = trace.obtained(module, event)
        reported = report_node(event, cause) if cause is not None else event.node
        at, related = facts.sharded_elsewhere(name, shard, reported)
        yield Finding(
            reported,
            f"`{copy}`, a copy nothing shards, is updated together with the parameters of `{name}`, sharded with "
            f"`fully_shard`{at}: plain tensors and DTensors in one op (`got mixed torch.Tensor and DTensor`)",
            related=related,
        )


def _tensor_operands(event: Event) -> list[object]:
    """The tensors one op combines: a tensor method's receiver and arguments (`ema_p.lerp_(p, w)`),
    a `torch.*` function's arguments (`torch._foreach_lerp_(ema_ps, ps, w)`), the parameters of an
    `AveragedModel` and of the model it averages (`ema.update_parameters(model)`), the tensors an
    assigned value is computed from (arithmetic on them stands for them)."""
    if event.kind is EventKind.METHOD and event.name == "update_parameters" and event.receiver is not None:
        modules = [*refs(event.receiver), *refs(event.arg(0, "model") or UNKNOWN)]
        return [Params(frozenset({ParamSource(module, None)})) for module in modules]
    if event.kind is EventKind.METHOD and event.receiver is not None:
        return [*walk_contents(event.receiver), *_argument_contents(event)]
    if event.kind is EventKind.STORE:  # `ema_p.data = d * ema_p.data + (1 - d) * p.data`: the value computed
        return list(_argument_contents(event))
    qname = event.qname or ""
    if event.kind is EventKind.CALL and qname.startswith("torch.") and qname.count(".") == 1:
        return list(_argument_contents(event))
    return []


def _argument_contents(event: Event) -> Iterator[object]:
    for value in (*event.args, *event.kwargs.values()):
        yield from walk_contents(value)


def _modules(operands: list[object]) -> Iterator[Ref]:
    """The modules whose tensors the operands are: a parameter's module, a state dict's owner
    (unless `.full_tensor()` gathered it into plain tensors)."""
    for operand in operands:
        if isinstance(operand, Params):
            yield from (source.ref for source in operand.sources)
        elif isinstance(operand, StateDict) and isinstance(operand.owner, Ref) and not operand.full:
            yield operand.owner


def _copies(operands: list[object]) -> Iterator[Ref]:
    """Operand modules made by a copier (`copy.deepcopy(model)`, `AveragedModel(model)`)."""
    for ref in _modules(operands):
        root = ref.root
        if root.kind is ObjKind.NEW and root.event is not None and root.event.qname in _COPIERS:
            yield ref


def _unsharded_copy(trace: Trace, ref: Ref, event: Event) -> bool:
    """Certainly plain at ``event``: nothing sharded the copy, nor a module it holds or is part of,
    and it was not handed to code the trace does not show (which may shard it)."""
    created = ref.root.event
    if trace.sharded_overlap(ref, event) or _copied_fsdp_module(trace, created) is not None:
        return False  # sharded, or the copy itself failed
    handed = trace.handed_off([Ref(ref.root)], created.index)
    return handed is None or handed.index > event.index or handed.kind is EventKind.STORE


def _sharded(trace: Trace, ref: Ref, event: Event) -> Event | bool:
    return not may_be_wrapper(ref) and trace.sharded_overlap(ref, event)
