from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, EventKind, Obj, ObjKind, canonical, may_overlap, refs, report_node
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature


class OptimizerBeforeShard(Rule):
    code = "FSDP001"
    name = "optimizer-before-shard"
    summary = "optimizer built from parameters captured before `fully_shard`: it steps the old, non-DTensor tensors"
    hint = "build the optimizer after the last `fully_shard` call, from the module's (DTensor) `parameters()`"
    failure = "silent: `step()` changes 0 of N parameters, the loss never improves"
    fix_offer = FixOffer(
        summary=(
            "moves the optimizer's construction to just after the last `fully_shard` of its module, when "
            "both are in one block, it reads the parameters itself and nothing it jumps over uses what it"
            " binds"
        ),
        applicabilities=(Applicability.UNSAFE,),
        safety=(
            "the optimizer's construction moves past the statements between it and the last "
            "`fully_shard`: check that none of them needs the optimizer."
        ),
    )
    docs = """
## What it does
Flags an optimizer constructed from a module's parameters before that module, or any module
inside it or around it, is sharded with `fully_shard`; also when the parameters were captured
earlier in a variable (`params = list(model.parameters())`) and the optimizer is built from it.

## Why is this bad?
`fully_shard` replaces every parameter of the module with a new DTensor parameter. An optimizer
built before that keeps references to the old tensors, which no longer take part in forward or
backward. `optimizer.step()` then updates nothing the model uses: observed with torch 2.13, the
optimizer holds 0 DTensor parameters and after `loss.backward(); opt.step()` **0 of 10** model
parameters change. Nothing warns: the loss simply never improves.
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
for layer in model:
    fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Linear(4, 4)
params = model.parameters()  # a lazy generator: read only when the optimizer consumes it
fully_shard(model)
optimizer = torch.optim.SGD(params, lr=0.1)
""",
        """
import torch
from contextlib import contextmanager
from torch.distributed.fsdp import fully_shard

@contextmanager
def rebuild_param_groups(optimizer, model):
    yield  # the body of the `with` shards the model, then the groups are rebuilt from its DTensors
    optimizer.param_groups.clear()
    optimizer.add_param_group({"params": list(model.parameters())})

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
with rebuild_param_groups(optimizer, model):
    fully_shard(model)
optimizer.step()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

class State:  # holds the optimizers where code we cannot follow reads them back
    def __init__(self, model, optimizers):
        self.model = model
        self.optimizers = tuple_of(optimizers)

def shard(state):
    fully_shard(state.model)
    optimizer = state.optimizers[0]  # the one built before sharding, as far as we can tell
    groups = [{"params": list(state.model.parameters())}]
    optimizer.param_groups.clear()
    optimizer.add_param_group(groups[0])

model = torch.nn.Linear(4, 4)
state = State(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
shard(state)
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # expect: FSDP001
for layer in model:
    fully_shard(layer)
fully_shard(model)
optimizer.step()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard as shard

model = torch.nn.Linear(4, 4)
params = list(model.parameters())  # captured before sharding
shard(model)
optimizer = torch.optim.SGD(params, lr=0.1)  # expect: FSDP001
optimizer.step()
""",
        """
import torch
import torch.distributed.fsdp as fsdp

def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)

def main():
    model = torch.nn.Linear(4, 4)
    optimizer = build_optimizer(model)  # expect: FSDP001
    fsdp.fully_shard(model)
    optimizer.step()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # expect: FSDP001
fully_shard(model)
other = make_optimizer()  # rebuilt below, but the stale one never went anywhere it could be read back
other.add_param_group({"params": list(model.parameters())})
optimizer.step()
""",
    )
    signature = RuntimeSignature(
        evidence="params_unchanged",
        note="the optimizer holds the tensors fully_shard replaced, no DTensor; its steps change no model parameter",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for optimizer in trace.optimizers:
                stale = self._stale_capture(trace, optimizer)
                if stale is not None:
                    shard, module = stale
                    reported, sharding = report_node(optimizer, shard), report_node(shard, optimizer)
                    yield Finding(
                        reported,
                        f"optimizer built from parameters of `{module}` captured before "
                        f"`fully_shard` ({facts.where(sharding, reported)}): its step() updates the old, "
                        "non-DTensor tensors and training silently does nothing",
                        fix=_build_after_sharding(facts, trace, optimizer, shard),
                        related=((sharding, f"`{module}` is sharded here"),),
                    )

    @staticmethod
    def _stale_capture(trace: Trace, optimizer: Event) -> tuple[Event, str] | None:
        """The shard that makes the optimizer's parameters stale, if the optimizer is used after it."""
        obj = optimizer.result.root  # type: ignore[union-attr]
        if obj.params is None:
            return None
        for source in sorted(obj.params.sources, key=lambda s: s.captured_at or 0):
            captured = source.captured_at if source.captured_at is not None else optimizer.index
            for shard, target in trace.shards_between(captured, len(trace.events), optimizer):
                if may_overlap(target, canonical(source.ref)) and _used_after(trace, obj, shard):
                    return shard, canonical(source.ref).text
        return None


def _build_after_sharding(facts: FileFacts, trace: Trace, optimizer: Event, shard: Event) -> Rewrite | None:
    """Move the assignment that builds the optimizer to just after the statement holding the last
    `fully_shard` of its parameters' modules, when both are in one block, the statement reads the
    parameters itself (not a list captured earlier) and nothing it jumps over uses what it binds.
    Unsafe: the statements it jumps over now run before it."""
    obj = optimizer.result.root  # type: ignore[union-attr]
    sources = obj.params.sources if obj.params is not None else ()
    last = max(
        (
            later
            for later, target in trace.shards_between(shard.index - 1, len(trace.events), optimizer)
            if any(may_overlap(target, canonical(source.ref)) for source in sources)
        ),
        key=lambda event: event.index,
        default=shard,
    )
    move = builders.move_after(facts, report_node(optimizer, shard), report_node(last, optimizer))
    if move is None or not _assigns_once(move.statement):
        return None
    block = facts.statement_of(move.statement)[1]  # type: ignore[index]
    for source in sources:
        captured = trace.events[source.captured_at if source.captured_at is not None else optimizer.index]
        if not any(builders.statement_in(facts, frame, block) is move.statement for frame in captured.frames()):
            return None  # built from parameters captured by an earlier statement: moving does not help
    if builders.bound_names(move.statement) & builders.mentioned_names(move.passed):
        return None
    return Rewrite(
        "build the optimizer after the last `fully_shard` (check that the statements it now follows do not need it)",
        move.replacements,
        applicability=Applicability.UNSAFE,
    )


def _assigns_once(statement: cst.BaseStatement) -> bool:
    """``opt = ...`` (one assignment: the optimizer, or whatever holds it, gets a name)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], (cst.Assign, cst.AnnAssign))
        and bool(builders.bound_names(statement))
    )


def _used_after(trace: Trace, optimizer: Obj, shard: Event) -> bool:
    """Is the stale optimizer still used once the module is sharded? One that is only bound to a
    local variable and rebuilt after sharding is harmless; one that is stepped, passed on,
    stored or returned is not, unless code after sharding rewrites its parameter groups."""
    used = False
    escaped: int | None = None  # the first event that hands the optimizer on
    for event in trace.mentions(optimizer):
        after_shard = event.index > shard.index
        if after_shard and _repairs_param_groups(event):
            return False
        if _escapes(event) and escaped is None:
            escaped = event.index
        if after_shard or _escapes(event):
            used = True
    return used and not (escaped is not None and _repaired_unnamed(trace, max(escaped, shard.index)))


def _repaired_unnamed(trace: Trace, after: int) -> bool:
    """Does code after event ``after`` rebuild the parameter groups of an optimizer the trace cannot
    name? Once the stale optimizer has been handed on (composer's ``State`` holds it, and its
    sharding helper repairs ``state.optimizers[0]``), that may be the same one."""
    return any(
        _repairs_param_groups(event) and not any(ref.root.kind is ObjKind.OPTIMIZER for ref in refs(event.receiver))
        for event in trace.events[after + 1 :]
    )


def _escapes(event: Event) -> bool:
    """Does the optimizer leave the code this trace sees: stored in an attribute, passed to a
    function defined elsewhere, or returned from the entry point itself (not from a helper
    whose result the caller binds)?"""
    return event.kind in (EventKind.STORE, EventKind.CALL) or (event.kind is EventKind.RETURN and not event.stack)


def _repairs_param_groups(event: Event) -> bool:
    if event.kind is EventKind.METHOD and event.name == "add_param_group":
        return True
    return event.kind is EventKind.STORE and any("param_groups" in ref.path for ref in refs(event.receiver))
