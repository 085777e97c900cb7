from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts, sharded_note
from fsdp2_lint.analysis.model import Const, Event, EventKind, Ref, Value, canonical, may_be_same, may_contain, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

# Names of `nn.Module` / `FSDPModule` methods: a class that overrides one is not adding a forward.
MODULE_API = frozenset(
    {
        "forward", "__call__", "train", "eval", "parameters", "named_parameters", "buffers", "named_buffers",
        "children", "named_children", "modules", "named_modules", "state_dict", "load_state_dict", "to", "cuda",
        "cpu", "half", "float", "double", "bfloat16", "type", "apply", "zero_grad", "requires_grad_", "to_empty",
        "extra_repr", "get_submodule", "get_parameter", "get_buffer", "unshard", "reshard",
        "set_requires_gradient_sync", "set_reshard_after_backward", "set_is_last_backward",
        "set_modules_to_forward_prefetch", "set_modules_to_backward_prefetch", "reset_parameters",
    }
)  # fmt: skip
# Names of a module's own parameters read directly (`model.lm_head.weight`).
PARAMETERS = frozenset({"weight", "bias"})
# Methods and attributes of a tensor that give a view or a cast of it, still a sharded DTensor.
VIEWS = frozenset(
    {"t", "T", "mT", "transpose", "view", "reshape", "permute", "contiguous", "to", "float", "half", "bfloat16",
     "type_as", "unsqueeze", "squeeze", "expand", "flatten"}
)  # fmt: skip
# torch functions that compute with their tensor arguments together (a sharded weight beside plain
# activations fails there).
COMPUTE = frozenset(
    {"torch.matmul", "torch.mm", "torch.bmm", "torch.addmm", "torch.einsum", "torch.embedding", "torch.mv",
     "torch.inner", "torch.outer", "torch.tensordot", "torch.baddbmm"}
)  # fmt: skip
# torch.nn modules without parameters: calling one outside a forward computes with nothing sharded.
PARAMETER_FREE = re.compile(
    r"torch\.nn\.(\w*Loss|Dropout\w*|Identity|Flatten|Unflatten|ReLU\w*|GELU|SiLU|Mish|Tanh|Sigmoid|Softmax\w*|"
    r"LogSoftmax|\w*Pool\dd|Upsample\w*|ModuleList|ModuleDict)$"
)
# Functions of other libraries that take a weight to compute with (fused linear cross-entropy kernels).
FUSED = re.compile(r"linear|cross_?entropy|logits|matmul", re.IGNORECASE)


