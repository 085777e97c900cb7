from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Derived,
    Event,
    EventKind,
    GuardRanks,
    Params,
    RankGuard,
    Ref,
    StateDict,
    Value,
    canonical,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted, own_nodes
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.prefilter import Token, Word
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# torch.distributed collectives every rank of the group must enter (point-to-point send/recv
# are deliberately rank-specific and not listed).
DIST_COLLECTIVES = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
        "all_to_all",
        "all_to_all_single",
    )
)
DCP_COLLECTIVES = frozenset(
    f"{apis.DCP}.{name}" for name in ("save", "load", "async_save", "save_state_dict", "load_state_dict")
)
FULL_STATE_DICT_HELPERS = frozenset({apis.GET_MODEL_STATE_DICT, apis.GET_OPTIMIZER_STATE_DICT, apis.GET_STATE_DICT})
DTENSOR_COLLECTIVES = frozenset({"full_tensor", "redistribute"})
REPLICATED_NORMS = frozenset(
    {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.get_total_norm"}
)
COMPLEMENT = {GuardRanks.ZERO: GuardRanks.NONZERO, GuardRanks.NONZERO: GuardRanks.ZERO}


def _last_names(qnames: frozenset[str]) -> frozenset[str]:
    return frozenset(qname.rpartition(".")[2] for qname in qnames)


def _with_strings(groups: tuple[tuple[Token, ...], ...]) -> tuple[tuple[Token, ...], ...]:
    """Groups of words that count in the code only, as the conjunctive normal form of "a word of the
    group in the code, or one in a string and a call that reads it": each group with its words
    counted in strings too, and each with the calls added."""
    return tuple((*(_anywhere(token) for token in group),) for group in groups) + tuple(
        (*group, *CODE_FROM_STRINGS) for group in groups
    )


def _anywhere(token: Token) -> Token:
    return replace(token, in_strings=True) if isinstance(token, Word) else token


def _word(core: str, accepts: frozenset[str]) -> Word:
    return Word(core, accepts, in_strings=False)  # a name in the code (see CODE_FROM_STRINGS)


# The words a collective is named by: the interpreter resolves each from a name in the code, or
# from a string that `getattr(dist, "barrier")` or `importlib.import_module("torch.distributed")`
# reads (calls.py, interpreter/imports.py): those calls let a word in a string count.
CODE_FROM_STRINGS = ("getattr", "import_module")
DIST_WORDS = tuple(
    _word(core, _last_names(DIST_COLLECTIVES))
    for core in ("reduce", "gather", "scatter", "broadcast", "barrier", "all_to_all")
)
DCP_WORDS = tuple(_word(core, _last_names(DCP_COLLECTIVES)) for core in ("save", "load"))
# Method names, whole: `.full_tensor()`, `.redistribute()`, `.unshard()` (not `unsharded`).
OTHER_COLLECTIVES = tuple(_word(name, frozenset({name})) for name in ("full_tensor", "redistribute", "unshard"))
# What a rank guard is built from: rank-named identifiers (`local_rank`, `is_main_process`,
# `get_rank`, `trainer.is_global_zero`), rank-0 decorators, rank environment variables.
RANK_TOKENS = tuple(
    Word(core, apis.names_a_rank)
    for core in (
        "rank",
        "main",
        "master",
        "chief",
        "primary",
        "process_index",
        "process_zero",
        "global_zero",
        "local_zero",
    )
) + (Word("RANK", apis.RANK_ENV_VARS), Word("SLURM_", apis.RANK_ENV_VARS))
RANKS = {GuardRanks.ZERO: "rank 0", GuardRanks.NONZERO: "the ranks other than 0", GuardRanks.SUBSET: "some ranks"}


class CollectiveOnSomeRanks(Rule):
    code = "FSDP007"
    name = "collective-in-rank-branch"
    summary = "a collective runs on some ranks only: the other ranks never join it and the job hangs"
    hint = "call the collective on every rank; keep only the file write (or the print) inside `if rank == 0:`"
    failure = "hang (at the first checkpoint, often hours in) until the process-group timeout kills the job"
    docs = """
## What it does
Flags a collective that only some ranks execute: inside `if rank == 0:` (or `dist.get_rank() == 0`,
`local_rank == 0`, `is_main_process`, an `else` of such a test), after an early
`if rank != 0: return`, or in a function decorated `@rank_zero_only`. Collectives: DCP
`save`/`load`/`async_save`, `DTensor.full_tensor()`/`.redistribute()`, the full-state-dict helpers
(`get_model_state_dict(..., StateDictOptions(full_state_dict=True))` and friends), `dist.*`
collectives (`barrier`, `all_reduce`, `broadcast`, ...), `unshard()` on an FSDP module, and
same-file helpers that call one (reported at the helper's call inside the branch). A collective
that the complementary ranks call too on the same path (`if rank != 0: dist.barrier()` ... `if
rank == 0: dist.barrier()`: the same collective, a barrier for a barrier) is matched and not
reported: in one function, in helpers and methods it calls, and across a "rank 0 goes first" guard
(the other ranks wait in `__enter__`, or before the `yield` of a `@contextmanager`, and rank 0
joins at the exit), whether the guard is a class, a generator or `async with`, in this module or
another. So is the half of a leader/worker protocol split across methods of one class that nothing
in the file calls (`publish` broadcasts on rank 0, `receive` on the others): the code that runs
the two is in another file, and is reported there if it runs only one. So is the worker half of a
serving protocol: the other ranks wait in a method of a class (`generate_other_ranks`) whose
request handler, which a serving framework calls back on rank 0 and the run never calls, runs
the same collective. And so is a gather that runs only for DTensors
(`if isinstance(x, DTensor):`, `hasattr(x, "full_tensor")`) on values not known to be sharded (a
plain reference model's parameters, a full state dict's tensors). `rank is None` tests and
`cfg.lora.rank` (a matrix rank) select no ranks.

## Why is this bad?
Every rank must enter a collective. Rank 0 waits inside it for ranks that skipped the branch and
are already waiting in the next collective: observed with torch 2.13 on gloo, all three variants
(DCP save, `full_tensor()`, full `get_model_state_dict`) hang until killed, while the correct
version finishes its save in under 0.1 s. With the default timeout the job sits idle for 30 minutes
(NCCL: 10) before it dies, typically at the first checkpoint. When the ranks that skipped it end
the script instead of waiting elsewhere, the collective fails rather than hangs (gloo on torch
2.13: `RuntimeError: ... Connection closed by peer` on rank 0): `confirm` records that as
`unmatched_collective`, which confirms this rule too.

## Known problems
- The halves of a protocol written as module-level functions that nothing in the file calls
  (`def send_plan(): if rank == 0: broadcast(...)`, `def receive_plan(): if rank != 0:
  broadcast(...)`) are each analysed alone and reported, when the file is linted without the
  code that calls both. Unlike the methods of one class, two functions of a module are not known
  to belong together; the file that calls them is linted correctly.
- A collective is matched by the same collective only (a barrier by a barrier): a barrier on some
  ranks and an `all_reduce` on the others is reported, though a backend may happen to pair them.
- The matching collective is looked for on the same path of one entry point: a partner that only
  a callback, a thread or another process runs is not seen (except a serving class's request
  handler, above).
- A DCP `save`/`load` under a rank test of another communicator (TensorRT-LLM's `mpi_rank()`,
  `MPI.COMM_WORLD.Get_rank()`) is reported: DCP runs without collectives when `torch.distributed`
  is not initialised, which the analysis cannot see (NeMo's `nemo/export/tensorrt_llm.py`).
- Two `if` statements on the same configuration flag (`if flag: shard(m)` ... `if not flag:
  shard(m)`) are not known to exclude each other: a path through both arms, which never runs, can
  shard a model twice and make a later full state dict on rank 0 look like a collective (composer's
  trainer calls its sharding helper under `load_monolith_rank0_only` and under its negation).
"""
    valid = (
        """
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if dist.get_rank() == 0:
    torch.save(state, "model.pt")
""",
        """
import torch.distributed as dist

if local_rank != 0:
    dist.barrier()  # wait for rank 0 to prepare the data
prepare_data()
if local_rank == 0:
    dist.barrier()
""",
        """
import torch.distributed.checkpoint as dcp

if rank == 0:  # rank 0 alone reads the whole checkpoint to verify a conversion
    dcp.load(state_dict, checkpoint_id="ckpt", no_dist=True)
""",
        """
import torch.distributed as dist
from contextlib import contextmanager

@contextmanager
def main_process_first(is_main):
    if not is_main:  # the other ranks wait for the main process to prepare the data
        dist.barrier()
    yield
    if is_main:  # then the main process joins them
        dist.barrier()

with main_process_first(dist.get_rank() == 0):
    prepare_data()
""",
        """
import torch.distributed as dist

def convert(config, rank):
    if rank == 0:
        if config is None:
            dist.barrier()  # rank 0 leaves here; the other ranks enter the barrier below
            return
        write_config(config)
    dist.barrier()
""",
        """
import torch
import torch.distributed as dist
from helpers import describe, prepare

def save_weights(path, state_dict):
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.distributed.tensor.DTensor):  # the state dict of a plain module: never
            tensor = tensor.full_tensor()
        write(path, name, tensor)

def convert():
    if dist.get_rank() == 0:
        model = torch.nn.Linear(4, 4)
        state = model.state_dict()  # taken from the plain model: plain tensors
        describe(model)  # code we cannot see, after the state dict was taken
        save_weights("converted", state)
    dist.barrier()
""",
        """
import torch.distributed as dist

def merge(state, use_barriers=False):  # an opt-in barrier for callers that merge on every rank
    if use_barriers:
        dist.barrier()
    return state

def save(state):
    if dist.get_rank() == 0:
        write(merge(state))
    dist.barrier()
""",
    )
    invalid = (
        """
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

if dist.get_rank() == 0:
    dcp.save({"model": model.state_dict()}, checkpoint_id="ckpt")  # expect: FSDP007
""",
        """
import torch

def gather(model):
    return {k: v.full_tensor() for k, v in model.state_dict().items()}

def save(model, rank):
    if rank != 0:
        return
    torch.save(gather(model), "model.pt")  # expect: FSDP007
""",
        """
import torch.distributed as dist

def convert(config, rank):
    if rank == 0:
        if config is None:
            dist.barrier()  # expect: FSDP007
            return
        write_config(config)
    finish()
dist.barrier()
""",
        """
import torch.distributed as dist
from contextlib import contextmanager

@contextmanager
def main_process_first(is_main):
    if not is_main:
        dist.barrier()  # expect: FSDP007
    yield
    if not is_main:  # the same ranks again: the main process never enters a barrier
        dist.barrier()  # expect: FSDP007

with main_process_first(dist.get_rank() == 0):
    prepare_data()
""",
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

def save_weights(path, state_dict):
    for name, tensor in state_dict.items():
        if hasattr(tensor.data, "full_tensor"):  # a DTensor only when the state dict is sharded
            tensor = tensor.data.full_tensor()
        write(path, name, tensor)

def train(model, rank):
    fully_shard(model)
    if rank == 0:
        save_weights("converted", convert_offline("ckpt"))  # plain tensors: nothing to gather
    if rank == 0:
        save_weights("ckpt", model.state_dict())  # expect: FSDP007
    dist.barrier()
""",
        """
import torch
import torch.distributed as dist
from helpers import describe, prepare

def save_weights(path, state_dict):
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.distributed.tensor.DTensor):
            tensor = tensor.full_tensor()
        write(path, name, tensor)

def convert():
    if dist.get_rank() == 0:
        model = torch.nn.Linear(4, 4)
        prepare(model)  # code we cannot see: it may shard the model
        save_weights("converted", model.state_dict())  # expect: FSDP007
    dist.barrier()
""",
        """
import torch.distributed as dist

def merge(state, use_barriers=False):
    if use_barriers:
        dist.barrier()
    return state

def save(state):
    if dist.get_rank() == 0:
        write(merge(state, use_barriers=True))  # expect: FSDP007
    dist.barrier()
""",
    )
    # A collective: a torch.distributed one (its module and function names as words; DCP's
    # `checkpoint` with save/load or the state-dict helpers' options), a DTensor method, or
    # `unshard`. And a rank guard. Each collective group holds again with its words in strings,
    # when the code calls what turns a string into a name.
    requires = _with_strings(
        (
            (_word("distributed", frozenset({"distributed"})), *OTHER_COLLECTIVES),
            (*DIST_WORDS, _word("checkpoint", frozenset({"checkpoint"})), *OTHER_COLLECTIVES),
            (*DIST_WORDS, *DCP_WORDS, "full_state_dict", "broadcast_from_rank0", *OTHER_COLLECTIVES),
        )
    ) + (RANK_TOKENS,)
    signature = RuntimeSignature(
        evidence="hang",
        note="the run exceeds its timeout; the ranks' last events show rank 0 inside the collective",
        min_ranks=2,  # a hang needs a rank that skips the collective
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        found = {trace: _collectives(facts, trace) for trace in facts.traces}
        for trace, collectives in found.items():
            for event, name in collectives:
                guard = event.ctx.rank_guard
                if (
                    guard is None
                    or event.ctx.against_default
                    or any(
                        _matches(facts, event, other) or _partner_after_exit(facts, event, other)
                        for other, other_name in collectives
                        if other_name == name
                    )
                    or _other_half_of_protocol(trace, event, name, found)
                    or _served_by_a_handler(trace, event, name)
                ):
                    continue
                frames = event.frames()
                reported = frames[min(guard.depth, len(frames) - 1)]
                yield Finding(
                    reported,
                    f"`{name}` is a collective, but it runs only on {RANKS[guard.ranks]} "
                    f"(condition at {facts.where(guard.node, reported)}): the other ranks never join it and the job hangs",
                    related=((guard.node, f"the condition that lets only {RANKS[guard.ranks]} through"),),
                )


def _collectives(facts: FileFacts, trace: Trace) -> list[tuple[Event, str]]:
    """The trace's collectives and their names, in execution order."""
    return [
        (event, name)
        for event in trace.events
        if (name := _collective(trace, event)) is not None and not _maybe_plain(facts, trace, event)
    ]


def _other_half_of_protocol(trace: Trace, event: Event, name: str, found: dict[Trace, list[tuple[Event, str]]]) -> bool:
    """A leader/worker protocol split across methods that nothing in the file calls (``publish``
    broadcasts on rank 0, ``receive`` on the other ranks): the code that calls them is elsewhere, and
    a caller there that runs only one half is reported when that file is linted. So a collective in
    such a method is matched by the same collective under the complementary rank test in another
    method of its class analysed on its own, each rank test written in the method itself (a helper
    that tests the rank is part of a path this file shows). Test methods run alone and get no partner."""
    guard = event.ctx.rank_guard
    if guard is None or guard.depth != 0 or not _protocol_method(trace):
        return False
    return any(
        other_name == name
        and (theirs := other.ctx.rank_guard) is not None
        and theirs.depth == 0
        and theirs.ranks == COMPLEMENT.get(guard.ranks)
        for other_trace, collectives in found.items()
        if other_trace is not trace and _protocol_method(other_trace) and _same_class(trace, other_trace)
        for other, other_name in collectives
    )


def _served_by_a_handler(trace: Trace, event: Event, name: str) -> bool:
    """The worker half of a serving protocol: on the ranks other than 0, a method of a project class
    waits in the collective for rank 0 (``generate_other_ranks``), and another method of that class
    that nothing the run shows calls runs the same collective (``triton_infer_fn``, the request
    handler a serving framework calls back on rank 0). The leader's half is in code the analysis
    cannot follow, so the worker's is left alone."""
    guard = event.ctx.rank_guard
    if guard is None or guard.ranks is not GuardRanks.NONZERO:
        return False
    collective = name.rpartition(".")[2]
    called = {other.name for other in trace.of_kind(EventKind.METHOD)}
    for call in event.stack[guard.depth :]:
        for method in trace.invocations_at(call):
            for receiver in refs(method.receiver):
                cls = receiver.root.cls if not receiver.path else None
                handlers = [m for each in cls.mro() for m in each.methods.values()] if cls is not None else []
                if any(
                    handler.name not in called and collective in _called_names(handler.node) for handler in handlers
                ):
                    return True
    return False


def _called_names(function: cst.FunctionDef) -> set[str]:
    """The last name of each function its own code calls (``broadcast`` of ``torch.distributed.broadcast(...)``)."""
    return {dotted(node.func).rpartition(".")[2] for node in own_nodes(function) if isinstance(node, cst.Call)}


def _protocol_method(trace: Trace) -> bool:
    """Is the trace a method's own run (nothing in the file calls it), and not a test's?"""
    return trace.instance is not None and not trace.entry.rpartition(".")[2].startswith("test")


def _same_class(trace: Trace, other: Trace) -> bool:
    return (
        trace.instance is not None and other.instance is not None and trace.instance.root.cls is other.instance.root.cls
    )


def _collective(trace: Trace, event: Event) -> str | None:
    """The collective an event performs, if any. One on an explicit process group is left alone:
    who must call it depends on the group's members, which the file does not show."""
    if event.kind is EventKind.CALL and event.qname:
        if "group" in event.kwargs or "process_group" in event.kwargs:
            return None
        if event.qname in DCP_COLLECTIVES and event.kwargs.get("no_dist") == Const(True):
            return None  # one process reads or writes the whole checkpoint, no collective
        if event.qname in DIST_COLLECTIVES or event.qname in DCP_COLLECTIVES:
            return event.qname.replace("torch.distributed.checkpoint.", "dcp.").replace("torch.distributed.", "dist.")
        if event.qname in FULL_STATE_DICT_HELPERS and _gathers_full(event) and not _plain_model(trace, event):
            return f"{event.name}(full_state_dict=True)"
        if event.qname in (apis.SET_MODEL_STATE_DICT, apis.SET_OPTIMIZER_STATE_DICT) and _broadcasts(event):
            return f"{event.name}(broadcast_from_rank0=True)"
    if event.kind is EventKind.METHOD and event.name in DTENSOR_COLLECTIVES and not _replicated(event.receiver):
        return f".{event.name}()"
    if event.kind is EventKind.METHOD and event.name == "unshard":
        if any(trace.is_fsdp_module(module, event) for module in refs(event.receiver)):
            return ".unshard()"
    return None


def _maybe_plain(facts: FileFacts, trace: Trace, event: Event) -> bool:
    """``if isinstance(x, DTensor): x = x.full_tensor()``: code written for a value that may be a
    plain tensor (logits of an unsharded model on rank 0, a full state dict's tensors). Unless ``x``
    is known to hold a sharded module's parameters, gradients or state, the gather may never run."""
    if any(not _known_sharded(trace, event, value) for value in event.ctx.dtensor_tested):
        return True
    node = event.node
    if not (event.kind is EventKind.METHOD and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    if _known_sharded(trace, event, event.receiver or Const(None)):
        return False
    return facts.code(node.func.value) in event.ctx.dtensor_checks  # `if isinstance(<receiver>, DTensor):`


def _known_sharded(trace: Trace, event: Event, value: Value) -> bool:
    """Does ``value`` hold a sharded module's parameters, gradients or (sharded) state here? A
    module's parameters and state count as sharded unless the module is known to be plain."""
    for part in walk_contents(value):
        if isinstance(part, Derived) or (isinstance(part, Ref) and trace.sharded_overlap(part, event)):
            return True
        if isinstance(part, Params) and not all(_plain_module(trace, s.ref, event) for s in part.sources):
            return True
        if isinstance(part, StateDict) and part.full is not True:
            # Its tensors are what the module held when it was taken, whatever happened to it after.
            taken = trace.events[part.at] if 0 <= part.at < event.index else event
            if not (isinstance(part.owner, Ref) and _plain_module(trace, part.owner, taken)):
                return True
    return False


def _plain_module(trace: Trace, module: Ref, event: Event) -> bool:
    """Was ``module`` built by this code, and neither sharded nor handed to code we cannot see
    before ``event`` (a reference model for a parity check)?"""
    whole = canonical(module)
    creation = whole.root.event
    if creation is None or trace.events[creation.index : creation.index + 1] != [creation]:
        return False  # built elsewhere, by code we cannot see or by another entry point
    if trace.sharded_overlap(module, event):
        return False
    handed = trace.handed_off([whole], creation.index)
    return handed is None or handed.index >= event.index


def _replicated(value) -> bool:
    """Is the DTensor the result of a gradient-norm function? Those return a replicated norm
    (every rank already holds the value), so `.full_tensor()` on it communicates nothing."""
    found = list(refs(value)) if value is not None else []
    return bool(found) and all(not ref.path and ref.root.qname in REPLICATED_NORMS for ref in found)


def _plain_model(trace: Trace, event: Event) -> bool:
    """Is the model sharded only later (a full state dict of a plain module gathers nothing, as
    in FSDP1's sync_module_states habit: rank 0 reads its weights, then the model is sharded)?"""
    found = list(refs(event.arg(0, "model") or Const(None)))
    return bool(found) and all(
        not trace.sharded_overlap(ref, event) and trace.sharded_later(ref, event) for ref in found
    )


def _gathers_full(event: Event) -> bool:
    results = walk_contents(event.result) if event.result is not None else ()
    return any(isinstance(value, StateDict) and value.full is True for value in results)


def _broadcasts(event: Event) -> bool:
    for ref in refs(event.kwargs.get("options") or Const(None)):
        creation = ref.root.event
        if creation is not None and creation.qname == apis.STATE_DICT_OPTIONS:
            return creation.kwargs.get("broadcast_from_rank0") == Const(True)
    return False


def _partner_after_exit(facts: FileFacts, event: Event, other: Event) -> bool:
    """``if rank == 0: barrier(); return`` with ``barrier()`` after the ``if``: rank 0 leaves after
    its collective, the other ranks enter the one after the test (``other``, later in the same call
    of the function), so each rank enters one."""
    guard = event.ctx.rank_guard
    if guard is None or guard.arm is None or other.index <= event.index:
        return False
    if any(node == guard.arm[0] for node, _ in other.ctx.branches) or other.ctx.rank_guard == guard:
        return False  # inside the test's arms, or guarded by the same test
    return _same_call(event, other, guard.depth) and facts.leaves_after(event.frames()[guard.depth])


def _matches(facts: FileFacts, event: Event, other: Event) -> bool:
    """Is the collective also called by the complementary ranks (so every rank enters it): in the
    other arm of the same test, under the opposite rank-0 test, or under the opposite outcome of
    the same test (``if not is_main: barrier()`` ... ``if is_main: barrier()``)?"""
    guard, theirs = event.ctx.rank_guard, other.ctx.rank_guard
    if guard is None:
        return False
    if guard.arm and any(node == guard.arm[0] and arm != guard.arm[1] for node, arm in other.ctx.branches):
        return True  # the other arm (`if main and sender: send(gather()) else: gather()`)
    if theirs is None:
        return False
    if theirs.ranks == COMPLEMENT.get(guard.ranks):
        return True
    return _same_call(event, other, guard.depth) and _opposite_outcomes(facts, guard, theirs)


def _same_call(event: Event, other: Event, depth: int) -> bool:
    """Do both events come from the same call of the function that holds the guard?"""
    mine, theirs = event.frames(), other.frames()
    return len(mine) > depth and len(theirs) > depth and mine[:depth] == theirs[:depth]


def _opposite_outcomes(facts: FileFacts, guard: RankGuard, theirs: RankGuard) -> bool:
    """Do the two guards take opposite outcomes of one test (its code, each ``not`` flipping it)?"""
    if guard.arm is None or theirs.arm is None:
        return False
    (mine, positive), (other, other_positive) = _outcome(facts, guard), _outcome(facts, theirs)
    return mine == other and positive != other_positive


def _outcome(facts: FileFacts, guard: RankGuard) -> tuple[str, bool]:
    """The test without its ``not``s, and whether the guarded arm runs when it holds."""
    test, positive = guard.node, guard.arm is not None and guard.arm[1] == 0
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, positive = test.expression, not positive
    return facts.code(test), positive
