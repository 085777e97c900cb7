from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    EventKind,
    ObjKind,
    Params,
    Ref,
    Symbol,
    canonical,
    is_exact,
    may_contain,
    may_overlap,
    options,
    refs,
    report_node,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Floating dtypes, by the names code spells them with.
DTYPES = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float64": "float64",
    "torch.double": "float64",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
}
CAST_METHODS = {"bfloat16": "bfloat16", "half": "float16", "float": "float32", "double": "float64"}
FROM_PRETRAINED = "from_pretrained"
# Path elements that name a tensor, not a module: `.float()` of one makes a new tensor.
TENSOR_ELEMENTS = frozenset({"data", "grad", "weight", "bias"})
# torch.nn layers that hold parameters of their own (a witness of the group's other dtype).
PARAM_LAYERS = frozenset(
    f"torch.nn.{name}"
    for name in (
        "Linear",
        "Bilinear",
        "Embedding",
        "EmbeddingBag",
        "LayerNorm",
        "RMSNorm",
        "GroupNorm",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "MultiheadAttention",
    )
) | {"torch.nn.Parameter"}
# Submodules of a library model (its structure unknown) that hold parameters when code casts them:
# the output head, a norm, a MoE router, the embeddings. Rotary embeddings (buffers only) are not.
OPAQUE_ISLAND = re.compile(
    r"(^|_)(lm_head|head|norm|ln|router|gate|embed|embeddings|embed_tokens|wte|score|classifier)"
)


@dataclass(frozen=True)
class _Cast:
    event: Event
    ref: Ref  # the module (or parameter) cast, named from its outermost owner
    dtype: str

    def text(self, facts: FileFacts) -> str:
        """The island as the message names it: from its outermost owner, else as the cast spells it."""
        if "<expression>" not in self.ref.text:
            return self.ref.text
        node = self.event.node
        receiver = getattr(getattr(node, "func", None), "value", None) or getattr(node, "value", None)
        return facts.code(receiver) if receiver is not None else self.ref.path[-1]


