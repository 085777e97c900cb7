"""Evidence: what a run showed, derived from the ranks' events alone (torch-free).

An evidence kind is a name, a detector over a :class:`RunRecord` and, where a rule's signature
says more than the kind (an exception type and message), a matcher. Adding a kind is one
``@evidence_kind`` function here plus the probe that records its events.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from fsdp2_lint.analysis.apis import mesh_dim_role
from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.record import Event, RunRecord
from fsdp2_lint.runtime.evidence.scope import Line

MAX_SUMMARY_MESSAGE = 120


@dataclass(frozen=True)
class Evidence:
    kind: str
    summary: str
    ranks: tuple[int, ...]
    lines: tuple[Line, ...] = ()  # lines of the user's script (or project: see .scope) this evidence points at
    exception_types: tuple[str, ...] = ()  # for exceptions: the class and its bases
    message: str = ""


Detector = Callable[[RunRecord], list[Evidence]]
Matcher = Callable[[Evidence, RuntimeSignature], bool]
Describer = Callable[[RuntimeSignature], str]


@dataclass(frozen=True)
class EvidenceKind:
    name: str
    detect: Detector
    matches: Matcher
    describe: Describer  # the expected failure, for reports


EVIDENCE_KINDS: dict[str, EvidenceKind] = {}


def evidence_kind(name: str, expected: str | Describer, matches: Matcher | None = None):
    """Register the decorated detector as evidence kind ``name``."""

    def register(detect: Detector) -> Detector:
        describe = expected if callable(expected) else (lambda signature: expected)
        matcher = matches or (lambda evidence, signature: evidence.kind == name)
        EVIDENCE_KINDS[name] = EvidenceKind(name, detect, matcher, describe)
        return detect

    return register


def observe(run: RunRecord) -> list[Evidence]:
    """Every piece of evidence the run shows, of every kind; a rank killed by a signal first, as
    the cause of what the other ranks then saw (a peer that vanished: "Connection reset by peer")."""
    found = [evidence for kind in EVIDENCE_KINDS.values() for evidence in kind.detect(run)]
    found = [evidence for evidence in found if not _symptom_of_unmatched_collective(evidence, found)]
    return sorted(found, key=lambda evidence: not (evidence.kind == "crash" and run.killed_by(evidence.ranks[0])))


def matches(evidence: Evidence, signature: RuntimeSignature) -> bool:
    """Whether the evidence is the failure the signature declares (whose kind is registered: the
    harness selects no rule whose signature names another)."""
    return EVIDENCE_KINDS[signature.evidence].matches(evidence, signature)


def describe_expected(signature: RuntimeSignature) -> str:
    return EVIDENCE_KINDS[signature.evidence].describe(signature)


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_SUMMARY_MESSAGE else text[: MAX_SUMMARY_MESSAGE - 1] + "…"


def _ranks(ranks) -> str:
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ",".join(map(str, ranks))


def _at(line: Line | None) -> str:
    """ " at line 42" in a script, " at pkg/parallel.py:42" in a project (see :mod:`.scope`)."""
    if line is None:
        return ""
    return f" at line {line}" if isinstance(line, int) else f" at {line}"


def _at_lines(lines: list[Line]) -> str:
    if not lines:
        return ""
    if all(isinstance(line, int) for line in lines):
        return f" at line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
    return f" at {', '.join(map(str, lines))}"


# exception ----------------------------------------------------------------------------------------


def _exception_matches(evidence: Evidence, signature: RuntimeSignature) -> bool:
    if evidence.kind != "exception":
        return False
    type_ok = not signature.exception or bool(set(signature.exception) & set(evidence.exception_types))
    message_ok = signature.message is None or re.search(signature.message, evidence.message) is not None
    return type_ok and message_ok


def _describe_exception(signature: RuntimeSignature) -> str:
    types = "/".join(signature.exception) or "exception"
    return f"{types} matching /{signature.message}/" if signature.message else types


@evidence_kind("exception", _describe_exception, _exception_matches)
def detect_exceptions(run: RunRecord) -> list[Evidence]:
    """Exceptions that ended a rank's script (or one of its threads), one item per distinct error."""
    grouped: dict[tuple, list[int]] = defaultdict(list)
    for rank, event in run.of_kind(events.EXCEPTION):
        key = (tuple(event["types"]), event["message"], event.get("line"), tuple(event.get("script_lines", ())))
        grouped[key].append(rank)
    found = []
    for (types, message, line, script_lines), ranks in grouped.items():
        first_line = _shorten((message.strip().splitlines() or [""])[0])
        found.append(
            Evidence(
                kind="exception",
                summary=f"{types[0]}: {first_line} ({_ranks(ranks)}{_at(line)})",
                ranks=tuple(ranks),
                lines=script_lines,
                exception_types=types,
                message=message,
            )
        )
    return found


# optimizer steps ---------------------------------------------------------------------------------


def _steps_by_optimizer(run: RunRecord) -> dict[tuple[int, int], list[Event]]:
    """The probed step events of each (rank, optimizer)."""
    steps: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for rank, event in run.of_kind(events.STEP):
        steps[(rank, event["optimizer_id"])].append(event)
    return steps


def _step_evidence(
    run: RunRecord,
    kind: str,
    holds: Callable[[Event], bool],
    describe: Callable[[list[Event]], str],
    cause_lines: Callable[[Event], tuple[Line, ...]] = lambda step: (),
) -> list[Evidence]:
    """One item per optimizer (merged across ranks) whose every probed step ``holds``; its lines
    are the optimizer's construction (and the calls that led to it), the last probed step and the
    ``cause_lines`` of that step."""
    grouped: dict[tuple[str, tuple[Line, ...]], list[int]] = defaultdict(list)
    for (rank, _), steps in _steps_by_optimizer(run).items():
        if all(holds(step) for step in steps):
            last = steps[-1]
            lines = (*last["optimizer_lines"], last.get("line"), *cause_lines(last))
            grouped[(describe(steps), tuple(dict.fromkeys(line for line in lines if line is not None)))].append(rank)
    return [
        Evidence(kind=kind, summary=f"{summary} ({_ranks(ranks)})", ranks=tuple(ranks), lines=lines)
        for (summary, lines), ranks in grouped.items()
    ]


