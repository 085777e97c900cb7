from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, EventKind, Ref, Symbol, Value, canonical, may_overlap, options, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature, Severity

# Low-precision floating dtypes, by the names code spells them with.
LOW = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
FULL = {"torch.float32", "torch.float", "float32", "fp32"}
CAST_METHODS = {"bfloat16": "bfloat16", "half": "float16"}
POLICY = "torch.distributed.fsdp.MixedPrecisionPolicy"
FROM_PRETRAINED = "from_pretrained"


def _dtype(value: Value | None) -> str | None:
    """The low-precision dtype a value names ('full' for float32) when each of its options names that
    one, else None: a dtype a setting chooses (`DTYPES[cfg.precision]`) is not known."""
    named = {_named_dtype(option) for option in options(value)} if value is not None else {None}
    return named.pop() if len(named) == 1 else None


def _named_dtype(option: Value) -> str | None:
    name = option.qname if isinstance(option, Symbol) else option.value if isinstance(option, Const) else None
    if not isinstance(name, str):
        return None
    if name in LOW:
        return LOW[name]
    return "full" if name in FULL else None


def _cast(event: Event) -> tuple[Ref, str] | None:
    """The module a cast event makes low precision (or float32: 'full'), and the dtype."""
    if event.kind is EventKind.METHOD and isinstance(event.receiver, Ref):
        if event.name in CAST_METHODS:
            return event.receiver, CAST_METHODS[event.name]
        if event.name == "float":
            return event.receiver, "full"
        if event.name == "to":
            dtype = _dtype(event.arg(0, "dtype")) or _dtype(event.arg(1)) or _dtype(event.kwargs.get("dtype"))
            if dtype is not None:
                return event.receiver, dtype
    if event.kind is EventKind.CALL and (
        event.name == FROM_PRETRAINED or (event.qname or "").endswith(".from_pretrained")
    ):
        dtype = _dtype(event.kwargs.get("torch_dtype")) or _dtype(event.kwargs.get("dtype"))
        result = next(refs(event.result), None) if event.result is not None else None
        if dtype is not None and result is not None:
            return result, dtype
    return None


def _policy_dtype(shard: Event) -> str | None:
    """The literal low-precision ``param_dtype`` of the ``MixedPrecisionPolicy`` a fully_shard call gets."""
    policy = shard.kwargs.get("mp_policy")
    for ref in refs(policy) if policy is not None else ():
        made = ref.root.event
        if made is not None and made.qname == POLICY and not ref.path:
            dtype = _dtype(made.arg(0, "param_dtype"))
            if dtype not in (None, "full"):
                return dtype
    return None


