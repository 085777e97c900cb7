from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    Loaded,
    ObjKind,
    Ref,
    StateDict,
    Value,
    may_be_wrapper,
    refs,
    report_node,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class LoadPlainStateDict(Rule):
    code = "FSDP013"
    name = "load-plain-state-dict"
    summary = "`load_state_dict` of a full, plain-tensor state dict into a sharded model"
    hint = (
        "`set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True))` (add "
        "`broadcast_from_rank0=True` to read the file on rank 0 only)"
    )
    failure = (
        "`RuntimeError: ... got mixed torch.Tensor and DTensor` (`assign=True`: `AttributeError: ... '_local_tensor'`)"
    )
    docs = """
## What it does
Flags `model.load_state_dict(state)` on a model sharded with `fully_shard` when `state` holds
plain tensors: read with `torch.load` / safetensors `load_file` from one file, or taken from a
module that is not sharded. Not flagged: each rank loading its own shard file (the path varies
with the rank), a state dict taken from a sharded module, or one read from a file whose tensors
the code makes DTensors before the load (`distribute_tensor(t, mesh)` over its items).

## Where it is reported
At the `load_state_dict` when the function that loads also reads the state dict (a
`load_pretrained(model, path)` helper is wrong on its own); when a helper loads whatever it is
given (`restore(model, state)`), at the call that hands it the plain state dict, in the innermost
function that both obtains it and loads.

## Why is this bad?
FSDP2 only loads sharded (DTensor) state dicts through `load_state_dict`. Observed with torch
2.13: `RuntimeError: Error(s) in loading state_dict for FSDPModel: While copying the parameter
named "emb.weight" ... aten.copy_.default got mixed torch.Tensor and DTensor` (the same with
`strict=False`); with `assign=True`, `AttributeError: 'Parameter' object has no attribute
'_local_tensor'`. `set_model_state_dict(..., full_state_dict=True)` shards the full tensors for you.
"""
    valid = (
        """
import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard

fully_shard(model)
set_model_state_dict(model, torch.load("full.pt"), options=StateDictOptions(full_state_dict=True))
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

model.load_state_dict(torch.load("full.pt"))
fully_shard(model)
""",
        """
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import fully_shard

fully_shard(model)
state = {"model": model.state_dict()}
dcp.load(state, checkpoint_id="ckpt")
model.load_state_dict(state["model"])
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

class TrainState:  # holds the model; its load_state_dict is its own
    def __init__(self, model):
        self.model = model
        self.step = 0

    def load_state_dict(self, state):
        self.step = state["step"]

class Trainer:
    def __init__(self, model):
        self.state = TrainState(model)

    def fit(self):
        fully_shard(self.state.model)

    def resume(self, path):
        self.state.load_state_dict(torch.load(path))
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
checkpoint = torch.load("pretrained.pt", map_location="cpu")
model.load_state_dict(checkpoint["model"], strict=False)  # expect: FSDP013
""",
        """
from torch.distributed.fsdp import fully_shard

def grow(model, donor):
    for layer, state in zip(model.layers, [block.state_dict() for block in donor.layers]):
        layer.load_state_dict(state, assign=True)  # expect: FSDP013

for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
grow(model, Model())
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

class Wrapped(torch.nn.Module):  # a module holding the model: nn.Module's load_state_dict
    def __init__(self, model):
        super().__init__()
        self.model = model

class Trainer:
    def __init__(self, model):
        self.state = Wrapped(model)

    def fit(self):
        fully_shard(self.state.model)

    def resume(self, path):
        self.state.load_state_dict(torch.load(path))  # expect: FSDP013
""",
    )
    requires = (("fully_shard",), ("load_state_dict",))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("RuntimeError", "AttributeError"),
        message=r"mixed torch\.Tensor and DTensor|_local_tensor",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for load in trace.methods("load_state_dict"):
                state = load.arg(0, "state_dict")
                plain = _plain(trace, state, load) if state is not None else None
                if plain is None:
                    continue
                for module in _modules(load):
                    if _own_loader(facts, module):
                        continue
                    if trace.sharded_overlap(module, load):
                        source = trace.obtained(plain, load)
                        reported = report_node(load, source) if source is not None else load.node
                        yield Finding(reported, _message(facts.name_as_written(module, reported), load))
                        break


def _message(module: str, load: Event) -> str:
    assign = load.kwargs.get("assign")
    failure = "... '_local_tensor'" if assign == Const(True) else "... mixed torch.Tensor and DTensor"
    return (
        f"`{module}` is sharded: `load_state_dict` of a full, plain-tensor state dict fails with `{failure}`; "
        "use `set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True))`"
    )


def _modules(load: Event) -> list[Ref]:
    """Receivers that are modules: not optimizers (FSDP021) and not DDP/FSDP1 wrappers."""
    if may_be_wrapper(load.receiver):
        return []
    return [ref for ref in refs(load.receiver) if ref.root.kind is not ObjKind.OPTIMIZER]


def _own_loader(facts: FileFacts, ref: Ref) -> bool:
    """Is ``ref`` an object whose class defines ``load_state_dict`` itself and is no torch module
    (composer's ``State``, which holds the model)? Its method is its own, not ``nn.Module``'s."""
    return facts.defines(ref, "load_state_dict") and all(
        obj.root.cls is not None and all(base.startswith(PLAIN_BASES) for base in obj.root.cls.external_bases())
        for obj in facts.objects_in(ref)
    )


# Bases that make no class a torch module.
PLAIN_BASES = ("builtins.", "abc.", "typing.")


def _plain(trace: Trace, state, load: Event) -> Value | None:
    """The full, plain-tensor state dict (or file contents) that ``state`` may be: not what the
    code made DTensors of before the load (``distribute_tensor(t, mesh)`` over its items)."""
    for value in walk_contents(state):
        if isinstance(value, Loaded) and not value.per_rank and not _distributed(trace, load):
            return value
        if isinstance(value, StateDict) and isinstance(value.owner, Ref):
            if value.full is True or not trace.sharded_overlap(value.owner, trace.events[value.at]):
                return value
    return None


def _distributed(trace: Trace, load: Event) -> bool:
    """Were tensors read from a file made DTensors before ``load`` (each rank keeps its shard)?"""
    return any(
        any(isinstance(v, Loaded) for arg in call.args[:1] for v in walk_contents(arg))
        for call in trace.calls(*apis.DISTRIBUTE_TENSOR)
        if call.index < load.index
    )
