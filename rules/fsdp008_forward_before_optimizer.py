from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    EventKind,
    Ref,
    canonical,
    is_loop_element,
    may_be_same,
    may_contain,
    may_overlap,
    refs,
    report_node,
    strict_ancestor,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

FORWARDS = frozenset({"generate"})  # methods that run the module's forward through its hooks


class ForwardBeforeOptimizer(Rule):
    code = "FSDP008"
    name = "forward-before-optimizer"
    severity = Severity.ERROR
    summary = (
        "the sharded root ran forward before the optimizer read its parameters: the root's own parameters never train"
    )
    hint = "build the optimizer before the first forward, or call `model.reshard()` before reading `model.parameters()`"
    failure = "silent: the embeddings, final norm and head (the root's own parameters) never update"
    docs = """
## What it does
Flags an optimizer built from a sharded root's parameters after that root ran a forward pass
(`model(x)`, an evaluation or warm-up step, `generate`, a helper that does) with no
`model.reshard()` in between. Not flagged when the root was sharded with
`reshard_after_forward=True` (or a value the linter cannot read), when a backward pass followed
the forward (the post-backward hook reshards the root), when the optimizer only takes parameters
of modules sharded inside the root (`model.blocks` with every block sharded: those reshard after
their forward), or when a loop over the root itself (`for layer in model:`, an `nn.Sequential`)
shards every child, which leaves the root no parameters of its own.

## Why is this bad?
After a forward, the FSDP root keeps its own parameter group unsharded (its
`reshard_after_forward` defaults to "keep") and registers the plain unsharded tensors on the
module. An optimizer built then captures those plain tensors for the root's own parameters
(embeddings, final norm, LM head) instead of the DTensor parameters that training updates.
Observed with torch 2.13: the optimizer holds 2 `Parameter` + 8 `DTensor`, and after two steps 8 of
10 parameters change while the root's own two never do. Nothing warns.
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters())
with torch.no_grad():
    model(sample)
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
with torch.no_grad():
    model(sample)
model.reshard()
optimizer = torch.optim.AdamW(model.parameters())
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
    sanity = model(sample)
optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
optimizer.step()
""",
    )
    signature = RuntimeSignature(
        evidence="partial_update",
        note="the optimizer holds the root's parameters as they were when it was built, unsharded; after a step the "
        "others change but the root's own never do",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            moves = _forwards_and_reshards(trace)
            for optimizer in trace.optimizers:
                forward = _forward_before_capture(trace, optimizer, moves)
                if forward is not None:
                    reported, ran = report_node(optimizer, forward), report_node(forward, optimizer)
                    yield Finding(
                        reported,
                        f"optimizer built after the sharded root ran forward ({facts.where(ran, reported)}) "
                        "without `reshard()`: it captures the root's unsharded plain tensors, which never train",
                        related=((ran, "the sharded root runs forward here"),),
                    )


def _forwards_and_reshards(trace: Trace) -> list[Event]:
    """The events that unshard the root (a forward) or shard it again (``reshard()``), in order."""
    forwards = [event for name in FORWARDS for event in trace.methods(name)]
    return sorted([*trace.of_kind(EventKind.INVOKE), *forwards, *trace.methods("reshard")], key=lambda e: e.index)


def _forward_before_capture(trace: Trace, optimizer: Event, moves: list[Event]) -> Event | None:
    params = optimizer.result.root.params  # type: ignore[union-attr]
    if params is None:
        return None
    for source in params.sources:
        captured = source.captured_at if source.captured_at is not None else optimizer.index
        for shard in trace.shards:
            if shard.index >= captured or shard.exclusive_with(optimizer):
                continue
            if shard.may_pass("reshard_after_forward") and shard.kwargs.get("reshard_after_forward") != Const(False):
                continue  # the root reshards after forward (True, or a value we cannot read)
            for root in shard.targets:
                if _is_root(trace, root, shard) and _holds_root_params(trace, root, source.ref, captured):
                    forward = _unresharded_forward(trace, moves, root, (shard.index, captured), optimizer)
                    if forward is not None:
                        return forward
    return None


def _is_root(trace: Trace, module: Ref, shard: Event) -> bool:
    """Is ``module`` an FSDP root: no module around it is sharded in this trace?"""
    return not any(strict_ancestor(other, module) for other_shard in trace.shards for other in other_shard.targets)


def _holds_root_params(trace: Trace, root: Ref, module: Ref, before: int) -> bool:
    """May ``module``'s parameters include some of the root's own group (not those of a module
    sharded inside the root, which reshards after its forward)? ``model.blocks`` whose blocks a
    loop shards holds none; ``model.head`` (left to the root group) does."""
    root, module = canonical(root), canonical(module)
    if not may_overlap(root, module):
        return False
    if may_contain(module, root):
        return not _children_all_sharded(trace, root, before)
    for shard in trace.shards:
        if shard.index >= before:
            continue
        for target in map(canonical, shard.targets):
            if target.root is not root.root or not strict_ancestor(root, target):
                continue
            if may_contain(target, module):
                return False  # inside a module sharded on its own
            if target.path[:-1] == module.path and is_loop_element(target.path[-1]):
                return False  # every element of `module` is sharded by a loop over it
    return True


def _children_all_sharded(trace: Trace, root: Ref, before: int) -> bool:
    """Does a loop over the root itself (``for layer in model:``, an ``nn.Sequential`` or
    ``nn.ModuleList``, which own no parameters) shard each of its children: an empty root group?"""
    for shard in trace.shards:
        loop = shard.ctx.loops[-1] if shard.ctx.loops else None
        if shard.index >= before or not isinstance(loop, cst.For) or isinstance(loop.iter, cst.Call):
            continue
        for target in map(canonical, shard.targets):
            if (
                target.root is root.root
                and target.path[:-1] == root.path != target.path
                and is_loop_element(target.path[-1])
            ):
                return True
    return False


def _unresharded_forward(
    trace: Trace, moves: list[Event], root: Ref, between: tuple[int, int], optimizer: Event
) -> Event | None:
    """The last forward of ``root`` after its shard and up to the capture (``between``, event
    indexes) with no ``reshard()`` after it, when no backward reshards it again."""
    root, (start, end) = canonical(root), between
    last_forward = None
    first = bisect_right(moves, start, key=lambda event: event.index)
    for event in moves[first:]:
        if event.index > end:
            break
        if event.exclusive_with(optimizer):
            continue
        if any(may_be_same(canonical(r), root) for r in refs(event.receiver or Const(None))):
            last_forward = None if event.name == "reshard" and event.kind is EventKind.METHOD else event
    if last_forward is not None and _backward_after(trace, last_forward, end):
        return None  # the post-backward hook reshards the root again
    return last_forward


def _backward_after(trace: Trace, forward: Event, end: int) -> bool:
    return any(
        (event.kind is EventKind.METHOD and event.name == "backward")
        or (event.kind is EventKind.CALL and event.qname == "torch.backward")
        for event in trace.events[forward.index + 1 : end + 1]
    )
