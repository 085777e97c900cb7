from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from fsdp2_lint.analysis.decoding import exits_on_result
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.micro_batch_loops import counted_by_tokens
from fsdp2_lint.analysis.model import Const, Event, EventKind, Ref, canonical, is_strict_ancestor, refs
from fsdp2_lint.analysis.trace import Trace, read_by_name
from fsdp2_lint.prefilter import Word
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
    summary = (
        "a rank-local test (this rank's loss, an empty local batch, this rank's generated tokens) skips or "
        "ends the forwards/`backward()` of a `fully_shard`ed model on some ranks only, or a micro-batch count "
        "follows this rank's token counts"
    )
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

Also flags a skip of the step when this rank's own batch is missing or empty: `if batch is None:
continue`, `if not batch: continue`, `if len(batch) == 0: continue`, `if x.numel() == 0: continue`
(also `x.size(0) == 0`, `x.shape[0] == 0`, joined by `or`), or the same test with `return` in a
per-step function (`train_step`), where the skip leaves out a forward of a `fully_shard`ed model in
the same step (before the test, or after it) and a `backward()` after it.

And flags a module that holds a `fully_shard` group of its own (`fully_shard(model.vision_tower)`)
run only in the arm of a test that this rank's input is there — `if pixel_values is not None:
x = x + self.vision_tower(pixel_values)`, `... if pixel_values is not None else None`, an expert
run `if tokens.numel() > 0` — while the `backward()` after it runs on every rank. The finding is at
the test.

And flags a loop that runs a forward of a `fully_shard`ed model once per micro-batch where the
number of micro-batches follows this rank's own token counts: a loop over what a packer returns or
yields — a function (followed into helpers, in this module or another of the project) that
appends in a loop testing a sum of sizes against a limit (greedy `if tokens + len(seq) >
max_tokens:`, first fit's `if bins[i] + n <= budget:`) — or over `range(n)` with `n =
math.ceil(mask.sum() / max_tokens)` (also `-(-sum(lens) // budget)`, `len()` of a packing, a helper
returning either), or over `torch.split(x, sizes)` with `sizes` such a packing. The finding is at
what the loop iterates over.