class LowPrecisionMasterWeights(Rule):
    code = "FSDP035"
    name = "low-precision-master-weights"
    summary = "model cast to bf16/fp16 before `fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=...))` of that dtype"
    hint = (
        "keep the model in float32 until it is sharded (drop the cast, or `torch_dtype=torch.float32`): "
        "the policy then casts the parameters for forward/backward and the optimizer updates float32 shards"
    )
    failure = (
        "silent: the policy casts nothing, the optimizer holds bf16/fp16 sharded parameters and state, "
        "and updates below the dtype's resolution round away"
    )
    severity = Severity.WARNING
    docs = """
## What it does
Flags a cast of a model to bfloat16 or float16 — `model.to(torch.bfloat16)`, `model.to(dtype=...)`,
`model.bfloat16()`, `model.half()`, `from_pretrained(..., torch_dtype=torch.bfloat16)` (or
`dtype=`, or the string `"bfloat16"`) — when that model is later given to `fully_shard` with
`mp_policy=MixedPrecisionPolicy(param_dtype=<the same dtype>)` and an optimizer is then built over
its parameters. The finding is at the cast.

Not flagged: a float32 model with a bf16 policy (the intended use), a bf16 model sharded without a
mixed-precision policy (a deliberate pure-bf16 setup), a model cast back with `.float()` /
`.to(torch.float32)` before `fully_shard` or after it, a cast model that no optimizer in the same code trains
(a frozen reference or teacher model), casts of tensors, and a policy whose `param_dtype` differs
from the model's dtype.

## Why is this bad?
`MixedPrecisionPolicy(param_dtype=bf16)` promises float32 sharded parameters (the master weights
the optimizer updates) cast to bf16 for forward and backward. FSDP2 casts only when the
parameter's original dtype differs from `param_dtype`; for a model already in bf16 the policy does
nothing. Observed with torch 2.13 on CPU/gloo (2 ranks): the optimizer's parameters and its AdamW
state are bf16 DTensors, and one AdamW step at lr=1e-5 changed 143 of 4160 local parameter values
(the float32 model under the same policy: all 4160); updates below bf16's resolution (2^-8
relative) round away. No error or warning is raised. `model.float()` after `fully_shard` (before or
after the optimizer is built: it swaps the tensors in place) restored float32 shards of `nn.Linear` layers on torch 2.13, but raised
`RuntimeError: _apply(): Couldn't swap Embedding.weight` for a model with an `nn.Embedding`;
casting before `fully_shard` (or not at all) is the reliable fix.

## Known problems
A dtype is known where every value it may hold names it (a literal, or what a helper returns for a
literal setting); one a setting chooses (`DTYPES[cfg.precision]`, `param_dtype=cfg.dtype`) is not,
and such a cast or policy is not reported (RLinf's reward models). The optimizer has
to be built in the same code that casts and shards the model (a trainer whose optimizer is built
in another method is not reported). `torch.set_default_dtype(torch.bfloat16)` and modules built with
`dtype=torch.bfloat16` are not recognised.
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

model = Model()
fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
opt = torch.optim.AdamW(model.parameters())
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

model = Model().to(torch.bfloat16)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters())
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
policy = Model()
ref = Model().to(torch.bfloat16)
fully_shard(policy, mp_policy=mp)
fully_shard(ref, mp_policy=mp)
opt = torch.optim.AdamW(policy.parameters())
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

model = Model().bfloat16()
fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
model.float()
opt = torch.optim.AdamW(model.parameters())
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

model = Model().to(torch.bfloat16)  # expect: FSDP035
fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
opt = torch.optim.AdamW(model.parameters())
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)  # expect: FSDP035
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model.model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
""",
    )
    requires = (("fully_shard",), ("MixedPrecisionPolicy",), ("bfloat16", "float16", "half", "bf16", "fp16"))
    signature = RuntimeSignature(evidence="low_precision_master_weights")

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for event in trace.events:
                cast = _cast(event)
                if cast is None or cast[1] == "full":
                    continue
                found = _defeated_policy(trace, event, canonical(cast[0]), cast[1])
                if found is not None:
                    yield Finding(
                        event.node,
                        f"model cast to {cast[1]} before `fully_shard(..., mp_policy=MixedPrecisionPolicy("
                        f"param_dtype=torch.{cast[1]}))` at {facts.where(found.node, event.node)}: the policy casts "
                        f"nothing, so the optimizer keeps {cast[1]} master weights and state and small updates "
                        "round away",
                    )


def _defeated_policy(trace: Trace, cast: Event, model: Ref, dtype: str) -> Event | None:
    """The fully_shard call whose policy the cast makes a no-op, when an optimizer then trains the model."""
    shards = {id(shard) for shard in trace.shards}
    for later in trace.events[cast.index + 1 :]:
        back = _cast(later)
        if back is not None and back[1] != dtype and may_overlap(canonical(back[0]), model):
            return None  # cast again (back to float32) before sharding
        if id(later) not in shards or later.exclusive_with(cast):
            continue
        if not any(may_overlap(canonical(target), model) for target in later.targets):
            continue
        if _policy_dtype(later) != dtype:
            return None  # sharded first without that policy
        return later if _trained(trace, later, model) else None
    return None


def _trained(trace: Trace, shard: Event, model: Ref) -> bool:
    for optimizer in trace.optimizers:
        if optimizer.index < shard.index:
            continue
        params = optimizer.result.root.params
        if params is None or not any(may_overlap(canonical(s.ref), model) for s in params.sources):
            continue
        if not any(_cast_back(event, model) for event in trace.events[shard.index + 1 :]):
            return True
    return False


def _cast_back(event: Event, model: Ref) -> bool:
    """``model.float()`` / ``model.to(torch.float32)`` after sharding: FSDP2 (torch 2.13) then holds
    float32 shards, and its policy casts them at the first forward."""
    cast = _cast(event)
    return cast is not None and cast[1] == "full" and may_overlap(canonical(cast[0]), model)