class NonUniformGroupDtype(Rule):
    code = "FSDP026"
    name = "nonuniform-group-dtype"
    summary = (
        "a submodule cast to another dtype than the rest of its `fully_shard` group (an fp32 island in a bf16 group)"
    )
    hint = (
        "shard the island as its own group before its parent (`fully_shard(model.lm_head, mp_policy="
        "MixedPrecisionPolicy(param_dtype=torch.float32))`), freeze it, or keep the model in float32 and "
        "let a `MixedPrecisionPolicy(param_dtype=torch.bfloat16)` cast it"
    )
    failure = (
        "`AssertionError: FSDP expects uniform original parameter dtype but got {torch.bfloat16, torch.float32}` "
        "at the first forward"
    )
    docs = """
## What it does
Flags a submodule (or one parameter) cast to a dtype other than the one its model was cast to,
when the two end up in one `fully_shard` parameter group and both still require gradients: an
fp32 "island" kept for numerical stability (a norm, a MoE router, the `lm_head`) under a model
made bf16 before sharding:

```python
model = Model().to(torch.bfloat16)   # or .bfloat16(), from_pretrained(torch_dtype=...)
model.norm.float()                   # or .to(torch.float32), or through .data
for block in model.layers:
    fully_shard(block)
fully_shard(model)                   # root group: bf16 embeddings + fp32 norm
```

Only dtypes the code states are used: the model's from a cast (`.to(dtype)`, `.bfloat16()`,
`.half()`, `.float()`) or from `from_pretrained(torch_dtype=...)` / `dtype=`, the island's from a
later cast of it, and another parameter of the group from a `torch.nn` layer the model's class
stores (for a library model whose layers the code does not show, the group of the root after
only repeated blocks were sharded, and an island named like a parameter holder: `lm_head`,
`norm`, `router`, `gate`, `embed...`). Not flagged: an island sharded as its own group before its
parent, an island (or the rest of the group) frozen with `requires_grad_(False)` /
`p.requires_grad = False`, the whole model cast again after the island, a model kept in float32
with a bf16 `MixedPrecisionPolicy` (uniform storage dtype), and any dtype the code does not state.

## Where it is reported
At the cast that makes the island, or, when the cast and the `fully_shard` that groups it sit in
two helpers that are each right on their own, at the caller's call of the casting helper (in the
innermost function that runs both). The message names the `fully_shard` call that forms the group.

## Why is this bad?
A `fully_shard` group all-gathers and reduce-scatters its parameters as one flat buffer, so FSDP2
requires the trainable parameters of a group to share one original dtype. It checks lazily, at
the group's first forward (`FSDPParamGroup._init_mp_dtypes`), not at `fully_shard`. Observed with
torch 2.13 on CPU/gloo (2 ranks): `AssertionError: FSDP expects uniform original parameter dtype
but got {torch.bfloat16, torch.float32}` at the first forward; the same with a bf16
`MixedPrecisionPolicy` (the check reads the stored dtype, not the policy's). Since
pytorch/pytorch#154103 (about torch 2.8; older versions not checked here) only parameters that
require gradients count: a frozen fp32
island (or a frozen bf16 base with fp32 adapters) trains. An island that is its own group
(`fully_shard(model.norm)` before the root) trains as well.

Use instead: give the island its own group, before its parent. For an output head, a float32
policy keeps its compute in float32 too (it casts the head's bf16 input; observed to train on
2.13):

```python
model.lm_head.float()
fully_shard(model.lm_head, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32))
fully_shard(model)
```

An island inside the network (a norm, a router) then returns float32 to bf16 layers: a `Linear`
fails with `RuntimeError: mat1 and mat2 must have the same dtype` unless its output is cast back
(or the island's group uses `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`: float32 storage,
bf16 compute). Freezing the island works as well.

## Known problems
Before torch 2.8 frozen parameters were checked too, so a frozen island also failed there; the
rule leaves frozen islands alone on every version. Islands made in a loop over the modules
(`for m in model.modules(): if isinstance(m, nn.LayerNorm): m.float()`) or over
`named_parameters()` with a name filter are not followed, nor are dtypes held in variables
(`model.to(cfg.dtype)`), `torch.set_default_dtype`, or layers built with `dtype=`.
"""
    valid = (
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.norm = nn.LayerNorm(16)

model = Model().to(torch.bfloat16)
model.norm.float()
fully_shard(model.norm)
fully_shard(model)
""",
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.norm = nn.LayerNorm(16)

model = Model().to(torch.bfloat16)
model.norm.float()
model.norm.requires_grad_(False)
fully_shard(model)
""",
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.norm = nn.LayerNorm(16)

model = Model().to(torch.bfloat16)
model.norm.float()
model.to(torch.bfloat16)
fully_shard(model)
""",
    )
    invalid = (
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.norm = nn.LayerNorm(16)

model = Model().to(torch.bfloat16)
model.norm.float()  # expect: FSDP026
fully_shard(model)
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
model.lm_head.to(torch.float32)  # expect: FSDP026
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
for layer in model.model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
""",
    )
    requires = (("fully_shard",), ("float", "bfloat16", "half", "double"))
    signature = RuntimeSignature(
        evidence="nonuniform_group_dtype",
        note="the probe records a group whose trainable parameters have two or more dtypes at its lazy init",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        for trace in facts.traces:
            casts = list(_casts(trace))
            for island in casts:
                found = _island_group(facts, trace, casts, island)
                if found is None:
                    continue
                shard, model_dtype = found
                node = report_node(island.event, shard)
                if id(node) in reported:
                    continue
                reported.add(id(node))
                name = island.text(facts)
                yield Finding(
                    node,
                    f"`{name}` is cast to {island.dtype} while the rest of its `fully_shard` group "
                    f"(at {facts.where(shard.node, node)}) is {model_dtype} and trainable: FSDP2 fails at the "
                    f"first forward with `AssertionError: FSDP expects uniform original parameter dtype`",
                    related=((shard.node, f"the group holding `{name}` is formed here"),),
                )


# --- casts ----------------------------------------------------------------------------------


def _dtype(value: object) -> str | None:
    """The floating dtype a literal names, else None."""
    found = set()
    for option in walk_contents(value) if value is not None else ():
        name = option.qname if isinstance(option, Symbol) else option.value if isinstance(option, Const) else None
        found.add(DTYPES.get(name) if isinstance(name, str) else None)
    return found.pop() if len(found) == 1 else None


def _casts(trace: Trace) -> Iterator[_Cast]:
    for event in trace.events:
        cast = _cast(trace, event)
        if cast is not None:
            yield cast


def _cast(trace: Trace, event: Event) -> _Cast | None:
    """A module (or a parameter, through ``.data``) made of a known dtype by this event."""
    if event.kind is EventKind.METHOD and isinstance(event.receiver, Ref):
        ref = canonical(event.receiver)
        if ref.path and ref.path[-1] in TENSOR_ELEMENTS:
            return None  # a tensor's cast: a new tensor, the module is unchanged
        dtype = CAST_METHODS.get(event.name or "")
        if event.name == "to":
            dtype = _dtype(event.kwargs.get("dtype")) or _dtype(event.arg(0)) or _dtype(event.arg(1))
        return _Cast(event, ref, dtype) if dtype is not None else None
    if event.kind is EventKind.CALL and (
        event.name == FROM_PRETRAINED or (event.qname or "").endswith(".from_pretrained")
    ):
        dtype = _dtype(event.kwargs.get("torch_dtype")) or _dtype(event.kwargs.get("dtype"))
        result = [ref for ref in refs(event.result)] if event.result is not None else []
        if dtype is not None and len(result) == 1 and not result[0].path:
            return _Cast(event, canonical(result[0]), dtype)
    if event.kind is EventKind.STORE and event.name == "data" and isinstance(event.receiver, Ref) and event.args:
        source = trace.obtained(event.args[0], event)
        if source is not None and source.kind is EventKind.METHOD:
            dtype = CAST_METHODS.get(source.name or "")
            if source.name == "to":
                dtype = _dtype(source.kwargs.get("dtype")) or _dtype(source.arg(0)) or _dtype(source.arg(1))
            if dtype is not None:
                return _Cast(event, canonical(event.receiver), dtype)
    return None


# --- the group --------------------------------------------------------------------------------


def _island_group(facts: FileFacts, trace: Trace, casts: list[_Cast], island: _Cast) -> tuple[Event, str] | None:
    """The fully_shard call whose group takes the island in with trainable parameters of another
    known dtype, and that dtype; None unless every part of that is certain."""
    if not is_exact(island.ref) or not island.ref.path:
        return None
    # the model the island belongs to was cast before it, as a whole, to another dtype
    model = _last_cast(casts, island.ref, island.event, strict=True)
    if model is None or model.dtype == island.dtype:
        return None
    shard = _group_of(trace, island)
    if shard is None:
        return None
    target = next(canonical(t) for t in shard.targets if _holds(canonical(t), island.ref))
    end = _first_forward(trace, shard, target)
    if _unknown_freeze(trace, island.event, end):
        return None
    relevant = [c for c in casts if c.event.index < end and not c.event.exclusive_with(shard)]
    final = _dtype_at(relevant, island.ref)
    if final is None or _frozen(trace, island.ref, island.event, end):
        return None
    if not _holds_params(trace, island.ref) or (
        island.event.kind is EventKind.METHOD and _is_parameter(trace, island.ref)
    ):
        return None  # no parameters; or `param.float()`, which makes a new tensor and leaves the module as it is
    for witness, exclude in _witnesses(trace, shard, target, island):
        if _frozen(trace, witness, island.event, end, exclude):
            continue
        dtype = _dtype_at(relevant, witness, exclude)
        if dtype is not None and dtype != final:
            return shard, dtype
    return None


def _holds(outer: Ref, inner: Ref) -> bool:
    """Is ``outer`` certainly a strict ancestor of ``inner`` (both exact)?"""
    return (
        outer.root is inner.root
        and is_exact(outer)
        and len(outer.path) < len(inner.path)
        and inner.path[: len(outer.path)] == outer.path
    )


def _last_cast(casts: list[_Cast], ref: Ref, before: Event, strict: bool = False) -> _Cast | None:
    """The last cast before ``before`` of ``ref`` or of an exact ancestor (``strict``: ancestors only)."""
    found = None
    for cast in casts:
        if cast.event.index >= before.index or cast.event.exclusive_with(before):
            continue
        if _holds(cast.ref, ref) or (not strict and cast.ref == ref):
            found = cast
    return found


def _dtype_at(casts: list[_Cast], ref: Ref, exclude: tuple[Ref, ...] = ()) -> str | None:
    """``ref``'s dtype after these casts (those of modules in ``exclude`` aside): the last that
    covers it whole; None when none does, or when a cast of a part of it, or of a module the
    analysis cannot pin down, may have made some of it another dtype since."""
    dtype = None
    for cast in casts:
        if cast.ref.root is not ref.root or any(may_contain(other, cast.ref) for other in exclude):
            continue
        if is_exact(cast.ref) and (cast.ref == ref or _holds(cast.ref, ref)):
            dtype = cast.dtype
        elif may_overlap(cast.ref, ref) and cast.dtype != dtype:
            dtype = None
    return dtype


def _group_of(trace: Trace, island: _Cast) -> Event | None:
    """The first fully_shard after the cast that takes the island in, when it does so as part of an
    ancestor's group (an exact ancestor named by the call) and no earlier call may have taken it."""
    for shard in trace.shards:
        if shard.exclusive_with(island.event):
            continue
        targets = [canonical(t) for t in shard.targets]
        if not any(may_contain(t, island.ref) for t in targets):
            continue
        if shard.index < island.event.index:
            return None  # sharded before the island was made: a different misuse
        return shard if any(_holds(t, island.ref) for t in targets) else None
    return None


def _first_forward(trace: Trace, shard: Event, target: Ref) -> int:
    """Where the group's dtypes are read: the first call of the sharded model (else the trace's end)."""
    for event in trace.events[shard.index + 1 :]:
        if (
            event.kind is EventKind.INVOKE
            and event.receiver is not None
            and any(canonical(r).root is target.root for r in refs(event.receiver))
        ):
            return event.index
    return len(trace.events)


def _freezes(trace: Trace, start: Event, end: int) -> Iterator[list[Ref] | None]:
    """What each ``requires_grad_(False)`` / ``requires_grad = False`` in the window freezes (None: unknown)."""
    for event in trace.events[:end]:
        if event.exclusive_with(start):
            continue
        if event.kind is EventKind.METHOD and event.name == "requires_grad_":
            flag = event.arg(0, "requires_grad")
            if flag is not None and all(isinstance(o, Const) and o.value is True for o in options(flag)):
                continue
            yield _frozen_refs(event.receiver)
        elif event.kind is EventKind.STORE and event.name == "requires_grad":
            if event.args and all(isinstance(o, Const) and o.value is True for o in options(event.args[0])):
                continue
            yield _frozen_refs(event.receiver)


def _frozen_refs(value: object) -> list[Ref] | None:
    found: list[Ref] = []
    for option in options(value) if value is not None else ():
        if isinstance(option, Ref):
            found.append(canonical(option))
        elif isinstance(option, Params):
            found.extend(canonical(source.ref) for source in option.sources)
        else:
            return None
    return found or None


def _unknown_freeze(trace: Trace, start: Event, end: int) -> bool:
    return any(refs_ is None for refs_ in _freezes(trace, start, end))


def _frozen(trace: Trace, ref: Ref, start: Event, end: int, exclude: tuple[Ref, ...] = ()) -> bool:
    """May a freeze before ``end`` cover some of ``ref`` (outside the modules in ``exclude``)?"""
    return any(
        may_overlap(frozen, ref) and not any(may_contain(other, frozen) for other in exclude)
        for found in _freezes(trace, start, end)
        for frozen in found or ()
    )


# --- what the group holds ---------------------------------------------------------------------


def _stored_layers(trace: Trace) -> Iterator[tuple[Ref, bool]]:
    """Modules (and parameters) the code stores as attributes, named from their outermost owner,
    with whether they are parameter-holding torch layers."""
    for store in trace.of_kind(EventKind.STORE):
        if not store.name or not store.args or not isinstance(store.receiver, Ref):
            continue
        owner = canonical(store.receiver)
        if not is_exact(owner):
            continue
        values = list(refs(store.args[0]))
        layer = bool(values) and all(
            v.root.kind is ObjKind.NEW and not v.path and (v.root.qname or "") in PARAM_LAYERS for v in values
        )
        yield owner.child(store.name), layer


def _is_parameter(trace: Trace, ref: Ref) -> bool:
    """Is ``ref`` an ``nn.Parameter`` the code stores on a module (a tensor, not a module)?"""
    for store in trace.of_kind(EventKind.STORE):
        if store.name == ref.path[-1] and store.args and isinstance(store.receiver, Ref):
            if canonical(store.receiver).child(store.name) == ref and any(
                v.root.kind is ObjKind.NEW and v.root.qname == "torch.nn.Parameter" for v in refs(store.args[0])
            ):
                return True
    return False


def _holds_params(trace: Trace, ref: Ref) -> bool:
    """Does the island certainly hold parameters: a parameter itself, a torch layer, a project
    module storing one; or a library model's submodule named like a parameter holder?"""
    if ref.path[-1] in TENSOR_ELEMENTS:
        return True
    stored = list(_stored_layers(trace))
    known = [(path, layer) for path, layer in stored if path.root is ref.root]
    if any(layer and (path == ref or _holds(ref, path)) for path, layer in known):
        return True
    if any(path == ref or _holds(ref, path) for path, _ in known):
        return False  # a module the code builds, with no parameter-holding layer it can see
    return ref.root.cls is None and bool(OPAQUE_ISLAND.search(ref.path[-1]))


def _witnesses(trace: Trace, shard: Event, target: Ref, island: _Cast) -> Iterator[tuple[Ref, tuple[Ref, ...]]]:
    """Parameters of the group other than the island's: torch layers the model's class stores
    inside the target that no earlier group took; for a library model whose layers the code does
    not show, the target itself when only repeated blocks (a loop's elements) were sharded before."""
    earlier = [
        canonical(t) for s in trace.shards if s.index < shard.index and not s.exclusive_with(shard) for t in s.targets
    ]
    stored = [(path, layer) for path, layer in _stored_layers(trace) if path.root is target.root]
    inside = [(path, layer) for path, layer in stored if _holds(target, path)]
    for path, layer in inside:
        if not layer or may_overlap(path, island.ref):
            continue
        if any(may_overlap(t, path) for t in earlier):
            continue
        yield path, (island.ref,)
    if inside or target.root.cls is not None:
        return
    within = tuple(t for t in earlier if t.root is target.root and may_contain(target, t))
    if all(not is_exact(t) and not may_contain(t, island.ref) for t in within):
        yield target, (island.ref, *within)