def _optimizer(steps: list[Event]) -> str:
    last = steps[-1]
    return f"{last['optimizer']}{' built' + _at(last['optimizer_line']) if last['optimizer_line'] else ''}"


def _after(steps: list[Event]) -> str:
    return f"after {len(steps)} step(s){_at(steps[-1].get('line'))}"


def _sharded(step: Event) -> bool:
    return step["model_params"] > 0 and step["model_dtensor"] == step["model_params"] and step["compared"] > 0


@evidence_kind("params_unchanged", "optimizer steps leave all (sharded) parameters unchanged")
def detect_params_unchanged(run: RunRecord) -> list[Evidence]:
    """The optimizer holds no DTensor but tensors that were parameters until ``fully_shard``
    replaced them, and no parameter of the sharded model changes at any probed step (FSDP001). An
    optimizer over a model nobody sharded holds none of those, whatever the sharded model does."""

    def holds(step: Event) -> bool:
        stale = step["optimizer_dtensor"] == 0 and step["optimizer_replaced"] > 0
        return _sharded(step) and stale and step["changed"] == 0

    def describe(steps: list[Event]) -> str:
        last = steps[-1]
        return (
            f"{_optimizer(steps)} holds {last['optimizer_replaced']} tensor(s) fully_shard replaced and no DTensor; "
            f"{_after(steps)} 0 of {last['model_params']} parameters changed"
        )

    return _step_evidence(run, "params_unchanged", holds, describe)


@evidence_kind("partial_update", "some parameters never change: the optimizer holds plain tensors for them")
def detect_partial_update(run: RunRecord) -> list[Evidence]:
    """Some parameters change at every probed step, the others never do and the optimizer does not
    hold them: it holds the plain tensors that were the sharded model's parameters when it was built
    instead (FSDP008: the root, unsharded after a forward)."""

    def holds(step: Event) -> bool:
        partial = 0 < step["changed"] < step["compared"] and step["optimizer_unsharded"] > 0
        return partial and set(step["unchanged"]) <= set(step["not_held"])

    def describe(steps: list[Event]) -> str:
        last = steps[-1]
        return (
            f"{_optimizer(steps)} holds {last['optimizer_unsharded']} plain tensor(s), the sharded model's unsharded "
            f"parameters when it was built; {_after(steps)} {last['changed']} of {last['compared']} parameters "
            f"changed, never: {', '.join(last['unchanged'])}"
        )

    found = _step_evidence(run, "partial_update", holds, describe)
    return [evidence for evidence in found if _same_unchanged(run, evidence)]


def _same_unchanged(run: RunRecord, evidence: Evidence) -> bool:
    """The same parameters stayed unchanged at every probed step ("never change")."""
    for (rank, _), steps in _steps_by_optimizer(run).items():
        if rank in evidence.ranks and len({tuple(step["unchanged"]) for step in steps}) > 1:
            return False
    return True


@evidence_kind("grads_not_reduced", "sharded parameters the optimizer holds get no gradient and never change")
def detect_grads_not_reduced(run: RunRecord) -> list[Evidence]:
    """At every probed step, trainable sharded parameters held by the optimizer have no gradient
    and do not change, and their gradient sync was off at the backward before it (FSDP014:
    ``set_requires_gradient_sync(False)`` never switched back on). A parameter the forward did not
    use has no gradient either, with sync on: that is no evidence."""

    def holds(step: Event) -> bool:
        stuck = step["sync_off_changed"] == 0 and step["sync_off_not_held"] == 0
        return _sharded(step) and step["sync_off_count"] > 0 and stuck

    def describe(steps: list[Event]) -> str:
        last = steps[-1]
        return (
            f"{_after(steps)} of {_optimizer(steps)}: {last['sync_off_count']} of {last['model_params']} sharded "
            f"parameters had no gradient and did not change, their gradient sync switched off by "
            f"set_requires_gradient_sync(False){_at_lines(last['sync_off_lines'])} ({', '.join(last['sync_off'])})"
        )

    return _step_evidence(run, "grads_not_reduced", holds, describe, lambda step: tuple(step["sync_off_lines"]))


def _kind_or_exception(name: str) -> Matcher:
    """For rules whose failure is silent in one form and raises in another: evidence of kind
    ``name``, or the exception the signature declares (when it declares one)."""

    def match(evidence: Evidence, signature: RuntimeSignature) -> bool:
        if evidence.kind == "exception":
            return bool(signature.exception or signature.message) and _exception_matches(evidence, signature)
        return evidence.kind == name

    return match


def _describe_or_exception(observed: str) -> Describer:
    def describe(signature: RuntimeSignature) -> str:
        if signature.exception or signature.message:
            return f"{observed}, or {_describe_exception(signature)}"
        return observed

    return describe


# not_materialized ---------------------------------------------------------------------------------


@evidence_kind(
    "not_materialized",
    _describe_or_exception("parameters left uninitialised by to_empty()"),
    _kind_or_exception("not_materialized"),
)
def detect_not_materialized(run: RunRecord) -> list[Evidence]:
    """At the first optimizer step, every parameter still holds exactly the memory ``to_empty()``
    allocated: nothing initialised or loaded them (FSDP006)."""
    grouped: dict[tuple, list[int]] = defaultdict(list)
    for rank, event in run.of_kind(events.MATERIALIZED):
        if event["compared"] and event["untouched_count"] == event["compared"]:
            grouped[(event["to_empty_line"], event.get("line"), event["compared"])].append(rank)
    return [
        Evidence(
            kind="not_materialized",
            summary=f"to_empty(){_at(to_empty_line)} left {count} parameters uninitialised: nothing wrote them "
            f"before the first optimizer step{_at(step_line)} ({_ranks(ranks)})",
            ranks=tuple(ranks),
            lines=tuple(line for line in (to_empty_line, step_line) if line is not None),
        )
        for (to_empty_line, step_line, count), ranks in grouped.items()
    ]


