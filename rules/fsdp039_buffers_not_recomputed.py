from __future__ import annotations

import re
from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, EventKind, Ref, canonical, may_overlap, refs, walk_contents
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# In-place writes that give a buffer values (`self.inv_freq.copy_(...)`).
WRITES = re.compile(r"^(copy_|fill_|zero_|normal_|uniform_|set_|mul_|div_|add_|sub_|clamp_|masked_fill_)$")


class BuffersNotRecomputed(Rule):
    code = "FSDP039"
    name = "meta-buffers-not-recomputed"
    summary = "model built on the meta device is materialised with `to_empty()` and its non-persistent buffers are never recomputed"
    hint = (
        "recompute the non-persistent buffers after `to_empty()` (e.g. a `reset_buffers()`/`init_weights()` that "
        "assigns or `copy_()`s `inv_freq`): a checkpoint load cannot restore them"
    )
    failure = "silent: the buffer (RoPE `inv_freq`, a cached mask) holds uninitialised memory, wrong outputs or NaN"
    docs = """
## What it does
Flags a `to_empty(device=...)` of a module built on the meta device (`with torch.device("meta"):`,
`device="meta"`, `init_empty_weights()`) when a module class of the file or of a project module it
imports (a base class included) registered a
**non-persistent** buffer in it (`self.register_buffer("inv_freq", ..., persistent=False)`: RoPE
frequencies, cached masks) and nothing recomputes that buffer afterwards: no `register_buffer` of
the same name again, no in-place write of it (`x.inv_freq.copy_(...)`), no `.apply(fn)` of the
model, in the code after `to_empty()` (helpers and methods followed, in the file and in the
project's modules, `init_weights()` / `reset_parameters()` included) or in another method of the
class that runs it. A model built by a `build_model()` of another module, or materialised by a
helper there, is followed the same way; the finding goes on the `to_empty()` call, in whichever
file it is. Loading a
checkpoint does not count: non-persistent buffers are not in a state dict.

Not flagged: persistent buffers (the load restores them; without a load FSDP006 applies), a model
not built on meta, a buffer registered lazily (in `forward`, after `to_empty()`), a buffer that an
init method of the file recomputes, a model handed after `to_empty()` to code the file does not show.

## Known problems
- Only model classes of the project are seen (the linted file and the project modules the analysis
  reads, see README "Across the project's modules"): a model of a third-party package (a Hugging
  Face `from_config` model, whose rotary class registers `inv_freq` non-persistently) is not
  reported, nor one whose module is not read (imported with a computed name, over
  `max-file-size`, or past the analysis' budget for other modules).
- An assignment `module.inv_freq = tensor` in code that is not followed is not seen as a recomputation.

## Why is this bad?
`to_empty()` gives every parameter and buffer fresh uninitialised memory. Parameters are then
initialised or loaded from a checkpoint, but a non-persistent buffer is not part of the state dict:
`load_state_dict`, `set_model_state_dict` and `dcp.load` leave it as `to_empty()` left it.
Observed with torch 2.13 on CPU: after `to_empty()` and a full-state-dict `set_model_state_dict`,
the rotary `inv_freq` buffer was still the tensor `to_empty()` allocated, with the same bits, at the
first optimizer step. What it holds is whatever the allocator returned: for a RoPE `inv_freq`
that should start `1.0, 0.316, 0.1, ...`, torch 2.13 on CPU gave `2.5e-24, 4.6e-41, 3.5e-10, ...`
(and in some runs non-finite values). Training runs on without an error, with positions rotated
by meaningless frequencies, or NaN.
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.register_buffer("inv_freq", self.compute(), persistent=False)

    def compute(self):
        return 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))

    def reset_buffers(self):
        self.inv_freq.copy_(self.compute())

with torch.device("meta"):
    rope = Rotary(16)
fully_shard(rope)
rope.to_empty(device="cuda")
rope.reset_buffers()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", torch.ones(dim), persistent=True)

with torch.device("meta"):
    rope = Rotary(16)
fully_shard(rope)
rope.to_empty(device="cuda")
rope.load_state_dict(torch.load("ckpt.pt"))
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

with torch.device("meta"):
    rope = Rotary(16)
fully_shard(rope)
rope.to_empty(device="cuda")  # expect: FSDP039
rope.load_state_dict(torch.load("ckpt.pt"))
""",
    )
    requires = (("register_buffer",), ("to_empty",), ("meta", "init_empty_weights"))
    signature = RuntimeSignature(evidence="buffer_not_recomputed")

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for to_empty in trace.methods("to_empty"):
                modules = [canonical(ref) for ref in refs(to_empty.receiver)]
                if not modules:
                    continue
                left = _buffers_left(facts, trace, to_empty, modules)
                if left:
                    names = ", ".join(f"`{cls}.{name}`" for name, cls in left)
                    yield Finding(
                        to_empty.node,
                        f"`to_empty()` leaves the non-persistent buffer{'s' if len(left) > 1 else ''} {names} "
                        "uninitialised and nothing recomputes it afterwards (a checkpoint load cannot: it is not "
                        "in the state dict): the model runs on garbage",
                    )