class ShardedParamsOutsideForward(Rule):
    code = "FSDP019"
    name = "sharded-params-outside-forward"
    summary = (
        "a sharded module's parameters used outside a hooked forward: a custom method (`model.generate`) "
        "not registered with `register_fsdp_forward_method`, or a sharded weight as an operand in a loss"
    )
    hint = (
        'register the method after sharding, `register_fsdp_forward_method(model, "generate")`; compute '
        "with a weight inside the module's `forward` (or call the module), or gather it explicitly "
        "(`weight.full_tensor()`)"
    )
    failure = (
        "`RuntimeError: aten.embedding.default got mixed torch.Tensor and DTensor, need to convert all "
        "torch.Tensor to DTensor before calling distributed operators!` (the op is whichever first "
        "computes with a sharded parameter: `aten.mm`, `aten.addmm`, ...)"
    )
    docs = """
## What it does
Flags code outside a hooked forward that computes with parameters FSDP2 keeps sharded:

- a method of a sharded module (or of a submodule of one) that the project's class defines, other
  than `forward`, called from outside (`model.generate(tok)`, `model.draft.project(h)`), when its
  body calls a submodule that is not sharded itself (`self.emb(tok)`) or computes with a
  parameter (`F.linear(h, self.head.weight)`), and no `register_fsdp_forward_method(model,
  "generate")` in the file registers it;
- a sharded module's weight or bias, or a view of it (`.t()`, `.to(dtype)`), given to a function
  that computes with it (`F.linear(h, model.lm_head.weight)`, `torch.matmul`, a fused
  linear-cross-entropy function from another library), or a submodule that is not sharded
  itself called outside its sharded ancestor's forward.

Not flagged: methods that only call the module (`self(tok)`, `self.model(tok)`) or sharded
submodules, registered methods, weights read inside the module's own forward (or a method it
calls), `weight.full_tensor()` / `weight.to_local()`, metadata (`.shape`, `.dtype`), weights
given to `torch.nn.init` or to the optimizer, methods of the model's class analysed on their own
(who calls them, and whether they are registered, is unknown), methods of a class the file does
not define (Hugging Face's `model.generate(...)` on a model from `from_pretrained`: its class is
not visible here, and its `generate` calls the model's `forward` for each step, through the
hooks), `model.forward(...)` (FSDP003), and a use right after the root's forward, before its
backward, of a parameter in the root's own group (see below).

## Why is this bad?
FSDP2 all-gathers a parameter group in the pre-forward hook of the module it was given to, and
only `module(...)` (or a method registered with `register_fsdp_forward_method`) runs that hook.
Anywhere else the parameters are the sharded `DTensor`s, and the first operator that mixes one
with a plain activation fails. Observed with torch 2.13 (CPU/gloo): an unregistered `generate`
that calls `self.emb(tok)` after a training step raises `RuntimeError: aten.embedding.default
got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor before calling
distributed operators!`; a chunked cross-entropy given `model.lm_head.weight` (the head sharded
on its own) raises it for `aten.mm.default`; a loss helper calling `model.draft.project(h)` (the
draft head sharded on its own) for `aten.addmm.default`. With the method registered, calling
`self(...)` instead, or `weight.full_tensor()`, the same scripts train.

The root is the exception FSDP2 makes: by default it keeps its own group unsharded from its
forward until its backward (it would be all-gathered again at once), so a submodule of the root's
group used between `model(x)` and `loss.backward()` sees whole parameters and works (observed);
the same use before the first forward or after the backward fails.

Use instead:

```python
fully_shard(model)
register_fsdp_forward_method(model, "generate")
```

## Fix safety
For a method called on a module that a `fully_shard` statement of the same file shards itself,
`register_fsdp_forward_method(X, "method")` is inserted right after that statement (the import is
added): FSDP then all-gathers the parameters around each call of the method and reshards after it,
as around `forward`. Safe: the call computed with shards it cannot use, and registering changes
nothing else. No fix for a sharded weight used outside the model, nor for a method of a submodule
that is not sharded itself (it has no FSDP state to register with).

## Known problems
The class must be visible: a method is recognised where the file defines the class of the object
it is called on (directly, or as an attribute the class's `__init__` stores), and a registration
anywhere in the file counts. `weight.full_tensor()` works but all-gathers outside FSDP's schedule
and skips the `MixedPrecisionPolicy` cast; the rule does not report it.
"""
    valid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4)

    def forward(self, tok):
        return self.emb(tok)

    def generate(self, tok):
        return self.emb(tok).argmax(-1)

model = Model()
fully_shard(model)
register_fsdp_forward_method(model, "generate")
out = model.generate(tok)
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4)

    def forward(self, tok):
        return self.emb(tok)

    def generate(self, tok):
        return self(tok).argmax(-1)

model = Model()
fully_shard(model)
out = model.generate(tok)
""",
        """
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.lm_head = nn.Linear(4, 8)

    def forward(self, x):
        return self.body(x)

