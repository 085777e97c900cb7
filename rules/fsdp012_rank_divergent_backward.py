from __future__ import annotations

from collections.abc import Iterable, Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, EventKind, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Calls in a skip test that read this rank's value of a tensor (the loss).
PER_RANK_TESTS = {
    "torch.isnan",
    "torch.isinf",
    "torch.isfinite",
    "math.isnan",
    "math.isinf",
    "math.isfinite",
    "numpy.isnan",
    "numpy.isinf",
    "numpy.isfinite",
}
PER_RANK_METHODS = {"item", "isnan", "isinf", "isfinite"}
# Collectives that make the ranks agree on a value before the test.
AGREEMENTS = (
    "torch.distributed.all_reduce",
    "torch.distributed.all_gather",
    "torch.distributed.all_gather_object",
    "torch.distributed.all_gather_into_tensor",
    "torch.distributed.broadcast",
    "torch.distributed.broadcast_object_list",
    "torch.distributed.nn.functional.all_reduce",
)


class RankDivergentBackward(Rule):
    code = "FSDP012"
    name = "rank-divergent-backward"
    summary = "a rank-local test on the loss skips `backward()` of a `fully_shard`ed model on some ranks only"
    hint = (
        "make the ranks agree before skipping: all-reduce the flag (`dist.all_reduce(flag, op=dist.ReduceOp.MAX)`) "
        "or the loss, and test the reduced value"
    )
    failure = (
        "the ranks that did not skip hang in the backward's reduce-scatter (or the next forward's all-gather) "
        "until the collective timeout"
    )
    docs = """
## What it does
Flags `if <test of this rank's loss>: continue` (also `break`, `return`) between the forward of a
`fully_shard`ed model and the `backward()` after it, where the test reads the loss on this rank
only: `torch.isnan(loss)`, `not torch.isfinite(loss)`, `math.isnan(loss.item())`,
`loss.item() > limit`. The finding is at the test.

Not flagged: the same skip when the flag or the loss was all-reduced (or broadcast, gathered)
before the test, so every rank takes the same arm; skips before the forward; a `raise` (the job
stops; the launcher tears the other ranks down); tests on the rank itself (FSDP007).

## Why is this bad?
FSDP2's backward reduce-scatters each sharded module's gradients and its next forward all-gathers
the parameters: every rank must run the same number of forwards and backwards. A NaN, or a large
loss, on one rank's batch makes only that rank skip its backward; the other ranks wait in a
reduce-scatter whose partner never comes (and the skipping rank runs its next forward's all-gather
against their reduce-scatter). Observed with torch 2.13 on CPU/gloo, 2 ranks, a NaN loss on rank 1
at step 1: the run hangs until the collective timeout, rank 0 in the backward's
`reduce_scatter_single` and rank 1 in an `all_gather_single`; the harness's pass counts show the
cause (rank 0: 2 forwards, 2 backwards; rank 1: 3 forwards, 2 backwards).

## Known problems
Only skips whose test calls `isnan`/`isinf`/`isfinite` or `.item()` are recognised; a skip on an
empty local batch, or a sharded submodule run only when this rank's batch has some input, is not.
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    loss = model(batch).sum()
    bad = torch.isnan(loss).float()
    dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    if bad.item():
        continue
    loss.backward()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    loss = model(batch).sum()
    if torch.isnan(loss):
        raise RuntimeError("NaN loss")
    loss.backward()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    loss = model(batch).sum()
    if torch.isnan(loss):  # expect: FSDP012
        continue
    loss.backward()
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    loss = model(batch).sum()
    if loss.item() > 100.0:  # expect: FSDP012
        continue
    loss.backward()
""",
    )
    requires = (("fully_shard",), ("backward",), ("continue", "break", "return"))
    signature = RuntimeSignature(evidence="divergent_forward_count", min_ranks=2)

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        seen: set[int] = set()
        for trace in facts.traces:
            backwards = [e for e in trace.methods("backward")]
            if not backwards:
                continue
            tests = _per_rank_tests(trace)
            for backward in backwards:
                for if_id in backward.ctx.skipped:
                    test = _reading(tests.get(if_id, ()), backward.receiver)
                    if test is None or id(test.node) in seen:
                        continue
                    forward = _sharded_forward_before(trace, test)
                    if forward is None or _agreed(trace, forward, test):
                        continue
                    seen.add(id(test.node))
                    yield Finding(
                        test.node,
                        "this test reads this rank's loss and skips the `backward()` after it on this rank "
                        "only: the other ranks' FSDP2 reduce-scatter (or next all-gather) then waits for it "
                        "and the run hangs",
                    )


def _per_rank_tests(trace: Trace) -> dict[int, list[Event]]:
    """For each `if` (its id), the events of its test that read a rank-local tensor value."""
    found: dict[int, list[Event]] = {}
    for event in trace.events:
        if not event.ctx.testing:
            continue
        reads = (event.kind is EventKind.CALL and event.qname in PER_RANK_TESTS) or (
            event.kind is EventKind.METHOD and event.name in PER_RANK_METHODS
        )
        if reads:
            found.setdefault(event.ctx.testing[-1], []).append(event)
    return found


def _reading(events: Iterable[Event], loss: object) -> Event | None:
    """The event of a skip test that reads the tensor whose ``backward()`` it skips."""
    for event in events:
        read = event.receiver if event.kind is EventKind.METHOD else event.arg(0, "input")
        if read is not None and (read is loss or read == loss):
            return event
    return None


def _sharded_forward_before(trace: Trace, test: Event) -> Event | None:
    """The last forward of a `fully_shard`ed module before ``test``, in the same loop body."""
    for event in reversed(trace.events[: test.index]):
        if event.kind is not EventKind.INVOKE or event.ctx.loops != test.ctx.loops:
            continue
        if event.receiver is None:
            continue
        if any(trace.is_fsdp_module(ref, event) for ref in refs(event.receiver)):
            return event
    return None


def _agreed(trace: Trace, forward: Event, test: Event) -> bool:
    """Does a collective between the forward and the test make the ranks agree?"""
    return any(forward.index < event.index <= test.index for event in trace.calls(*AGREEMENTS))