And flags a loop around a forward of a `fully_shard`ed model, or of one whose layers are sharded (a
hand-written decode loop, at module level, in a `generate()` helper or a sampler's method) that may
end early on a value computed from that forward's output on this rank: `if (nxt == eos).all():
break` (or `return`) with `nxt` from `model(ids)`, `while not done:` with `done` set from the
sampled tokens (also through `done |= ...`), with no collective in the loop; an early stop on this
rank's loss (`if loss.item() < target: break`) is the same exit. The finding is at the `if`'s test,
or at the `while` test. Also flags `model.generate(..., synced_gpus=False)` (transformers' API) on a
`fully_shard`ed model, at the call.

Not flagged: the same skips when a collective (`all_reduce`, `broadcast`, `all_gather`) ran in the
same step before the test (the flag or the loss was agreed, so every rank takes the same arm); a
loss test before the forward; a `raise` (the job stops; the launcher tears the other ranks down);
tests on the rank itself (FSDP007); a `break` (or a `return` out of the function's own loop) on a
missing batch: that ends the loop, which is the usual end-of-data test, and the ranks diverge only
if their data have different lengths; a `continue` after the `backward()`; a sharded submodule run
on every rank, on a dummy input where this rank has none (the SPMD fix), or after a test that
raises where the input is missing (`if hidden is None: raise ...`: the job stops), or in an arm
the call decides (the caller passes no `pixel_values`, so the default `None` holds on every rank);
an attribute nothing stored, fetched and called (`f = getattr(m, "name", None); f(...)`: read as
`m.name(...)`, maybe a method) unless it, or a module certainly inside it, is sharded; an arm on a plain truth
test (`if self.use_vision:`, `if cfg.vision:`: a setting, the same on every rank) or on anything
read from `self`. Among micro-batch loops: a fixed count (`batch.chunk(4)`, `torch.split(batch,
mb_size)`, `range(grad_accum_steps)`), or one that follows the number of samples (`len(current) + 1
> mb_size`, `math.ceil(len(batch) / mb_size)`); a token-budget count agreed by a collective before
the loop in the same step (`dist.all_reduce(count, op=dist.ReduceOp.MAX)`, in the packer too, as
verl's `dp_group` fix does), the short ranks padding with dummy micro-batches; the same loop on an
unsharded (DDP) model. Among decode loops: a `done` flag all-reduced (MAX or MIN) in the loop before
the test (what transformers' `synced_gpus=True` does: a rank whose sequences are done keeps running
forwards until every rank's are), a loop with a fixed count and no early exit, the same loop on a
module that is not sharded (inference on a plain module, or under DDP), an exit on a setting or a
counter (`if step >= cfg.max_new: break`) or on a sequence's length (`while ids.shape[1] <
max_len:`), and `generate()` with `synced_gpus=True` or without `synced_gpus`: transformers (since
about 4.45, PR #33483; check your version) defaults it to True when the model is FSDP managed, which
a `fully_shard`ed model is (torch 2.13's `fully_shard` sets `_is_fsdp_managed_module` on the modules
it manages).

## Why is this bad?
FSDP2's backward reduce-scatters each sharded module's gradients and its next forward all-gathers
the parameters: every rank must run the same number of forwards and backwards. A NaN, or a large
loss, on one rank's batch makes only that rank skip its backward; the other ranks wait in a
reduce-scatter whose partner never comes (and the skipping rank runs its next forward's all-gather
against their reduce-scatter). Observed with torch 2.13 on CPU/gloo, 2 ranks, a NaN loss on rank 1
at step 1: the run hangs until the collective timeout, rank 0 in the backward's
`reduce_scatter_single` and rank 1 in an `all_gather_single`; the harness's pass counts show the
cause (rank 0: 2 forwards, 2 backwards; rank 1: 3 forwards, 2 backwards). A skip on an empty local
batch does the same: with rank 1's batch `None` at step 1 and `if batch is None: continue` before
the forward (torch 2.13, CPU/gloo, 2 ranks), rank 1 runs one forward and backward fewer and the run
hangs once rank 0's extra forward all-gathers against rank 1's next collective (a final `all_reduce`
of the loss): rank 0 3 forwards, 2 backwards, in `all_gather_single`; rank 1 2 and 2, in
`all_reduce`. A script whose skipping rank reaches its end instead fails on gloo with `Connection
closed by peer` in rank 0's all-gather. A decode loop is the same bug without a backward: each
forward all-gathers, so ranks must run the same number of them; with each rank sampling its own
prompt (torch 2.13, CPU/gloo, 2 ranks, `if (nxt == EOS).all(): break`), rank 1 met EOS after 4
forwards and went on to a final `all_reduce` while rank 0 ran a fifth forward; the run hung, rank 0
in the forward's `all_gather_single`, rank 1 in `all_reduce`. Sequences packed greedily under a
16-token budget, rank 0's lengths 8, 8, 8, 8 (2 micro-batches) and rank 1's 12, 12, 8, 4 (3), with
gradient sync on for the last micro-batch only (torch 2.13, CPU/gloo): rank 0 hangs in the last
backward's `reduce_scatter_single` and rank 1 in its third forward's `all_gather_single` (rank 0: 2
forwards, 2 backwards; rank 1: 3 and 2). A separately sharded vision projector run only `if
pixel_values is not None`, with rank 1's batch text-only at step 1: rank 0's projector all-gather
pairs with rank 1's `layers.0` one and the run hangs (rank 0 in an all-gather, rank 1 in the
backward's reduce-scatter); the harness sees that in forward #2 the ranks ran different sharded
groups (rank 0 `vision, layers.0, layers.1`, rank 1 `layers.0, layers.1`). Where the skipped group's
shards differ in size from the next group's, gloo aborts the process in the mismatched
`all_gather_single` (SIGABRT) instead of hanging; NCCL does not check sizes and hangs or corrupts.

## Known problems
Only skips whose test calls `isnan`/`isinf`/`isfinite` or `.item()` on the loss, or tests a value
for `None` / emptiness, are recognised. A per-rank micro-batch count is recognised only in the
spellings above. Not recognised: a packer whose overflow test is not a sum compared with a limit
(`if tokens > budget:` after `tokens += n`); a sum whose terms are not recognisably sizes (`len()`,
`.numel()`, `.size()`, `.sum()`, an item `lens[i]`, a name bound to one, or `n` of `for n in
seq_lens` — a loop over something named for lengths or tokens); a packing built by a library
(`torch.utils.data` batch samplers, `itertools`); a count kept in `self` or passed in as a
parameter. A token count is `sum(...)`, `.sum()`, `.numel()` (the sequence length `x.size(1)` is
not). A packing of the whole data set before it is split among the ranks, looped over the same on
every rank, is flagged. Any collective before the loop in the same step counts as the agreement,
whatever it reduces.
A decode loop is recognised only where an assignment in the loop binds the forward's result (`logits
= model(ids)`, or a helper's result that runs it) and the exit test reads a name the loop computes
from it by assignment: a flag set in an `if` on the tokens (`if nxt == eos: done = True`), a stop
list filled by a method call (`stops.append(...)`), and a `for` over a per-rank number of steps
(`range(max_len - prompt.shape[1])`) are missed, and so is an exit on a sequence's length (`while
ids.shape[1] < max_len:`), which ends at different steps where the ranks' prompts differ in length.
A loop is taken as agreed when any collective runs in it, whatever it reduces. Every rank computing
the same tokens (the same prompt and greedy decoding on every rank) would make such an exit safe;
that is not considered. `generate()` is flagged only with a literal `synced_gpus=False`, and only on
the module `fully_shard` was applied to (not through a wrapper such as a PEFT model around it); the
default was False before transformers' change above. A `generate()` left to that default on a model
whose layers alone are sharded is not flagged, though its root is not FSDP managed, so the default
stays False. Whether the data come from a `DistributedSampler` (which gives every rank the same
number of batches) is not considered: a `continue` on a missing batch is flagged whatever the
loader. An agreement is recognised only as a collective in the same step before the test, not one
made before the loop. A submodule run only when this rank has input is flagged only when it holds a
`fully_shard` group of its own: on torch 2.13 the same code with the submodule inside another group
(say the root's) fails too, on gloo with a SIGABRT in the backward's `reduce_scatter_single`,
because FSDP2 reduce-scatters only the parameters that got a gradient on this rank, unless
`set_reduce_scatter_unused_params(True)` is set; that shape is not flagged (the harness does not yet
observe its cause, and a parameterless submodule run the same way is harmless).
Whether an input is there is taken for this rank's data whatever the input: `if input_ids is not
None and inputs_embeds is None: x = self.embed(input_ids)` with the embedding sharded alone is
flagged though every rank's batch carries `input_ids`, unless the call decides the test; a tensor
a torch factory made (`torch.randint(...)`) is not known to be not None (a dict's `.get` of a key
stored on some paths only would then read as always there).
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
done = torch.zeros(ids.shape[0], dtype=torch.bool)
with torch.no_grad():
    for _ in range(max_new_tokens):
        nxt = model(ids)[:, -1].argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        running = (~done).any().float()
        dist.all_reduce(running, op=dist.ReduceOp.MAX)  # some rank still decoding: all go on
        if running.item() == 0:
            break
""",
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
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
while True:
    batch = next(batches, None)
    if batch is None:
        break
    model(batch).sum().backward()
""",
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class VisionLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.vision, self.lm = Embed(), VisionTower(), LanguageModel()

    def forward(self, ids, pixel_values=None):
        x = self.embed(ids)
        has_images = pixel_values is not None
        if not has_images:  # every rank runs the sharded tower, on a dummy input if need be
            pixel_values = torch.zeros(1, 3, 32, 32)
        return self.lm(x + self.vision(pixel_values) * float(has_images))

model = VisionLanguageModel()
fully_shard(model.vision)
fully_shard(model)
for batch in loader:
    model(batch["ids"], batch.get("pixel_values")).sum().backward()
""",
        """
import math
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    count = torch.tensor(math.ceil(batch["attention_mask"].sum().item() / max_tokens))
    dist.all_reduce(count, op=dist.ReduceOp.MAX)  # every rank runs the largest count
    for i in range(int(count)):
        model(batch["input_ids"][i::int(count)]).sum().backward()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
with torch.no_grad():
    for _ in range(max_new_tokens):
        nxt = model(ids)[:, -1].argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        if (nxt == eos_id).all():  # expect: FSDP012
            break
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
out = model.generate(**inputs, max_new_tokens=64, synced_gpus=False)  # expect: FSDP012
""",
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
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for batch in loader:
    if batch is None:  # expect: FSDP012
        continue
    model(batch).sum().backward()
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class VisionLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.vision, self.lm = Embed(), VisionTower(), LanguageModel()

    def forward(self, ids, pixel_values=None):
        x = self.embed(ids)
        if pixel_values is not None:  # expect: FSDP012
            x = x + self.vision(pixel_values)
        return self.lm(x)

model = VisionLanguageModel()
fully_shard(model.vision)
fully_shard(model)
for batch in loader:
    model(batch["ids"], batch.get("pixel_values")).sum().backward()
""",
        """
from torch.distributed.fsdp import fully_shard

def split_by_tokens(seqs, max_tokens):
    batch, tokens = [], 0
    for seq in seqs:
        if tokens + len(seq) > max_tokens:
            yield batch
            batch, tokens = [], 0
        batch.append(seq)
        tokens += len(seq)
    yield batch

fully_shard(model)
for local_batch in loader:
    for mb in split_by_tokens(local_batch, 4096):  # expect: FSDP012
        model(collate(mb)).sum().backward()
""",
    )
    # A skip exits (`continue`, `break`, `return`), a decode loop ends (`while`, `break`) or is
    # `generate(synced_gpus=...)`; a micro-batch count needs a `for` loop.
    requires = (
        ("fully_shard",),
        ("backward", "break", "return", "while", "synced_gpus"),
        ("continue", "break", "return", "while", "synced_gpus", Word("for", frozenset({"for"}), in_strings=False)),
    )
    signature = RuntimeSignature(evidence="divergent_forward_count", min_ranks=2)

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        seen: set[int] = set()  # ids of the reported tests, and of the `if`s they are the tests of
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
                    seen.update((id(test.node), if_id))
                    yield Finding(
                        test.node,
                        "this test reads this rank's loss and skips the `backward()` after it on this rank "
                        "only: the other ranks' FSDP2 reduce-scatter (or next all-gather) then waits for it "
                        "and the run hangs",
                    )
            yield from _data_skips(trace, backwards, seen)
            yield from _groups_run_with_data(trace, backwards, seen)
            yield from _micro_batches_by_tokens(facts, trace, seen)
        for trace in facts.traces:  # a loss test that also ends the loop is reported above, as a skip
            yield from _exits_on_sharded_output(trace, seen)
            yield from _generate_unsynced(trace, seen)


def _exits_on_sharded_output(trace: Trace, seen: set[int]) -> Iterator[Finding]:
    """Loops around a forward of a `fully_shard`ed model (or of one whose layers are) that may end
    on a value computed from its output on this rank (a decode loop's `if (nxt == eos).all():
    break`, `while not done:`), with no collective in the loop to make the ranks agree on it."""
    forwards: dict[int, tuple[object, set[cst.CSTNode]]] = {}
    for event in trace.of_kind(EventKind.INVOKE):
        if not event.ctx.loops or event.receiver is None:
            continue
        if any(_runs_sharded_group(trace, ref, event) for ref in refs(event.receiver)):
            for loop in event.ctx.loops:
                forwards.setdefault(id(loop), (loop, set()))[1].update(event.frames())
    agreed = {id(loop) for event in trace.calls(*AGREEMENTS) for loop in event.ctx.loops}
    for key, (loop, frames) in forwards.items():
        if key in agreed:
            continue
        for statement, test in exits_on_result(loop, frames):
            if id(statement) in seen or id(test) in seen:
                continue
            seen.add(id(test))
            yield Finding(
                test,
                "this test ends the loop on what this rank's sharded model computed (its tokens, its loss): "
                "ranks stop after different numbers of forwards, and the next FSDP2 all-gather of a rank "
                "still in the loop has no partner, so the run hangs; all-reduce the flag (MAX) and test "
                "that, as transformers' `synced_gpus=True` does in generation",
                hint="all-reduce whether this rank is still decoding (`dist.all_reduce(running, "
                "op=dist.ReduceOp.MAX)`) and stop when no rank is; a rank that is done keeps running forwards",
            )


def _generate_unsynced(trace: Trace, seen: set[int]) -> Iterator[Finding]:
    """`model.generate(..., synced_gpus=False)` on a model that holds a `fully_shard`ed module
    (transformers' API): each of its forwards all-gathers."""
    for event in trace.methods("generate"):
        if id(event.node) in seen or event.kwargs.get("synced_gpus") != Const(False) or event.receiver is None:
            continue
        if any(trace.holds_fsdp_module(ref, event) for ref in refs(event.receiver)):
            seen.add(id(event.node))
            yield Finding(
                event.node,
                "`generate(..., synced_gpus=False)` on a sharded model: each rank stops when its own "
                "sequences are done, and a rank still generating runs forwards whose FSDP2 all-gathers "
                "have no partner, so the run hangs; leave `synced_gpus` to its default or pass True",
                hint="pass `synced_gpus=True` (or leave it out: transformers defaults it to True on an FSDP-managed "
                "model)",
            )


def _data_skips(trace: Trace, backwards: list[Event], seen: set[int]) -> Iterator[Finding]:
    """Skips on this rank's own data being None or empty (`if batch is None: continue`) that leave
    out a forward and the backward of a sharded model on this rank only."""
    after: dict[int, list[Event]] = {}
    for event in trace.events:
        for node in event.ctx.data_skips:
            after.setdefault(id(node), []).append(event)
    for backward in backwards:
        for node in backward.ctx.data_skips:
            if id(node.test) in seen:
                continue
            past = after[id(node)]
            loops = _common_loops(past)
            first = past[0].index
            if _data_skip_forward(trace, node, loops, first) is None or _agreed_before(trace, loops, first):
                continue
            seen.add(id(node.test))
            yield Finding(
                node.test,
                "this test skips the step when this rank's own batch is missing or empty: only this rank "
                "leaves out the forward and `backward()` of the sharded model, and the other ranks' FSDP2 "
                "all-gather / reduce-scatter waits for it until the run hangs",
            )


def _groups_run_with_data(trace: Trace, backwards: list[Event], seen: set[int]) -> Iterator[Finding]:
    """A module holding a `fully_shard` group of its own, run only in the arm of a test that this
    rank's data are there (`if pixel_values is not None: self.vision(pixel_values)`), while the
    `backward()` after it runs on every rank."""
    under: dict[int, list[Event]] = {}
    for event in trace.events:
        for node in event.ctx.data_arms:
            under.setdefault(id(node), []).append(event)
    for event in trace.of_kind(EventKind.INVOKE):
        for node in event.ctx.data_arms:
            if id(node.test) in seen or event.receiver is None:
                continue
            if not any(_runs_sharded_group(trace, ref, event) for ref in refs(event.receiver)):
                continue
            if not any(b.index > event.index and not any(n is node for n in b.ctx.data_arms) for b in backwards):
                continue
            arm = under[id(node)]
            if _agreed_before(trace, _common_loops(arm), arm[0].index):
                continue
            seen.add(id(node.test))
            yield Finding(
                node.test,
                "a separately `fully_shard`ed module runs only when this rank's input is there: ranks "
                "without it skip that group's all-gather (and its reduce-scatter in the `backward()` every "
                "rank runs), so the ranks' collectives pair up wrongly and the run hangs or fails; run it "
                "on a dummy input on every rank",
            )


def _runs_sharded_group(trace: Trace, called: Ref, event: Event) -> bool:
    """Does calling ``called`` run a module that holds a `fully_shard` group? An attribute nothing
    stored (`f = getattr(m, "name", None); f(...)`) may be a bound method, as the same call spelled
    `m.name(...)` is read: it counts only where it, or a module certainly inside it, was sharded,
    not where only a wildcard (a module of `m.modules()`) might make it one."""
    if not trace.holds_fsdp_module(called, event):
        return False
    if not read_by_name(called):
        return True
    attribute = canonical(called)
    sharded = [canonical(target) for _, target in trace.shards_before(event)] + trace.assumed_at(event)
    return any(target == attribute or is_strict_ancestor(attribute, target) for target in sharded)


def _micro_batches_by_tokens(facts: FileFacts, trace: Trace, seen: set[int]) -> Iterator[Finding]:
    """A loop that runs a forward of a `fully_shard`ed model once per micro-batch, where the number of
    micro-batches follows this rank's own token counts and no collective before the loop (in the
    same step) made the ranks agree on it."""
    for loop, outer, first in _loops_running_sharded_forwards(trace):
        if id(loop.iter) in seen or not counted_by_tokens(facts, trace, loop):
            continue
        if _agreed_before(trace, outer, first.index):
            continue
        seen.add(id(loop.iter))
        yield Finding(
            loop.iter,
            "the number of micro-batches this loop runs follows this rank's own token counts: a rank "
            "with more micro-batches runs extra forwards and `backward()`s of the sharded model, whose "
            "FSDP2 all-gathers and reduce-scatters wait for partners the other ranks never start, and "
            "the run hangs",
            hint="agree on the count first (`dist.all_reduce(count, op=dist.ReduceOp.MAX)`) and run "
            "the ranks that have fewer micro-batches on dummy (zero-weighted) ones up to it",
        )


def _loops_running_sharded_forwards(trace: Trace) -> Iterator[tuple[cst.For, tuple[object, ...], Event]]:
    """Each `for` loop whose body runs a forward of a `fully_shard`ed module, with the loops around
    it and the first event in it."""
    first_in: dict[int, Event] = {}
    for event in trace.events:
        for loop in event.ctx.loops:
            first_in.setdefault(id(loop), event)
    found: set[int] = set()
    for event in trace.of_kind(EventKind.INVOKE):
        loops = [loop for loop in event.ctx.loops if isinstance(loop, cst.For) and id(loop) not in found]
        if not loops or event.receiver is None:
            continue
        if not any(trace.is_fsdp_module(ref, event) for ref in refs(event.receiver)):
            continue
        for loop in loops:
            found.add(id(loop))
            yield loop, event.ctx.loops[: event.ctx.loops.index(loop)], first_in[id(loop)]


def _common_loops(events: list[Event]) -> tuple[object, ...]:
    """The loops around the skip: those every event after it runs in."""
    common = events[0].ctx.loops
    for event in events[1:]:
        loops = event.ctx.loops
        n = 0
        while n < min(len(common), len(loops)) and common[n] is loops[n]:
            n += 1
        common = common[:n]
    return common


def _in_step(event: Event, loops: tuple[object, ...]) -> bool:
    """Does the event run in the step (the loop iteration, or the step function) the skip is in?"""
    return event.ctx.loops[: len(loops)] == loops


def _data_skip_forward(trace: Trace, node: object, loops: tuple[object, ...], first: int) -> Event | None:
    """A forward of a `fully_shard`ed module the skip leaves out: after it (on the path that did not
    skip), or before it in the same step."""
    for event in trace.of_kind(EventKind.INVOKE):
        if event.receiver is None or not _in_step(event, loops):
            continue
        if event.index >= first and not any(skip is node for skip in event.ctx.data_skips):
            continue
        if any(trace.is_fsdp_module(ref, event) for ref in refs(event.receiver)):
            return event
    return None


def _agreed_before(trace: Trace, loops: tuple[object, ...], first: int) -> bool:
    """Does a collective in the same step, before the skip, make the ranks agree on its test?"""
    return any(event.index < first and _in_step(event, loops) for event in trace.calls(*AGREEMENTS))


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