model = Model()
fully_shard(model.lm_head)
fully_shard(model)
hidden = model(x)
loss = F.cross_entropy(F.linear(hidden, model.lm_head.weight.full_tensor()), y)
""",
    )
    invalid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4)

    def forward(self, tok):
        return self.emb(tok)

    def generate(self, tok):
        return self.emb(tok).argmax(-1)

model = Model()
fully_shard(model)
out = model.generate(tok)  # expect: FSDP019
""",
        """
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.lm_head = nn.Linear(4, 8)

    def forward(self, x):
        return self.body(x)

model = Model()
fully_shard(model.lm_head)
fully_shard(model)
hidden = model(x)
loss = F.cross_entropy(F.linear(hidden, model.lm_head.weight), y)  # expect: FSDP019
""",
    )
    fix_offer = FixOffer(
        summary='insert `register_fsdp_forward_method(X, "method")` after the `fully_shard(X)` that shards X',
        applicabilities=(Applicability.SAFE,),
        safety="FSDP then all-gathers around the method as around forward; nothing else changes",
    )
    requires = (("fully_shard",),)
    signature = RuntimeSignature(
        evidence="sharded_param_outside_forward",
        note="the error's operands include a parameter whose fully_shard group was sharded and not in its forward",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        registered = _registered(facts)
        reported: set[int] = set()
        for trace in facts.traces:
            if _module_method_entry(trace):
                continue  # a model's own method analysed alone: who calls it, and how, is unknown
            # calls whose body is judged as a whole: methods of the project's classes on sharded
            # modules (reported here, or registered), and `X.forward(...)` (FSDP003's)
            judged = {id(call.node) for call in trace.methods("forward")}
            for call in trace.of_kind(EventKind.METHOD):
                found = _unregistered_method(facts, trace, call, registered, judged)
                if found is None or id(call.node) in reported:
                    continue
                reported.add(id(call.node))
                name, method, use, shard = found
                at, related = facts.sharded_elsewhere(name, shard, call.node)
                yield Finding(
                    call.node,
                    f"`{name}.{method}(...)` is not `forward` and is not registered with "
                    f"`register_fsdp_forward_method`: FSDP never all-gathers for it, and it computes with "
                    f"sharded parameters ({facts.code(use.node)}){sharded_note(name, at)}",
                    related=related,
                    fix=_register_after_shard(facts, trace, call, method),
                )
            for use, module, shard in _direct_uses(trace):
                if any(id(frame) in judged for frame in use.stack) or id(use.node) in reported:
                    continue
                reported.add(id(use.node))
                text = facts.code(use.node)
                at, related = facts.sharded_elsewhere(canonical(module).text, shard, use.node)
                yield Finding(
                    use.node,
                    f"`{text}` computes with parameters of a sharded module outside any hooked forward: "
                    f"they are sharded DTensors here{sharded_note(canonical(module).text, at)}",
                    related=related,
                )


def _registered(facts: FileFacts) -> set[str | None]:
    """Method names the file registers with ``register_fsdp_forward_method`` (None: a name not known)."""
    names: set[str | None] = set()
    for trace in facts.traces:
        for registration in trace.calls(apis.REGISTER_FORWARD_METHOD):
            value = registration.arg(1, "method_name")
            names.add(value.value if isinstance(value, Const) and isinstance(value.value, str) else None)
    return names


def _module_method_entry(trace: Trace) -> bool:
    """Is the trace a method of a class with bases outside the file (a model's, likely) run on its own?"""
    instance = trace.instance
    cls = instance.root.cls if instance is not None else None
    return cls is not None and any(base not in ("object", "builtins.object") for base in cls.external_bases())


def _unregistered_method(
    facts: FileFacts, trace: Trace, call: Event, registered: set[str | None], judged: set[int]
) -> tuple[str, str, Event, object] | None:
    """For ``X.m(...)``, a method of X's own class on a sharded X (or a module inside one), not
    registered: (X as written, m, the first use of sharded parameters in its body, X's shard).
    Such a call, registered or not, goes into ``judged``."""
    method = call.name or ""
    node = call.node
    if method in MODULE_API or method.startswith("__"):
        return None
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    if isinstance(node.func.value, cst.Name) and node.func.value.value == "self":
        return None  # a module's own method calling another: the outer call is the one to register
    for module in refs(call.receiver or Const(None)):
        if any(may_contain(outer, canonical(module)) for outer in call.ctx.forward_of):
            continue  # inside the forward of a module around it: already all-gathered
        shard = trace.is_managed(module, call)
        if not shard or not facts.defines(module, method):
            continue
        judged.add(id(node))
        if method in registered or None in registered:
            return None
        body = [event for event in trace.events[call.index + 1 :] if node in event.stack]
        for use, _, _ in _direct_uses(trace, body):
            return facts.code(node.func.value), method, use, shard
    return None


def _direct_uses(trace: Trace, events: list[Event] | None = None) -> Iterator[tuple[Event, Ref, object]]:
    """Events that compute with a sharded module's parameters outside any hooked forward: a call of
    a submodule that is not sharded itself, or a parameter (or a view of it) given to a function
    that computes with it. Yields (the event, the module, its shard)."""
    for event in trace.events if events is None else events:
        if event.kind is EventKind.INVOKE:
            for module in refs(event.receiver or Const(None)):
                if not _known_module(module):
                    continue  # an attribute the analysis cannot see into, or a function stored on a module
                shard = _sharded_outside(trace, event, module)
                if shard and not trace.is_fsdp_module(module, event):
                    yield event, module, shard
                    break
        elif event.kind is EventKind.ATTR and event.name in PARAMETERS:
            for module in refs(event.receiver or Const(None)):
                shard = _sharded_outside(trace, event, module)
                if shard and isinstance(event.result, Ref) and _computed_with(trace, event):
                    yield event, module, shard
                    break


def _known_module(ref: Ref) -> bool:
    """Is ``ref`` a module object the analysis built (a torch.nn layer with parameters, or an object of a
    project class), not an attribute read from one (a stored function, a bound method)?"""
    if ref.path:
        return False
    qname = ref.root.qname or ""
    if qname.startswith("torch.nn."):
        return not PARAMETER_FREE.match(qname)
    return ref.root.cls is not None


def _sharded_outside(trace: Trace, event: Event, module: Ref) -> object:
    """The shard that manages ``module``, when its parameters are sharded at ``event``: not inside
    the forward of a module around it, not unsharded by ``unshard()`` or by the root's forward."""
    whole = canonical(module)
    if any(may_contain(outer, whole) for outer in event.ctx.forward_of):
        return False
    shard = trace.is_managed(module, event)
    if not shard:
        return False
    if any(
        earlier.index < event.index and any(may_contain(canonical(ref), whole) for ref in refs(earlier.receiver))
        for earlier in trace.methods("unshard")
    ):
        return False
    group = _group(trace, event, whole)
    if group is None or _whole_after_forward(trace, event, group):
        return False
    return shard


def _group(trace: Trace, event: Event, module: Ref) -> tuple[Ref, Event | None] | None:
    """The innermost sharded module around ``module`` and its ``fully_shard`` (None: one a method
    of the class shards); None when none is known."""
    best: tuple[Ref, Event | None] | None = None
    candidates = [(target, shard) for shard, target in trace.shards_before(event)]
    candidates += [(canonical(ref), None) for ref in trace.assumed_sharded]
    for target, shard in candidates:
        if may_contain(target, module) and (best is None or len(target.path) > len(best[0].path)):
            best = (target, shard)
    return best


def _whole_after_forward(trace: Trace, event: Event, group: tuple[Ref, Event | None]) -> bool:
    """Does the group stay unsharded after its forward (the root by default, or
    ``reshard_after_forward=False``) and did its forward run before ``event``, with no backward since?"""
    target, shard = group
    setting = shard.arg(1, "reshard_after_forward") if shard is not None else None
    if setting is None or setting == Const(None):
        others = [canonical(t) for s, t in trace.shards_before(event)] + list(map(canonical, trace.assumed_at(event)))
        stays = not any(may_contain(other, target) and other.path != target.path for other in others)
    elif isinstance(setting, Const):
        stays = setting.value is False
    else:
        stays = True  # not known: it may
    if not stays:
        return False
    for earlier in reversed(trace.events[: event.index]):
        if earlier.kind is EventKind.METHOD and earlier.name == "backward":
            return False
        if earlier.kind is EventKind.CALL and earlier.qname == "torch.autograd.backward":
            return False
        if earlier.kind is EventKind.INVOKE and event.node not in earlier.frames():
            if any(may_contain(canonical(ref), target) for ref in refs(earlier.receiver or Const(None))):
                return True
    return False


def _computed_with(trace: Trace, read: Event) -> bool:
    """Is the parameter read by ``read`` (or a view of it) given to a function that computes with it?"""
    derived: list[Value] = [read.result]
    for event in trace.events[read.index + 1 : read.index + 400]:
        if event.kind in (EventKind.METHOD, EventKind.ATTR) and event.name in VIEWS:
            if _holds(event.receiver, derived) and event.result is not None:
                derived.append(event.result)
        elif event.kind is EventKind.CALL and _computes(event.qname or ""):
            if any(_holds(value, derived) for value in (*event.args, *event.kwargs.values())):
                return True
    return False


def _computes(qname: str) -> bool:
    if qname.startswith("torch.nn.functional.") or qname in COMPUTE:
        return True
    if qname.startswith(("torch.", "builtins.")) or not qname:
        return False
    return bool(FUSED.search(qname.rpartition(".")[2]))


def _holds(value: Value | None, derived: list[Value]) -> bool:
    if value is None:
        return False
    for ref in refs(value):
        for known in derived:
            if any(may_be_same(canonical(ref), canonical(other)) and ref.path == other.path for other in refs(known)):
                return True
    return False


def _register_after_shard(facts: FileFacts, trace: Trace, call: Event, method: str) -> Rewrite | None:
    """``register_fsdp_forward_method(X, "m")`` right after the ``fully_shard(X)`` statement that
    made X (the call's receiver itself) an FSDP module, in this file: FSDP then all-gathers around
    ``X.m(...)`` as around ``forward``."""
    shards = [trace.is_fsdp_module(module, call) for module in refs(call.receiver or Const(None))]
    shard = shards[0] if len(shards) == 1 and isinstance(shards[0], Event) else None
    if shard is None or facts.text_of(shard.node) is not facts.text or not isinstance(shard.node, cst.Call):
        return None
    if not shard.node.args or shard.node.args[0].keyword not in (None,) or shard.node.args[0].star:
        return None
    register, needed = builders.reference(facts.module, apis.REGISTER_FORWARD_METHOD)
    code = f'{builders.code_of(register)}({builders.code_of(shard.node.args[0].value)}, "{method}")\n'
    insertion = builders.insert_after(facts, shard.node, code)
    if insertion is None:
        return None
    return Rewrite(
        f"register `{method}` with register_fsdp_forward_method after the fully_shard",
        insertion,
        imports=(needed,) if needed is not None else (),
    )