# single_param_group -------------------------------------------------------------------------------


@evidence_kind("single_param_group", "one FSDP parameter group holds the parameters of several modules")
def detect_single_param_group(run: RunRecord) -> list[Evidence]:
    """At the model's first forward, its outermost sharded module has no group inside it while
    several of its modules own parameters: its one group holds them all, so each forward
    all-gathers the whole of it (FSDP034). A block sharded on its own, before its root, is not."""
    grouped: dict[tuple, list[int]] = defaultdict(list)
    for rank, event in run.of_kind(events.FIRST_FORWARD):
        if event["nested"] == 0 and event["owners"] >= 2:
            key = (event["module"], event["shard_line"], event.get("line"), event["params"], event["owners"])
            grouped[key].append(rank)
    return [
        Evidence(
            kind="single_param_group",
            summary=f"fully_shard({module}){_at(shard_line)}: one parameter group holds all {params} parameters of "
            f"{owners} modules and no submodule has a group of its own; its first forward{_at(line)} all-gathers "
            f"them all ({_ranks(ranks)})",
            ranks=tuple(ranks),
            lines=tuple(line for line in (shard_line, line) if line is not None),
        )
        for (module, shard_line, line, params, owners), ranks in grouped.items()
    ]


# dtensor_save -------------------------------------------------------------------------------------


