from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    EventKind,
    ObjKind,
    Ref,
    Tuple,
    Value,
    canonical,
    container_items,
    is_exact,
    is_loop_element,
    options,
    refs,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

PARAMETER = "torch.nn.Parameter"
# Factories whose first argument is the shape: `torch.zeros(())` is a scalar.
SHAPED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})


class ScalarParameter(Rule):
    code = "FSDP032"
    name = "scalar-parameter"
    summary = "a module with a scalar (0-d) `nn.Parameter` is sharded with `fully_shard`"
    hint = "make the parameter 1-D with one element: `nn.Parameter(torch.tensor([1.0]))` (`torch.ones(1)`)"
    failure = (
        "`ValueError: fully_shard doesn't support scalar parameters. Change temperature to a 1D tensor with "
        "numel equal to 1.` at the `fully_shard` call"
    )
    docs = """
## What it does
Flags a `fully_shard` call whose group takes in a 0-d parameter: a module (or one inside it) that
stores `nn.Parameter(torch.tensor(1.0))`, `nn.Parameter(torch.zeros(()))`, `torch.ones([])`,
`torch.full((), v)` — a learned temperature, scale or logit bias — and is not yet managed by an
earlier `fully_shard` group. Not flagged: `torch.tensor([1.0])` and `torch.ones(1)` (1-D, one
element), scalars stored as buffers or plain attributes, and parameters whose shape is not a
literal the analysis can read.

## Where it is reported
At the `fully_shard` call whose group takes the parameter in; the message names the parameter and
where it is created.

## Why is this bad?
FSDP2 shards each parameter along dimension 0, which a 0-d tensor does not have. Observed with
torch 2.13 (CPU/gloo): `fully_shard(model)` raises `ValueError: fully_shard doesn't support scalar
parameters. Change scale to a 1D tensor with numel equal to 1.` (a one-element 1-D parameter
shards and trains).

Use instead: `self.temperature = nn.Parameter(torch.tensor([1.0]))`. A checkpoint saved with the
0-d shape then needs a reshape when it is loaded.

## Known problems
The module must be one the analysis names exactly, or every block of a container that a loop over
it shards (`ModuleList(Block(d) for _ in range(n))`, then `for block in model.layers:
fully_shard(block)`: one block of the comprehension stands for all). A shape computed by arithmetic
(`nn.Parameter(torch.ones([]) * math.log(1 / 0.07))`) is not read.
"""
    valid = (
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.temperature = nn.Parameter(torch.tensor([1.0]))
        self.register_buffer("step", torch.tensor(0))

fully_shard(Head())
""",
    )
    invalid = (
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.temperature = nn.Parameter(torch.tensor(1.0))

head = Head()
fully_shard(head)  # expect: FSDP032
""",
    )
    requires = (("fully_shard",), ("Parameter",))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("ValueError",),
        message=r"fully_shard doesn't support scalar parameters",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            scalars = list(_scalar_parameters(trace))
            taken: set[int] = set()  # scalars a group already took in (its call raised)
            for shard in trace.shards:
                for scalar in scalars:
                    if id(scalar) in taken or scalar.store.index > shard.index or not _takes(shard, scalar):
                        continue
                    taken.add(id(scalar))
                    yield Finding(
                        shard.node,
                        f"`{scalar.owner.text.replace('[*]', '[i]')}.{scalar.name}` is a scalar (0-d) parameter (created at "
                        f"{facts.where(scalar.created.node, shard.node)}), which `fully_shard` cannot shard: "
                        "`ValueError: fully_shard doesn't support scalar parameters`",
                        related=((scalar.created.node, f"`{scalar.name}` created 0-d here"),),
                    )
                    break


@dataclass(frozen=True)
class _Scalar:
    store: Event  # `module.name = nn.Parameter(...)`
    created: Event  # the `nn.Parameter(...)` call
    owner: Ref  # the module that holds it, named from its outermost owner
    holder: Ref  # the same module as the store named it (a block built in a comprehension has no owner yet)
    name: str


def _scalar_parameters(trace: Trace) -> Iterator[_Scalar]:
    for store in trace.of_kind(EventKind.STORE):
        holders = list(refs(store.receiver))
        if len(holders) != 1 or not store.args or not store.name or not is_exact(holders[0]):
            continue
        for value in refs(store.args[0]):
            created = value.root.event if value.root.kind is ObjKind.NEW and not value.path else None
            if created is not None and created.qname == PARAMETER and _is_scalar(created.arg(0, "data")):
                yield _Scalar(store, created, canonical(holders[0]), holders[0], store.name)


def _is_scalar(data: Value | None) -> bool:
    """Is the tensor certainly 0-d: `torch.tensor(<number>)`, or a factory given an empty shape?"""
    made = [ref.root.event for ref in refs(data)] if data is not None else []
    if len(made) != 1 or made[0] is None:
        return False
    call = made[0]
    if call.qname == "torch.tensor":
        value = call.arg(0, "data")
        return value is not None and all(
            isinstance(o, Const) and isinstance(o.value, (int, float, bool)) for o in options(value)
        )
    if call.qname in SHAPED and len(call.args) == 1 and "size" not in call.kwargs:
        return _empty_shape(call.args[0])
    if call.qname == "torch.full" and call.args:
        return _empty_shape(call.args[0])
    return False


def _empty_shape(shape: Value) -> bool:
    found = list(options(shape))
    return bool(found) and all(
        (isinstance(o, Tuple) and not o.items) or (container_items(o) == [] and isinstance(o, Ref)) for o in found
    )


def _takes(shard: Event, scalar: _Scalar) -> bool:
    """Does the call's group certainly take in the scalar's module: a target that is it or an
    ancestor of it, named exactly, or the very object that stored it (a loop's block)?"""
    named = ((canonical(t), scalar.owner) for t in shard.targets)
    argument = shard.arg(0, "module")
    given = ((ref, scalar.holder) for ref in (refs(argument) if argument is not None else ()))
    return any(_holds(target, module) for target, module in (*named, *given))


def _holds(target: Ref, module: Ref) -> bool:
    """Is ``target`` the module or an ancestor of it, certainly? Where the target is the element of
    a loop over a container (`for block in model.layers: fully_shard(block)`), the loop reaches every
    element, so the module may be any of them: one element of a comprehension stands for all."""
    if target.root is not module.root or len(module.path) < len(target.path):
        return False
    prefix = zip(target.path, module.path[: len(target.path)], strict=True)
    below = Ref(module.root, module.path[len(target.path) :])
    return is_exact(below) and all(mine == theirs or is_loop_element(mine) for mine, theirs in prefix)
