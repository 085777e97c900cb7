from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Event,
    EventKind,
    Ref,
    canonical,
    is_exact,
    refs,
    report_node,
    strict_ancestor,
)
from fsdp2_lint.analysis.trace import Trace, read_by_name
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class SubmoduleForwardFirst(Rule):
    code = "FSDP027"
    name = "submodule-forward-before-root"
    summary = "a sharded submodule runs forward before the sharded root's first forward"
    hint = (
        "run the first forward through the root (`model(x)`), e.g. a warm-up of the whole model; a check of one "
        "block belongs after it"
    )
    failure = (
        "`RuntimeError: FSDP state has already been lazily initialized for 0 ... FSDP requires running forward "
        "through the root module first` at the root's first forward"
    )
    docs = """
## What it does
Flags a call of a module sharded with `fully_shard` (`model.layers[0](x)`, `model.encoder(x)`,
a warm-up or a sanity check of one block) that runs after its root was sharded and before the
root's first forward, when the root then runs forward. Not flagged: the same call after the root's
first forward, calls inside the root's own forward, a module nothing shards on its own, and a
sharded model whose root never runs forward in the file.

## Where it is reported
At the submodule's call; for a helper that is right on its own (`warm_up(model)` runs one block)
but runs before the root's first forward, at the call of the helper.

## Why is this bad?
FSDP2 initialises its state lazily at the first forward: the module that runs forward first
becomes the root of the lazy initialisation. Observed with torch 2.13 (CPU/gloo): after
`model.layers[0](x)`, the root's first forward `model(x)` raises `RuntimeError: FSDP state has
already been lazily initialized for 0 / FSDP requires running forward through the root module
first` — the job dies at its first training step, after the warm-up that caused it succeeded.

Use instead: warm up or check through the root, `model(x)`, or run the check of one block after
the root's first forward.

## Known problems
A child sharded only by a loop over the children (`for _, child in model.named_children():
fully_shard(child)`) and then called by its name (`model.encoder(x)`, `f = model.encoder; f(x)`)
is not reported: for a class the analysis cannot see, `model.encoder` may as well be a method
(`model.tie_weights`) as one of those children.
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
loss = model(x).sum()
with torch.no_grad():
    probe = model.layers[0](h)
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
with torch.no_grad():
    model.layers[0](x)  # expect: FSDP027
loss = model(x).sum()
""",
    )
    requires = (("fully_shard",),)
    signature = RuntimeSignature(
        evidence="exception",
        exception=("RuntimeError",),
        message=r"FSDP state has already been lazily initialized|requires running forward through the root",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            forwards = [event for event in trace.events if _called_modules(trace, event)]
            for call in forwards:
                found = _early_submodule_forward(trace, call, forwards)
                if found is None:
                    continue
                module, root, first = found
                reported = report_node(call, first)  # a helper right on its own, called too early: its call
                yield Finding(
                    reported,
                    f"`{module.text}` runs forward before `{root.text}`'s first forward "
                    f"(at {facts.where(first.node, reported)}): FSDP initialises from the first module that runs "
                    f"forward, so `{root.text}(...)` then raises `RuntimeError: FSDP state has already been lazily "
                    "initialized`",
                    related=((first.node, f"`{root.text}`'s first forward"),),
                )


def _early_submodule_forward(trace: Trace, call: Event, forwards: list[Event]) -> tuple[Ref, Ref, Event] | None:
    """(the submodule, its root, the root's first forward) when ``call`` runs a sharded submodule
    before the first forward of a sharded root around it, and that forward follows."""
    if call.ctx.forward_of:
        return None  # inside some module's forward: the root's forward already started
    callers = _enclosing_receivers(trace, call)
    for module in _called_modules(trace, call):
        if any(strict_ancestor(caller, module) and trace.is_fsdp_module(caller, call) for caller in callers):
            continue  # in a method of a sharded module around it (`generate`, registered as a forward)
        if not trace.is_fsdp_module(module, call):
            continue
        for shard, root in trace.shards_before(call):
            if not (is_exact(root) and strict_ancestor(root, module)):
                continue
            root_forwards = [f for f in forwards if f.index > shard.index and root in _called_modules(trace, f)]
            before = [f for f in root_forwards if f.index < call.index]
            after = [f for f in root_forwards if f.index > call.index and not f.exclusive_with(call)]
            if not before and after:
                return module, root, after[0]
    return None


def _enclosing_receivers(trace: Trace, call: Event) -> list[Ref]:
    """The modules whose methods the call runs inside (the receivers of the calls on its stack)."""
    return [
        canonical(r)
        for node in call.stack
        for event in trace.invocations_at(node)
        if event.index < call.index
        for r in refs(event.receiver)
    ]


def _called_modules(trace: Trace, event: Event) -> list[Ref]:
    """The modules a call runs forward: `m(x)`, `model.layers[0](x)`, also `model.encoder(x)` where
    `model.encoder` is itself given to `fully_shard`. An attribute called through a name
    (`f = getattr(model, "tie_weights"); f()`) is read as the same call spelled directly: a bound
    method unless the attribute is a sharded module; a loop's `fully_shard(child)` over the
    children does not make it one."""
    if event.kind is EventKind.INVOKE:
        called = [canonical(r) for r in refs(event.receiver)]
    elif event.kind is EventKind.METHOD and event.name and event.receiver is not None:
        called = [canonical(Ref(r.root, (*r.path, event.name))) for r in refs(event.receiver)]
    else:
        return []
    return [module for module in called if not read_by_name(module) or module in trace.sharded_targets]
