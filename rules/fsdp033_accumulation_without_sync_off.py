from __future__ import annotations

import re
from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import UNKNOWN, Event, EventKind, Obj, ObjKind, Ref, options, refs
from fsdp2_lint.analysis.switches import fsdp2_no_sync_uses
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# The test of an `if` that runs the optimizer step once per accumulation window.
_WINDOW = re.compile(r"%|accum|micro|grad_acc|should_step|update_step|sync_grad", re.IGNORECASE)
_DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")


class AccumulationWithoutSyncOff(Rule):
    code = "FSDP033"
    name = "accumulation-without-sync-off"
    summary = "gradient accumulation on an FSDP2 model without `set_requires_gradient_sync(False)`"
    hint = (
        "switch gradient sync off for all micro-batches but the last: "
        "`model.set_requires_gradient_sync(is_last_microbatch)` before each backward"
    )
    failure = (
        "correct but slow: one reduce-scatter of all gradients per micro-batch instead of one per step "
        "(N-1 extra for N micro-batches)"
    )
    severity = Severity.INFO
    docs = """
## What it does
Flags `backward()` on a file that shards a model with `fully_shard` when several backward passes
run per optimizer step (gradient accumulation) and nothing in the file calls
`set_requires_gradient_sync`: a micro-batch loop with the step after it
(`for mb in micro_batches: loss.backward()` then `optimizer.step()`), or one loop whose step runs
under an accumulation test (`if (i + 1) % accum_steps == 0: optimizer.step()`). A DDP-only
`model.no_sync() if hasattr(model, "no_sync") else nullcontext()` does nothing on FSDP2 and is
flagged too. Not flagged where the file calls `set_requires_gradient_sync` at all (FSDP014 checks
those calls), wraps a model in `DistributedDataParallel` (its `no_sync()` is right there), or
shards nothing.

## Why is this bad?
With gradient sync on, FSDP2 reduce-scatters every parameter group's gradients after each
backward. Accumulating N micro-batches then costs N reduce-scatters of all gradients per step
instead of one: N-1 of them are communication the step does not need. The result is correct
(the reduced gradients add up the same), only slower. Observed with torch 2.13 on CPU/gloo: 2
micro-batches per step, 3 parameter groups, 6 reduce-scatters per step; with
`set_requires_gradient_sync(mb == last)` 3.

## Known problems
The accumulation test is recognised by its text (`%`, `accum`, `micro`, ...); a step under another
test (`if not overflow:`) is not taken for accumulation. Memory: with sync off FSDP2 keeps the
unsharded gradients until the last micro-batch, so a run short of memory may prefer sync on.
A backward that runs, on any path, under a context manager the analysis cannot follow (an engine's
own `gradient_sync_context(is_last)`) is not reported on any path: such code is written to switch
sync off, and a path that leaves it on (a baseline in a test, a flag) does so by choice.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for mb, batch in enumerate(batches):
    model.set_requires_gradient_sync(mb == len(batches) - 1)
    model(batch).sum().backward()
optimizer.step()
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in batches:
    model(batch).sum().backward()
    optimizer.step()
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model)
for i, batch in enumerate(batches):
    model(batch).sum().backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in batches:
    model(batch).sum().backward()  # expect: FSDP033
optimizer.step()
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for i, batch in enumerate(batches):
    loss = model(batch).sum() / accum_steps
    loss.backward()  # expect: FSDP033
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    )
    requires = (("fully_shard",), ("backward",), ("step",))
    signature = RuntimeSignature(
        evidence="sync_per_microbatch",
        note="a parameter group reduce-scatters its gradients after every backward, several times per optimizer step",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if any(trace.methods("set_requires_gradient_sync") for trace in facts.traces):
            return
        if any(next(fsdp2_no_sync_uses(facts, trace), None) for trace in facts.traces):
            return  # FSDP005's: `no_sync()` on the sharded model raises before any reduce-scatter
        # A backward that runs, on some path, in a context the analysis cannot see (which may switch
        # sync off) is written to be switched: on the other paths sync stays on by choice (a flag
        # picking `engine.no_sync_context()` or `nullcontext()`, a baseline in a test).
        switchable = {id(b.node) for trace in facts.traces for b in trace.methods("backward") if _in_unknown_context(b)}
        for trace in facts.traces:
            if not (trace.shards or trace.assumed_sharded) or trace.calls(*_DDP):
                continue
            steps = [step for step in trace.methods("step") if _optimizer_step(step)]
            for backward in trace.methods("backward"):
                if id(backward.node) in switchable or not _after_sharded_forward(trace, backward):
                    continue
                how = _accumulates(facts, backward, steps)
                if how:
                    yield Finding(
                        backward.node,
                        f"several backward passes per optimizer step ({how}) with gradient sync on: FSDP2 "
                        "reduce-scatters all gradients after every micro-batch instead of once per step, "
                        "N-1 extra reduce-scatters for N micro-batches",
                    )


def _after_sharded_forward(trace: Trace, backward: Event) -> bool:
    """Does a forward of a sharded module (or one inside a sharded model) run before ``backward``
    in its innermost loop: the backward whose gradients FSDP2 reduces?"""
    loop = backward.ctx.loops[-1] if backward.ctx.loops else None
    return any(
        forward.index < backward.index
        and (loop is None or loop in forward.ctx.loops)
        and any(trace.sharded_overlap(ref, forward) for ref in refs(forward.receiver))
        for forward in trace.of_kind(EventKind.INVOKE)
    )


def _in_unknown_context(backward: Event) -> bool:
    """Does ``backward`` run inside a ``with`` whose manager may be an object the analysis does not
    know (`engine.gradient_sync_context(is_last)`, a framework's `no_sync`), which may switch sync off?"""
    return any(
        option is UNKNOWN
        or (isinstance(option, Ref) and option.root.kind is ObjKind.NEW and not _known_manager(option.root))
        for manager in backward.ctx.managers
        for option in options(manager)
    )


def _known_manager(made: Obj) -> bool:
    """torch's and the standard library's context managers, and DDP's `no_sync()` (which an FSDP2
    model does not have: the DDP-only fallback is the misuse this rule names)."""
    if made.event is not None and made.event.name == "no_sync":
        return True
    return made.qname is not None and made.qname.startswith(("torch.", "contextlib.", "builtins."))


def _accumulates(facts: FileFacts, backward: Event, steps: list[Event]) -> str | None:
    """How ``backward`` runs several times per optimizer step, if it does."""
    if not backward.ctx.loops:
        return None
    loop = backward.ctx.loops[-1]
    if any(
        step.ctx.loops and step.ctx.loops[-1] is loop and set(step.ctx.if_nodes) <= set(backward.ctx.if_nodes)
        for step in steps
    ):
        return None  # a step after every backward of its loop (a `train_step` called twice is no accumulation)
    for step in steps:
        if step.exclusive_with(backward):
            continue
        shared = set(step.ctx.loops) & set(backward.ctx.loops)
        alone = [loop for loop in backward.ctx.loops if loop not in shared]
        if alone and (step.index > backward.index or shared):
            return "a micro-batch loop with the step after it"
        extra = set(step.ctx.if_nodes) - set(backward.ctx.if_nodes)
        if shared and step.ctx.loops[-1] is backward.ctx.loops[-1] and extra and _window_test(facts, step):
            return "the step runs every few iterations"
    return None


def _window_test(facts: FileFacts, step: Event) -> bool:
    """Is the `if` right around ``step`` (the nearest less indented line above it) an accumulation
    test? Read from the file's lines: the step is in this file's text."""
    if facts.text_of(step.node) is not facts.text:
        return False
    lines = facts.code_lines
    number = facts.position(step.node).start.line - 1
    indent = len(lines[number]) - len(lines[number].lstrip())
    for line in reversed(lines[:number]):
        stripped = line.lstrip()
        if stripped and len(line) - len(stripped) < indent:
            return stripped.startswith(("if ", "elif ")) and bool(_WINDOW.search(stripped))
    return False


def _optimizer_step(step: Event) -> bool:
    """``optimizer.step()`` (or ``scaler.step(optimizer)``), not a scheduler or profiler step."""
    values = (step.receiver, *step.args) if step.receiver is not None else step.args
    return any(
        ref.root.kind is ObjKind.OPTIMIZER or "optim" in ref.text.lower() or ref.text.rpartition(".")[2] == "opt"
        for value in values
        for ref in refs(value)
    )
