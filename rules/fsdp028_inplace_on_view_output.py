from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    EventKind,
    Obj,
    Ref,
    Tuple,
    Value,
    canonical,
    options,
    refs,
    report_node,
    strict_ancestor,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Tensor methods (and `torch.<name>` functions) whose result is a view of their input.
VIEWS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "transpose",
        "t",
        "permute",
        "squeeze",
        "unsqueeze",
        "narrow",
        "expand",
        "expand_as",
        "flatten",
        "unflatten",
        "select",
        "diagonal",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "unfold",
        "as_strided",
    }
)
# Those whose result is a tuple of views: an element of it is a view.
MULTI_VIEWS = frozenset({"chunk", "split", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit"})
# Methods with a trailing underscore that do not write the tensor's values.
NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream_"})


class InplaceOnViewOutput(Rule):
    code = "FSDP028"
    name = "inplace-on-view-output"
    summary = "in-place op on the output of a sharded submodule that is (or may be) a view"
    hint = (
        "use an out-of-place op (`h = h + x`, not `h += x`), or `.clone()` the output before the in-place op; "
        "`reshard_after_forward=False` on that module also avoids the failure"
    )
    failure = (
        "`UserWarning: FSDP2-wrapped module (...) returned a view tensor`, then in backward `RuntimeError: "
        "setStorage: sizes [...] ... out of bounds for storage of size 0` (the module's parameters were never "
        "all-gathered again)"
    )
    severity = Severity.WARNING
    docs = """
## What it does
Flags an in-place op on the tensor a `fully_shard`-ed submodule returned when its forward returns
a view: `h = self.block(h)` then `h += x`, `h.add_(x)`, `h.mul_(s)`, `h[:, :d] *= s`,
`h[mask] = 0` (also in a helper given `h`), `torch.relu_(h)` or `F.relu(h, inplace=True)`, where
the block's forward ends in `.view(...)`, `.reshape(...)`, `.transpose(...)`, `.squeeze(...)`
and the like, or an element of `.chunk(...)`. Where the analysis does not know the class of the
module called (a block taken from an `nn.ModuleList` built from a generator), it is flagged when
a `forward` of the file returns a view (the message names it). Not flagged: a forward that
returns a fresh tensor (`return x + self.mlp(x)`), a torch built-in module (`nn.Linear`), the
output of a module that is not sharded, an out-of-place op (`h = h + x`), an in-place op on
`h.clone()`, a module run or an op done under `torch.no_grad()` / `torch.inference_mode()`
(FSDP2 registers no hook then), the root model's own output (FSDP2 keeps the root's parameters
after forward; it ran without error), and a module sharded with `reshard_after_forward=False`.

## Why is this bad?
After a sharded module's forward, FSDP2 frees the all-gathered parameters
(`reshard_after_forward=True`, the default for every module but the root) and registers a hook on
the output tensors that all-gathers them again at the start of that module's backward. An
in-place op on an output that is a view rewrites the view's autograd history, so that hook never
runs: backward then computes with parameters whose storage is freed. Observed with torch 2.13
(CPU/gloo): a block whose forward returns `self.lin(x).view(...)` (also `.reshape`, `.transpose`,
`.unsqueeze(0).squeeze(0)`, a slice) followed by `h += 1.0`, `h.add_(1)`, `h.mul_(2)`, `h[0] = 0`
or `torch.relu_(h)` in the parent's forward warns `FSDP2-wrapped module (Block) returned a view
tensor` and then fails in backward with `RuntimeError: setStorage: sizes [16, 16], strides [16, 1],
storage offset 0, and itemsize 4 requiring a storage size of 1024 are out of bounds for storage of
size 0`. A block that returns a view of its input (`return x[:, :]`) fails at once with `Output 0
of Alias is a view and is being modified inplace` (FSDP2 passes the inputs through a custom autograd
function). The same code without FSDP trains; with `reshard_after_forward=False` it trains too. When
nothing before the module needs a gradient (its input does not require grad: the first block, fed
the batch), its backward needs no parameters and the run trained as without the in-place op (the
hook is still dropped; anything added before the block makes it fail). An
in-place op on a fresh output (`return self.lin(x)`, `return x + self.lin(x)`,
`.transpose(0, 1).contiguous()`), or on a view under `torch.no_grad()`, works. (An element of
`.chunk(...)` written in place fails without FSDP too: `Output 0 of Split is a view and
is being modified inplace ... returns multiple views`.) Older torch versions were not checked.

Use instead:

```python
h = self.block(h)
h = h + x  # or: h = self.block(h).clone(); h += x
```

## Known problems
Whether a module's output is a view is known only where the analysis sees the forward that runs:
a module of a library class (`LlamaDecoderLayer`) is not flagged, nor is a tensor unpacked from a
`.chunk(...)` the forward returns (`a, b = block(x)`), a slice taken in the forward
(`return out[..., :d]`), or an in-place op on `h.contiguous()` (which is `h` itself when `h` is
contiguous). A model whose forward is only analysed on its own (its sharding and its call in code
the analysis does not follow) is not flagged either.
"""
    valid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).view(x.shape)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        h = self.block(x)
        h = h + x
        g = self.block(h).clone()
        g += x
        return g

model = Model()
fully_shard(model.block)
fully_shard(model)
model(batch).sum().backward()
""",
    )
    invalid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).view(x.shape)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        h = self.block(x)
        h += x  # expect: FSDP028
        return h

model = Model()
fully_shard(model.block)
fully_shard(model)
model(batch).sum().backward()
""",
    )
    requires = (("fully_shard",),)
    signature = RuntimeSignature(
        evidence="inplace_on_view_output",
        note="a sharded submodule's output that is a view is modified in place before backward (its version "
        "counter moved), so FSDP2's pre-backward all-gather hook on it is dropped; backward then raises "
        "`setStorage: ... out of bounds for storage of size 0`",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        view_forwards = _view_forwards(facts)
        for trace in facts.traces:
            for call in trace.of_kind(EventKind.INVOKE):
                if call.ctx.no_grad or call.result is None:
                    continue
                module = _resharded_submodule(trace, call)
                if module is None:
                    continue
                for output, why in _views(call, view_forwards):
                    for write in _writes(trace, output, call):  # the first in-place op drops the hook
                        node = report_node(write, call)
                        if id(node) in reported:
                            continue
                        reported.add(id(node))
                        name = canonical(module).text
                        yield Finding(
                            node,
                            f"in-place op on the output of `{name}`, which `fully_shard` shards, and whose forward "
                            f"{why}: the in-place op drops FSDP2's pre-backward hook on it, so backward runs with "
                            "freed parameters (`setStorage: ... out of bounds for storage of size 0`)",
                        )
                        break


def _view_forwards(facts: FileFacts) -> dict[str, str]:
    """``Class.forward`` → the view op it returns, for the forwards analysed on their own (no code
    of the file calls their module with a known class) that return a view."""
    found: dict[str, str] = {}
    for trace in facts.traces:
        if trace.instance is None or not trace.entry.endswith(".forward"):
            continue
        for event in trace.of_kind(EventKind.RETURN):
            if event.stack or event.result is None:
                continue
            for value in options(event.result):
                origin = value.root.event if isinstance(value, Ref) and not value.path else None
                if origin is not None and _view_name(origin) in VIEWS:
                    found.setdefault(trace.entry, _view_name(origin) or "")
    return found


def _resharded_submodule(trace: Trace, call: Event) -> Ref | None:
    """The module called, when it is sharded, is not the root (another sharded module contains it)
    and frees its parameters after forward (not ``reshard_after_forward=False``)."""
    for ref in refs(call.receiver) if call.receiver is not None else ():
        if not ref.path and (ref.root.qname or "").startswith("torch.nn."):
            continue  # a torch built-in module returns a fresh tensor
        shard = trace.is_fsdp_module(ref, call)
        if not shard:
            continue
        if isinstance(shard, Event) and shard.kwargs.get("reshard_after_forward") == Const(False):
            continue
        target = canonical(ref)
        outer = [t for _, t in trace.shards_before(call)] + trace.assumed_at(call)
        if any(strict_ancestor(other, target) for other in outer):
            return ref
    return None


def _views(call: Event, view_forwards: dict[str, str]) -> Iterator[tuple[Obj, str]]:
    """The objects the call returned that are views (the forward the call ran returns one), or may
    be (the analysis does not know the module's class, and a forward of the file returns a view)."""
    values: list[Value] = []
    for option in options(call.result) if call.result is not None else ():
        if isinstance(option, Tuple):  # `return out.view(...), aux`
            values.extend(part for item in option.items for part in options(item))
        else:
            values.append(option)
    for value in values:
        if not isinstance(value, Ref):
            continue
        obj, origin = value.root, value.root.event
        if origin is None:
            continue
        if value.path:
            if _view_name(origin) in MULTI_VIEWS and value.path[-1].startswith("["):
                yield obj, f"returns a view (an element of `.{_view_name(origin)}(...)`)"
            continue
        if origin is call:
            if view_forwards:
                forward, view = next(iter(view_forwards.items()))
                yield obj, f"may be `{forward}`, which returns a view (`.{view}(...)`)"
        elif _view_name(origin) in VIEWS:
            yield obj, f"returns a view (`.{_view_name(origin)}(...)`)"


def _view_name(event: Event) -> str | None:
    if event.kind is EventKind.METHOD:
        return event.name
    if (
        event.kind is EventKind.CALL
        and event.qname
        and event.qname.startswith("torch.")
        and event.qname.count(".") == 1
    ):
        return event.qname.split(".")[1]
    return None


def _writes(trace: Trace, obj: Obj, call: Event) -> Iterator[Event]:
    """Events after the call, and before a backward pass that would have run the hook, that write
    the object's values in place."""
    backwards = [event.index for event in trace.methods("backward") if event.index > call.index]
    backwards += [event.index for event in trace.calls("torch.autograd.backward") if event.index > call.index]
    for event in trace.mentions(obj, after=call.index):
        if backwards and event.index > min(backwards):
            break  # the backward ran the hook already
        if event.exclusive_with(call) or event.ctx.no_grad or event.ctx.against_default:
            continue  # not in this run of the module; no autograd; only for callers that pass the argument
        if event.kind is EventKind.INPLACE and _is(event.receiver, obj):
            yield event
        elif event.kind is EventKind.METHOD and _in_place_name(event.name) and _is(event.receiver, obj):
            yield event
        elif event.kind is EventKind.STORE and isinstance(event.node, cst.Subscript) and _is(event.receiver, obj):
            yield event
        elif event.kind is EventKind.CALL and event.args and _is(event.args[0], obj):
            qname = event.qname or ""
            if (qname.startswith("torch.") and _in_place_name(qname.rsplit(".", 1)[-1])) or event.kwargs.get(
                "inplace"
            ) == Const(True):
                yield event


def _in_place_name(name: str | None) -> bool:
    return bool(name) and name.endswith("_") and not name.startswith("_") and name not in NOT_WRITES


def _is(value: Value | None, obj: Obj) -> bool:
    """Is the value the object itself, or a part of it taken by subscripts (``h[0]``, a view of it)?"""
    if value is None:
        return False
    return any(
        ref.root is obj and all(e.startswith("[") for e in ref.path) for ref in options(value) if isinstance(ref, Ref)
    )