@evidence_kind("dtensor_save", "torch.save of DTensors (each file holds one rank's shards)")
def detect_dtensor_saves(run: RunRecord) -> list[Evidence]:
    """``torch.save`` from user code of an object holding DTensors, unless every rank wrote its own
    file from that line (deliberate per-rank shard files)."""
    targets: dict[tuple, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    counts: dict[tuple, int] = {}
    for rank, event in run.of_kind(events.SAVE):
        if event["dtensors"]:
            key = (event.get("line"), event.get("site"))
            targets[key][rank].add(event["target"])
            counts[key] = max(counts.get(key, 0), event["dtensors"])
    found = []
    for (line, site), by_rank in targets.items():
        if _one_file_per_rank(by_rank, run.world_size):
            continue
        written = ", ".join(sorted({os.path.basename(t) or t for targets in by_rank.values() for t in targets}))
        where = _at(line) if line is not None else f" at {site}"
        dtensors = counts[(line, site)]
        found.append(
            Evidence(
                kind="dtensor_save",
                summary=f"torch.save{where} wrote {dtensors} DTensors to {written} ({_ranks(by_rank)})",
                ranks=tuple(sorted(by_rank)),
                lines=(line,) if line is not None else (),
            )
        )
    return found


def _one_file_per_rank(by_rank: dict[int, set[str]], world_size: int) -> bool:
    if len(by_rank) < world_size:
        return False
    all_targets = [target for targets in by_rank.values() for target in targets]
    return len(all_targets) == len(set(all_targets))


# hang ---------------------------------------------------------------------------------------------


def describe_event(event: Event | None) -> str:
    if event is None:
        return "nothing (never started)"
    kind, line = event["kind"], _at(event.get("line"))
    if kind == events.COLLECTIVE:
        return f"{event['op']}{line}"
    if kind == events.STEP:
        return f"{event['optimizer']}.step #{event['step']}{line}"
    if kind == events.FULLY_SHARD:
        return f"fully_shard({event['module']}){line}"
    if kind == events.FIRST_FORWARD:
        return f"first forward of {event['module']}{line}"
    if kind == events.OPTIMIZER:
        return f"{event['optimizer']}(...){line}"
    if kind == events.SAVE:
        return f"torch.save{line}"
    return kind


@evidence_kind(
    "hang",
    lambda signature: "hang (the ranks stop making progress), or a collective that fails once its partners went on",
    lambda evidence, signature: evidence.kind in ("hang", "unmatched_collective"),
)
def detect_hang(run: RunRecord) -> list[Evidence]:
    """Ranks still running when the timeout expired, or when the harness found them stuck (see
    :mod:`fsdp2_lint.runtime.launch.stall`), with the last event each reached and the line its stack dump was in."""
    if not run.timed_out:
        return []
    parts, lines = [], []
    for rank in run.ranks:
        last = describe_event(run.last_event(rank))
        if rank not in run.timed_out:
            parts.append(f"rank {rank} finished (last: {last})")
            continue
        stack = run.stacks.get(rank)
        stuck = f"; stuck{_at(stack.line)} in {stack.innermost}" if stack and stack.innermost else ""
        parts.append(f"rank {rank} last reached {last}{stuck}")
        if stack:
            lines.extend(stack.lines)
    return [
        Evidence(
            kind="hang",
            summary=f"{_stuck(run)}: " + "; ".join(parts),
            ranks=run.timed_out,
            lines=tuple(dict.fromkeys(lines)),
        )
    ]


@evidence_kind("unmatched_collective", "a collective some ranks entered and the others never ran there")
def detect_unmatched_collectives(run: RunRecord) -> list[Evidence]:
    """Ranks whose script ended with an exception inside a collective that some other rank ran
    fewer times at that line: the partner went on (finished, tore the group down) instead of joining,
    so the collective failed rather than hung (gloo: "Connection reset by peer")."""
    at_line = {
        rank: Counter(e.get("line") for e in run.events.get(rank, []) if e["kind"] == events.COLLECTIVE)
        for rank in run.ranks
    }
    raised: dict[tuple, list[int]] = defaultdict(list)
    for rank in run.ranks:
        final, collective = run.final_event(rank), _last_collective(run, rank)
        if final is None or final["kind"] != events.EXCEPTION or collective is None:
            continue
        line = final.get("line")
        if line is not None and collective.get("line") == line:
            raised[(collective["op"], line, final["types"][0])].append(rank)
    found = []
    for (op, line, error), ranks in raised.items():
        absent = [other for other in run.ranks if at_line[other][line] < min(at_line[rank][line] for rank in ranks)]
        if not absent:
            continue
        others = "; ".join(f"rank {other} last reached {describe_event(run.last_event(other))}" for other in absent)
        summary = (
            f"{op}{_at(line)} raised {error} on {_ranks(ranks)}, which {_ranks(absent)} never joined there: {others}"
        )
        found.append(Evidence(kind="unmatched_collective", summary=summary, ranks=tuple(ranks), lines=(line,)))
    return found


def _symptom_of_unmatched_collective(evidence: Evidence, found: list[Evidence]) -> bool:
    """The exception a collective raised because its partners never joined it: that failure, told
    better by its ``unmatched_collective`` evidence."""
    return evidence.kind == "exception" and any(
        other.kind == "unmatched_collective"
        and set(evidence.ranks) <= set(other.ranks)
        and other.lines[0] in evidence.lines
        for other in found
    )


def _last_collective(run: RunRecord, rank: int) -> Event | None:
    return next((e for e in reversed(run.events.get(rank, [])) if e["kind"] == events.COLLECTIVE), None)


def _stuck(run: RunRecord) -> str:
    if run.stalled_for is None:
        return f"timed out after {run.spec.timeout:g}s"
    return (
        f"stalled after {run.seconds:.0f}s: no event and no CPU for {run.stalled_for:.0f}s, each rank blocked in torch"
    )


# crash --------------------------------------------------------------------------------------------


@evidence_kind("crash", "the process dies or exits non-zero without a Python exception")
def detect_crash(run: RunRecord) -> list[Evidence]:
    """Ranks that ended without finishing the script and without a Python exception: killed by a
    signal (named), ``os._exit``, ``sys.exit(non-zero)``. Ranks the launcher stopped are not crashes."""
    found = []
    for rank in run.ranks:
        if rank in run.timed_out or rank in run.stopped:
            continue
        final = run.final_event(rank)
        if final is not None and final["kind"] == events.EXCEPTION:
            continue
        if final is not None and final["code"] != 0:
            summary, lines = f"rank {rank} exited with code {final['code']}", ()
        elif final is None:
            summary, lines = _unfinished(run, rank)
        else:
            continue
        found.append(Evidence(kind="crash", summary=summary, ranks=(rank,), lines=lines))
    return found


def _unfinished(run: RunRecord, rank: int) -> tuple[str, tuple[Line, ...]]:
    """How a rank that never finished the script ended, and the lines of the script it was on."""
    last = describe_event(run.last_event(rank))
    killed_by = run.killed_by(rank)
    if killed_by:
        site = run.fatal_site(rank)
        where = f"{_at(site.line)} in {site.innermost}" if site and site.innermost else ""
        return f"rank {rank} killed by {killed_by}{where}; last: {last}", site.lines if site else ()
    returncode = run.returncodes.get(rank)
    how = f" (exit status {returncode})" if returncode is not None else ""
    return f"rank {rank} ended without finishing the script{how}; last: {last}", ()


# not_loaded ---------------------------------------------------------------------------------------


@evidence_kind("not_loaded", "after fully_shard, other ranks' shards do not hold the values one rank loaded")
def detect_not_loaded(run: RunRecord) -> list[Evidence]:
    """A rank loaded parameters (``load_state_dict``) and still held them at ``fully_shard``; right
    after it, another rank that loaded nothing holds a shard that is not its chunk of those values,
    and nothing wrote that shard before the model's first forward (FSDP010: FSDP2 keeps each rank's
    own chunk, so only the loader's slice is the checkpoint)."""
    rewritten = {
        (rank, call, name)
        for rank, event in run.of_kind(events.FIRST_FORWARD)
        for call, name in event["changed_since_shard"]
    }
    shards: dict[tuple, dict[int, Event]] = defaultdict(dict)
    for rank, event in run.of_kind(events.FULLY_SHARD):
        for value in event.get("values", ()):
            shards[(event.get("call"), event.get("line"), value["name"])][rank] = value
    loads: dict[int | None, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for (call, shard_line, name), by_rank in shards.items():
        loaders = {rank: value for rank, value in by_rank.items() if "chunks" in value}
        if not loaders:
            continue
        loader, reference = min(loaders.items())
        chunks = reference["chunks"]
        if chunks[reference["index"]] != reference["local"]:
            continue  # the loader's own shard is not the chunk expected: the layout is not understood
        load = loads[reference["loaded_line"]]
        load["loaders"].add(loader)
        load["loaded"].add((call, name))
        for rank, value in by_rank.items():
            kept_own = value["index"] < len(chunks) and value["local"] != chunks[value["index"]]
            if rank not in loaders and kept_own and (rank, call, name) not in rewritten:
                load["differ"].add((call, name))
                load["ranks"].add(rank)
                load["shard_lines"].add(shard_line)
    found = []
    for load_line, load in loads.items():
        if not load["differ"]:
            continue
        shard_lines = sorted(line for line in load["shard_lines"] if line is not None)
        found.append(
            Evidence(
                kind="not_loaded",
                summary=f"{_ranks(load['loaders'])} loaded {len(load['loaded'])} parameters{_at(load_line)}; right "
                f"after fully_shard{_at_lines(shard_lines)}, {_ranks(load['ranks'])}'s shard of "
                f"{len(load['differ'])} of them is not the loaded values (it kept its own)",
                ranks=tuple(sorted(load["ranks"])),
                lines=tuple(line for line in (load_line, *shard_lines) if line is not None),
            )
        )
    return found


# wrong_grad_norm ----------------------------------------------------------------------------------

NORM_SAME = 1e-4  # relative difference under which two norms are the same value
NORM_DIFFERENT = 1e-3  # relative difference over which they are not


def _relative_difference(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def _stale_clip(norm: Event, global_norm: float) -> bool:
    """Clipping given tensors that are not the model's parameters, none with a gradient, captured
    before fully_shard replaced them: it returns 0 and clips nothing."""
    return (
        norm.get("given", 0) > 0
        and norm["given_model"] == 0
        and norm["given_grads"] == 0
        and norm["given_replaced"] > 0
        and norm["value"] == 0.0
        and global_norm > 0.0
    )


def _local_norm(norm: Event, global_norm: float) -> bool:
    """The value is this rank's norm of its own gradient shards, which is not the global norm."""
    local = math.sqrt(norm["local_sq"])
    return (
        _relative_difference(norm["value"], local) < NORM_SAME
        and _relative_difference(local, global_norm) > NORM_DIFFERENT
    )


@evidence_kind("wrong_grad_norm", "a gradient norm the script computes differs from the model's global gradient norm")
def detect_wrong_grad_norm(run: RunRecord) -> list[Evidence]:
    """Gradient norms (clip_grad_norm_, vector_norm, sqrt, ... called from user code) compared with
    the model's global gradient norm, summed offline from every rank's share (FSDP015): a clip over
    stale parameters returns 0, a norm over local shards returns each rank's own value."""
    calls: dict[tuple, dict[int, Event]] = defaultdict(dict)
    for rank, event in run.of_kind(events.GRAD_NORM):
        calls[(event["function"], event.get("line"), event["occurrence"])][rank] = event
    wrong: dict[tuple, dict[int, tuple[float, float]]] = defaultdict(dict)
    for (function, line, _), by_rank in sorted(calls.items(), key=lambda item: item[0][2]):
        if len(by_rank) != run.world_size:
            continue
        global_norm = math.sqrt(sum(event["global_sq"] for event in by_rank.values()))
        for rank, event in by_rank.items():
            problem = (
                "stale" if _stale_clip(event, global_norm) else "local" if _local_norm(event, global_norm) else None
            )
            if problem is not None:
                wrong[(function, line, problem, event.get("given", 0))].setdefault(rank, (event["value"], global_norm))
    found = []
    for (function, line, problem, given), by_rank in wrong.items():
        ranks = sorted(by_rank)
        global_norm = by_rank[ranks[0]][1]
        if problem == "stale":
            what = (
                f"returned 0 over {given} tensors that are not the sharded model's parameters (none has a gradient); "
                f"the model's global gradient norm is {global_norm:.6g}: nothing is clipped"
            )
        else:
            values = ", ".join(f"{by_rank[rank][0]:.6g} on rank {rank}" for rank in ranks)
            what = (
                f"returned {values}: each rank's norm of its own gradient shards; the global norm is {global_norm:.6g}"
            )
        found.append(
            Evidence(
                kind="wrong_grad_norm",
                summary=f"{function.rpartition('.')[2]}{_at(line)} {what} ({_ranks(ranks)})",
                ranks=tuple(ranks),
                lines=(line,) if line is not None else (),
            )
        )
    return found


# FSDP1 APIs on FSDP2 models -----------------------------------------------------------------------


def _grouped_evidence(run: RunRecord, kind: str, of_kind: str, holds: Callable[[Event], bool],
                      describe: Callable[[Event], str], lines: Callable[[Event], tuple]) -> list[Evidence]:  # fmt: skip
    """One item per distinct description of the events that ``hold``, with the ranks that showed it."""
    grouped: dict[tuple[str, tuple], list[int]] = defaultdict(list)
    for rank, event in run.of_kind(of_kind):
        if holds(event):
            grouped[(describe(event), tuple(line for line in lines(event) if line is not None))].append(rank)
    return [
        Evidence(kind=kind, summary=f"{summary} ({_ranks(ranks)})", ranks=tuple(ranks), lines=lines)
        for (summary, lines), ranks in grouped.items()
    ]


@evidence_kind(
    "state_dict_type_ignored",
    _describe_or_exception("state_dict() still returns DTensor shards after FSDP.set_state_dict_type(FULL_STATE_DICT)"),
    _kind_or_exception("state_dict_type_ignored"),
)
def detect_state_dict_type_ignored(run: RunRecord) -> list[Evidence]:
    """``FSDP.set_state_dict_type(model, FULL_STATE_DICT)`` (itself, or inside the ``state_dict_type``
    context) on an FSDP2 model, then its ``state_dict()`` returned DTensors (FSDP009)."""
    return _grouped_evidence(
        run,
        "state_dict_type_ignored",
        events.STATE_DICT,
        lambda event: event["requested"] == "FULL_STATE_DICT" and event["dtensors"] > 0,
        lambda event: (
            f"{event['module']}.state_dict(){_at(event.get('line'))} returned {event['dtensors']} DTensor "
            f"shards after FSDP.set_state_dict_type(FULL_STATE_DICT){_at(event['config_line'])}: the FSDP1 setting "
            "did nothing"
        ),
        lambda event: (event["config_line"], event.get("line")),
    )


@evidence_kind("still_sharded", "inside FSDP.summon_full_params the parameters are still sharded DTensors")
def detect_still_sharded(run: RunRecord) -> list[Evidence]:
    """Inside ``FSDP.summon_full_params(model)`` this rank holds only shards of some parameters (FSDP016)."""
    return _grouped_evidence(
        run,
        "still_sharded",
        events.SUMMON,
        lambda event: event["sharded"] > 0,
        lambda event: (
            f"inside FSDP.summon_full_params({event['module']}){_at(event.get('line'))}, "
            f"{event['sharded']} of {event['params']} parameters are still sharded DTensors"
        ),
        lambda event: (event.get("line"),),
    )


@evidence_kind(
    "fsdp1_params_resharded",
    _describe_or_exception("fully_shard puts parameters FSDP1 already manages into its own group"),
    _kind_or_exception("fsdp1_params_resharded"),
)
def detect_fsdp1_params_resharded(run: RunRecord) -> list[Evidence]:
    """``fully_shard`` took parameters of FSDP1 (``FullyShardedDataParallel``) modules, FSDP1's own
    flat-parameter shards, into its group and sharded them again (FSDP017)."""
    return _grouped_evidence(
        run,
        "fsdp1_params_resharded",
        events.FULLY_SHARD,
        lambda event: event.get("fsdp1_params", 0) > 0,
        lambda event: (
            f"fully_shard({event['module']}){_at(event.get('line'))} sharded again "
            f"{event['fsdp1_params']} parameters that FSDP1 (FullyShardedDataParallel) had already flattened and sharded"
        ),
        lambda event: (event.get("line"),),
    )


@evidence_kind(
    "offload_policy_ignored",
    _describe_or_exception("fully_shard keeps an offload policy it does not know and offloads nothing"),
    _kind_or_exception("offload_policy_ignored"),
)
def detect_offload_policy_ignored(run: RunRecord) -> list[Evidence]:
    """The parameter group ``fully_shard`` built holds an offload policy that is not an FSDP2
    ``OffloadPolicy`` but asks to offload parameters, and none is offloaded (FSDP023)."""
    return _grouped_evidence(
        run,
        "offload_policy_ignored",
        events.FULLY_SHARD,
        lambda event: event.get("foreign_offload", False) and event["offloaded"] == 0,
        lambda event: (
            f"fully_shard({event['module']}){_at(event.get('line'))} kept offload_policy="
            f"{event['offload_policy']}(offload_params=True), not an FSDP2 CPUOffloadPolicy: none of its "
            f"{event['group_params']} parameters is offloaded"
        ),
        lambda event: (event.get("line"),),
    )


@evidence_kind(
    "low_precision_master_weights",
    "the optimizer holds bf16/fp16 sharded parameters that their MixedPrecisionPolicy(param_dtype=) left uncast",
)
def detect_low_precision_master_weights(run: RunRecord) -> list[Evidence]:
    """An optimizer built over sharded parameters whose dtype already was the low-precision
    ``param_dtype`` of their ``fully_shard`` group's ``MixedPrecisionPolicy``: the policy cast
    nothing, and the master weights are low precision (FSDP035)."""
    return _grouped_evidence(
        run,
        "low_precision_master_weights",
        events.MASTER_WEIGHTS,
        lambda event: event.get("policy_noop", 0) > 0,
        lambda event: (
            f"{event['optimizer']}{_at(event.get('line'))} holds {event['policy_noop']} of {event['params']} "
            f"parameters as {event['policy_dtype']} master weights: fully_shard's MixedPrecisionPolicy"
            f"(param_dtype={event['policy_dtype']}) found them already {event['policy_dtype']} and cast nothing"
        ),
        lambda event: (event.get("line"),),
    )


# buffer_not_recomputed (FSDP039) -------------------------------------------------------------------


@evidence_kind(
    "buffer_not_recomputed",
    _describe_or_exception("non-persistent buffers still hold what to_empty() allocated at the first step"),
    _kind_or_exception("buffer_not_recomputed"),
)
def detect_buffer_not_recomputed(run: RunRecord) -> list[Evidence]:
    """At the first optimizer step, a non-persistent buffer (``register_buffer(..., persistent=False)``)
    is still the tensor ``to_empty()`` put in its module, holding the same bits: nothing recomputed
    it, and no state-dict load can (FSDP039)."""
    return _grouped_evidence(
        run,
        "buffer_not_recomputed",
        events.BUFFERS_AFTER_TO_EMPTY,
        lambda event: event["untouched_count"] > 0,
        lambda event: (
            f"to_empty(){_at(event['to_empty_line'])} left {event['untouched_count']} of {event['compared']} "
            f"non-persistent buffers ({', '.join(event['untouched'])}) uninitialised: nothing recomputed them "
            f"before the first optimizer step{_at(event.get('line'))}"
        ),
        lambda event: (event["to_empty_line"], event.get("line")),
    )


# tie_broken (FSDP018) -----------------------------------------------------------------------------


@evidence_kind(
    "tie_broken",
    _describe_or_exception("parameters tied before to_empty() are separate tensors at the first step"),
    _kind_or_exception("tie_broken"),
)
def detect_tie_broken(run: RunRecord) -> list[Evidence]:
    """At the first optimizer step, names that shared one parameter just before ``to_empty()`` hold
    distinct tensors: the tie broke and nothing tied them again, so each trains a copy (FSDP018)."""
    return _grouped_evidence(
        run,
        "tie_broken",
        events.TIES_AFTER_TO_EMPTY,
        lambda event: event["broken_count"] > 0,
        lambda event: (
            f"{event['module']}.to_empty(){_at(event['to_empty_line'])} broke {event['broken_count']} of "
            f"{event['ties']} ties ({'; '.join(' = '.join(names) for names in event['broken'])}): they are separate "
            f"tensors at the first optimizer step{_at(event.get('line'))}"
        ),
        lambda event: (event["to_empty_line"], event.get("line")),
    )


# stale_unsharded_params (FSDP044) -----------------------------------------------------------------


@evidence_kind(
    "stale_unsharded_params",
    "a forward used unsharded parameters that no longer match the sharded ones the optimizer updated",
)
def detect_stale_unsharded_params(run: RunRecord) -> list[Evidence]:
    """A parameter group was still unsharded at a forward, so FSDP2 skipped the all-gather, and its
    unsharded copy differed from this rank's shard: the forward used values from before the optimizer
    step (FSDP044)."""
    return _grouped_evidence(
        run,
        "stale_unsharded_params",
        events.STALE_UNSHARDED,
        lambda event: event["stale"] > 0,
        lambda event: (
            f"the forward{_at(event.get('line'))} reused the unsharded parameters of {event['module']}: "
            f"{event['stale']} of {event['params']} differ from the shards the optimizer step updated "
            f"({', '.join(event.get('names', []))})"
        ),
        lambda event: (event.get("line"),),
    )


# divergent_forward_count (FSDP012) ----------------------------------------------------------------


@evidence_kind(
    "divergent_forward_count",
    "a hang or a failed collective after the ranks ran different numbers of forwards/backwards of the sharded "
    "model, or of one of its sharded groups",
)
def detect_divergent_forward_count(run: RunRecord) -> list[Evidence]:
    """The run hung, and when it did the ranks had run different numbers of sharded-root forwards
    or ``backward()`` calls (the ``pass`` events): one rank skipped a pass the others ran. Or the run
    hung or failed while the ranks were in the same forward of the root and had begun the forwards
    of its sharded groups in different sequences (the ``group_forward`` events): a separately sharded
    submodule ran on some ranks only (FSDP012)."""
    return _pass_counts_differ(run) or (_skipped_group(run) if run.timed_out or not run.completed() else [])


def _pass_counts_differ(run: RunRecord) -> list[Evidence]:
    """The run hung after the ranks' last ``pass`` events counted different forwards/backwards."""
    last: dict[int, Event] = {}
    for rank, event in run.of_kind(events.PASS):
        last[rank] = event
    if not run.timed_out or len(last) < 2 or len({(e["forwards"], e["backwards"]) for e in last.values()}) < 2:
        return []
    parts = [
        f"rank {rank} {event['forwards']} forward(s), {event['backwards']} backward(s)"
        f" (last: {event['phase']}{_at(event.get('line'))})"
        for rank, event in sorted(last.items())
    ]
    return [
        Evidence(
            kind="divergent_forward_count",
            summary="ranks ran different numbers of passes of the sharded model before the hang: " + "; ".join(parts),
            ranks=tuple(sorted(last)),
            lines=tuple(dict.fromkeys(event.get("line") for event in last.values() if event.get("line") is not None)),
        )
    ]


def _skipped_group(run: RunRecord) -> list[Evidence]:
    """In one forward of the root, two ranks began the forwards of the sharded groups in sequences
    neither of which is the start of the other: one rank skipped a group the other ran, so their
    all-gathers paired up wrongly (a rank that is only further along is not this)."""
    passes: dict[int, dict[int, list[Event]]] = {}
    for rank, event in run.of_kind(events.GROUP_FORWARD):
        passes.setdefault(rank, {}).setdefault(event["forwards"], []).append(event)
    for a, b in itertools.combinations(sorted(passes), 2):
        for number in sorted(passes[a].keys() & passes[b].keys()):
            if number < 1:
                continue
            mine, theirs = passes[a][number], passes[b][number]
            n = min(len(mine), len(theirs))
            if [e["module"] for e in mine[:n]] == [e["module"] for e in theirs[:n]]:
                continue
            parts = [
                f"rank {rank} ran {', '.join(e['module'] for e in sequence)}"
                for rank, sequence in ((a, mine), (b, theirs))
            ]
            first = next(i for i in range(n) if mine[i]["module"] != theirs[i]["module"])
            lines = (mine[first].get("line"), theirs[first].get("line"))
            return [
                Evidence(
                    kind="divergent_forward_count",
                    summary=f"in forward #{number} of the sharded model the ranks ran different sharded groups before "
                    "the run failed: " + "; ".join(parts),
                    ranks=(a, b),
                    lines=tuple(dict.fromkeys(line for line in lines if line is not None)),
                )
            ]
    return []


# sync_per_microbatch (FSDP033) -------------------------------------------------------------------


@evidence_kind("sync_per_microbatch", "an FSDP2 parameter group reduce-scatters its gradients more than once per step")
def detect_sync_per_microbatch(run: RunRecord) -> list[Evidence]:
    """Between two optimizer steps several backward passes ran and a parameter group of the sharded
    model reduce-scattered its gradients after more than one of them (gradient accumulation with
    gradient sync left on, FSDP033). With ``set_requires_gradient_sync(False)`` on all micro-batches
    but the last each group reduce-scatters once per step: no evidence."""
    return _grouped_evidence(
        run,
        "sync_per_microbatch",
        events.REDUCE_SCATTERS,
        lambda event: event["backwards"] > 1 and event["most_per_group"] > 1,
        lambda event: (
            f"{event['backwards']} backward passes before the optimizer step{_at(event.get('line'))}: "
            f"{event['reduce_scatters']} gradient reduce-scatters for {event['groups']} parameter groups "
            f"(up to {event['most_per_group']} per group, 1 is enough)"
        ),
        lambda event: (event.get("line"),),
    )


# nonuniform_group_dtype (FSDP026) ----------------------------------------------------------------


@evidence_kind(
    "nonuniform_group_dtype",
    "a fully_shard parameter group holds trainable parameters of two or more dtypes at its first forward",
)
def detect_nonuniform_group_dtype(run: RunRecord) -> list[Evidence]:
    """At a parameter group's lazy init (its first forward), the parameters of the group that
    require gradients had two or more dtypes (an fp32 island under a bf16 group): the cause of
    FSDP2's ``AssertionError: FSDP expects uniform original parameter dtype`` (FSDP026). A group
    whose other-dtype parameters are frozen, or whose island is its own group, records nothing."""
    return _grouped_evidence(
        run,
        "nonuniform_group_dtype",
        events.GROUP_DTYPES,
        lambda event: len(event["dtypes"]) > 1,
        lambda event: (
            f"the parameter group of {event['module']} holds trainable parameters of {len(event['dtypes'])} dtypes "
            f"at its first forward{_at(event.get('line'))}: "
            + "; ".join(
                f"{dtype} ({count}: {', '.join(event['names'].get(dtype, []))})"
                for dtype, count in event["dtypes"].items()
            )
        ),
        lambda event: (event.get("line"),),
    )


# inplace_on_view_output (FSDP028) ----------------------------------------------------------------


@evidence_kind(
    "inplace_on_view_output",
    _describe_or_exception("an output of a sharded module that is a view was modified in place before backward"),
    _kind_or_exception("inplace_on_view_output"),
)
def detect_inplace_on_view_output(run: RunRecord) -> list[Evidence]:
    """A sharded module that frees its parameters after forward returned a view, FSDP2 hooked its
    pre-backward all-gather on it, and the view's version counter moved before ``backward()``: an
    in-place op rewrote its autograd history, so the hook cannot run (FSDP028)."""
    return _grouped_evidence(
        run,
        "inplace_on_view_output",
        events.INPLACE_VIEW_OUTPUT,
        lambda event: event["resharded"] and event["writes"] > 0,
        lambda event: (
            f"the output of {event['module']}{_at(event.get('line'))} (a view, shape {event['shape']}) was modified "
            f"in place {event['writes']} time(s) after FSDP2 registered its pre-backward all-gather hook on it, "
            "with the module's parameters resharded: the hook is dropped"
        ),
        lambda event: (event.get("line"),),
    )


# wrong_mesh (FSDP040) ----------------------------------------------------------------------------


def _misplaced_dims(event: Event) -> list[str]:
    """The dims of a named multi-dimensional mesh whose placement contradicts their names: a
    model-parallel dim (``tp``) FSDP sharded or replicated over, a ``shard`` dim it replicated over,
    a ``replicate`` dim it sharded over."""
    names = event.get("dim_names")
    if event.get("ndim", 1) < 2 or not names:
        return []
    wrong = []
    for name, placement in zip(names, event["placements"], strict=False):
        kind = mesh_dim_role(name)
        replicated = placement.startswith("Replicate")
        if kind == "model" or (kind == "shard" and replicated) or (kind == "replicate" and not replicated):
            wrong.append(f"{'replicated' if replicated else 'sharded'} over {name!r}")
    return wrong


@evidence_kind(
    "wrong_mesh",
    "fully_shard laid the parameters out over a mesh dimension whose name says it is not for that",
)
def detect_wrong_mesh(run: RunRecord) -> list[Evidence]:
    """A ``fully_shard`` call put its group's parameters on a named 2-D mesh as HSDP (``Replicate()``
    over dim 0, ``Shard`` over dim 1) where a dimension's name contradicts that: a (dp, tp) world
    mesh handed whole, or a (shard, replicate) ordered mesh (FSDP040). A 1-D slice, or a 2-D
    mesh named (replicate, shard), is no evidence."""
    return _grouped_evidence(
        run,
        "wrong_mesh",
        events.SHARD_MESH,
        lambda event: bool(_misplaced_dims(event)),
        lambda event: (
            f"fully_shard{_at(event.get('line'))} put {event['params']} parameters of {event['module']} on the "
            f"{event['ndim']}-D mesh {tuple(event['dim_names'])} (shape {tuple(event['shape'])}) as "
            f"({', '.join(event['placements'])}): "
            + ", ".join(
                f"{'replicated' if p.startswith('Replicate') else 'sharded'} over {n!r}"
                for n, p in zip(event["dim_names"], event["placements"], strict=False)
            )
            + f" (wrong: {'; '.join(_misplaced_dims(event))})"
        ),
        lambda event: (event.get("line"),),
    )


# reentrant_checkpoint_of_sharded (FSDP036) -------------------------------------------------------


@evidence_kind(
    "reentrant_checkpoint_of_sharded",
    "a reentrant activation checkpoint ran an FSDP2 module several times before the backward that recomputes it",
)
def detect_reentrant_checkpoint_of_sharded(run: RunRecord) -> list[Evidence]:
    """A reentrant ``checkpoint`` (``use_reentrant=True``, its default, or ``CheckpointImpl.REENTRANT``)
    was given a module already sharded with ``fully_shard`` and ran it two or more times before the
    backward that recomputes it: each recompute runs FSDP's hooks in a nested backward, and torch 2.13
    keeps the gradients of only some of them (FSDP036). One forward per backward: no evidence."""
    return _grouped_evidence(
        run,
        "reentrant_checkpoint_of_sharded",
        events.REENTRANT_CHECKPOINT,
        lambda event: event["forwards"] > 1,
        lambda event: (
            f"the reentrant checkpoint{_at(event.get('line'))} ran the sharded {event['module']} "
            f"{event['forwards']} times before one backward recomputed it: FSDP's hooks ran in a nested "
            "backward per recompute"
        ),
        lambda event: (event.get("line"),),
    )


# sharded_param_outside_forward (FSDP019) ----------------------------------------------------------


@evidence_kind(
    "sharded_param_outside_forward",
    "a parameter FSDP2 held sharded (no forward hook had all-gathered it) was an operand beside plain tensors",
)
def detect_sharded_param_outside_forward(run: RunRecord) -> list[Evidence]:
    """DTensor refused an operator that mixed plain tensors with the local shard of an FSDP2
    parameter whose group was sharded and not in its forward: code outside every hooked forward (a
    custom method such as ``generate``, a loss reading ``lm_head.weight``) computed with the sharded
    parameter (FSDP019). A DTensor of the code's own, or a group its forward had all-gathered, is
    no evidence."""
    return _grouped_evidence(
        run,
        "sharded_param_outside_forward",
        events.SHARDED_OPERAND,
        lambda event: event["params"] > 0 and event["sharded"] > 0 and not event.get("in_forward"),
        lambda event: (
            f"{event['op']}{_at(event.get('line'))} got {', '.join(event['names'])} of {event['module']} "
            f"as a sharded DTensor beside plain tensors: its fully_shard group was sharded, outside any "
            f"forward hook"
        ),
        lambda event: (event.get("line"),),
    )