def _buffers_left(facts: FileFacts, trace: Trace, to_empty: Event, modules: list[Ref]) -> list[tuple[str, str]]:
    """The non-persistent buffers registered, on the meta device, in the module ``to_empty()``
    materialises, that nothing recomputes afterwards: (name, class) pairs."""
    registered: dict[str, str] = {}
    for event in trace.events[: to_empty.index]:
        name = _non_persistent(event)
        if name and event.ctx.meta_device and _within(event, modules) and not event.exclusive_with(to_empty):
            classes = [ref.root.cls.name for ref in refs(event.receiver) if ref.root.cls is not None]
            registered.setdefault(name, classes[0] if classes else "module")
    if not registered or trace.handed_off(modules, to_empty.index) is not None:
        return []
    later = [event for event in trace.events[to_empty.index + 1 :] if not event.exclusive_with(to_empty)]
    if trace.instance is not None:  # other methods of the class may run afterwards
        later += [
            event
            for other in facts.traces
            if other is not trace and other.instance is not None and other.instance.root.cls is trace.instance.root.cls
            for event in other.events
        ]
    recomputed = set()
    for event in later:
        if event.kind is EventKind.METHOD and event.name == "apply" and _within(event, modules):
            return []  # a function applied to every module: it may recompute them
        recomputed.update(_recomputes(event))
    if "*" in recomputed:
        return []  # a buffer registered under a name we cannot read: it may be any of them
    return [(name, cls) for name, cls in registered.items() if name not in recomputed]


def _non_persistent(event: Event) -> str | None:
    if event.kind is not EventKind.METHOD or event.name != "register_buffer":
        return None
    persistent = event.kwargs.get("persistent", event.args[2] if len(event.args) > 2 else None)
    name = event.arg(0, "name")
    if persistent == Const(False) and isinstance(name, Const) and isinstance(name.value, str):
        return name.value
    return None


def _recomputes(event: Event) -> Iterator[str]:
    """The buffer names an event gives values: registered again, or written in place."""
    if event.kind is EventKind.METHOD and event.name == "register_buffer":
        name = event.arg(0, "name")
        if isinstance(name, Const) and isinstance(name.value, str):
            yield name.value
        else:
            yield "*"
    elif event.kind is EventKind.METHOD and WRITES.match(event.name or ""):
        for value in walk_contents(event.receiver) if event.receiver is not None else ():
            if isinstance(value, Ref) and value.path and isinstance(value.path[-1], str):
                yield value.path[-1]


def _within(event: Event, modules: list[Ref]) -> bool:
    return any(may_overlap(canonical(ref), module) for ref in refs(event.receiver) for module in modules)
