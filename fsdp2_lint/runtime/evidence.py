"""Evidence: what a run showed, derived from the ranks' events alone (torch-free).

An evidence kind is a name, a detector over a :class:`RunRecord` and, where a rule's signature
says more than the kind (an exception type and message), a matcher. Adding a kind is one
``@evidence_kind`` function here plus the probe that records its events.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime import events
from fsdp2_lint.runtime.record import Event, RunRecord

MAX_SUMMARY_MESSAGE = 120


@dataclass(frozen=True)
class Evidence:
    kind: str
    summary: str
    ranks: tuple[int, ...]
    lines: tuple[int, ...] = ()  # lines of the user's script this evidence points at
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
    """Every piece of evidence the run shows, of every kind."""
    return [evidence for kind in EVIDENCE_KINDS.values() for evidence in kind.detect(run)]


def matches(evidence: Evidence, signature: RuntimeSignature) -> bool:
    kind = EVIDENCE_KINDS.get(signature.evidence)
    return kind is not None and kind.matches(evidence, signature)


def describe_expected(signature: RuntimeSignature) -> str:
    kind = EVIDENCE_KINDS.get(signature.evidence)
    if kind is None:
        return f"{signature.evidence} (no such evidence kind in this harness)"
    return kind.describe(signature)


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_SUMMARY_MESSAGE else text[: MAX_SUMMARY_MESSAGE - 1] + "…"


def _ranks(ranks) -> str:
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ",".join(map(str, ranks))


def _at(line: int | None) -> str:
    return f" at line {line}" if line is not None else ""


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
    run: RunRecord, kind: str, holds: Callable[[Event], bool], describe: Callable[[list[Event]], str]
) -> list[Evidence]:
    """One item per optimizer (merged across ranks) whose every probed step ``holds``."""
    grouped: dict[tuple[str, tuple[int, ...]], list[int]] = defaultdict(list)
    for (rank, _), steps in _steps_by_optimizer(run).items():
        if all(holds(step) for step in steps):
            last = steps[-1]
            lines = tuple(line for line in (last["optimizer_line"], last.get("line")) if line is not None)
            grouped[(describe(steps), lines)].append(rank)
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
    """The optimizer holds the pre-shard tensors (no DTensor) and no parameter of the sharded model
    changes at any probed step (FSDP001)."""
    return _step_evidence(
        run,
        "params_unchanged",
        lambda step: _sharded(step) and step["optimizer_dtensor"] == 0 and step["changed"] == 0,
        lambda steps: f"{_optimizer(steps)} holds no DTensor; {_after(steps)} "
        f"0 of {steps[-1]['model_params']} parameters changed",
    )


@evidence_kind("partial_update", "some parameters never change: the optimizer holds plain tensors for them")
def detect_partial_update(run: RunRecord) -> list[Evidence]:
    """Some parameters change at every probed step, the others never do, and the optimizer does not
    hold those: it holds plain tensors captured instead (FSDP008: the root after a forward)."""

    def holds(step: Event) -> bool:
        partial = 0 < step["changed"] < step["compared"] and step["optimizer_dtensor"] < step["optimizer_params"]
        return partial and set(step["unchanged"]) <= set(step["not_held"])

    def describe(steps: list[Event]) -> str:
        last = steps[-1]
        plain = last["optimizer_params"] - last["optimizer_dtensor"]
        return (
            f"{_optimizer(steps)} holds {plain} plain tensor(s); {_after(steps)} {last['changed']} of "
            f"{last['compared']} parameters changed, never: {', '.join(last['unchanged'])}"
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
    """At every probed step some trainable sharded parameters held by the optimizer have no gradient
    and do not change (FSDP014: gradient sync switched off and never back on)."""

    def holds(step: Event) -> bool:
        missing = set(step["no_grad"])
        held = not missing & set(step["not_held"])
        return _sharded(step) and bool(missing) and missing <= set(step["unchanged"]) and held

    def describe(steps: list[Event]) -> str:
        last = steps[-1]
        return (
            f"{_after(steps)} of {_optimizer(steps)}: {last['grads_missing']} of {last['model_params']} sharded "
            f"parameters had no gradient and did not change ({', '.join(last['no_grad'])})"
        )

    return _step_evidence(run, "grads_not_reduced", holds, describe)


# not_materialized ---------------------------------------------------------------------------------


def _not_materialized_matches(evidence: Evidence, signature: RuntimeSignature) -> bool:
    """Parameters to_empty() left uninitialised, or (never materialised at all) the exception the
    signature names: FSDP refuses meta parameters at the first forward."""
    if evidence.kind == "exception":
        return bool(signature.exception or signature.message) and _exception_matches(evidence, signature)
    return evidence.kind == "not_materialized"


def _describe_not_materialized(signature: RuntimeSignature) -> str:
    uninitialised = "parameters left uninitialised by to_empty()"
    if signature.exception or signature.message:
        return f"{uninitialised}, or {_describe_exception(signature)}"
    return uninitialised


@evidence_kind("not_materialized", _describe_not_materialized, _not_materialized_matches)
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
    """A module sharded with no sharded submodule while several of its modules own parameters: its
    one group holds them all, so each forward all-gathers the whole of it (FSDP034)."""
    grouped: dict[tuple, list[int]] = defaultdict(list)
    for rank, event in run.of_kind(events.FULLY_SHARD):
        if event["nested"] == 0 and event["owners"] >= 2:
            grouped[(event["module"], event.get("line"), event["params"], event["owners"])].append(rank)
    return [
        Evidence(
            kind="single_param_group",
            summary=f"fully_shard({module}){_at(line)}: one parameter group holds all {params} parameters of "
            f"{owners} modules; no submodule has a group of its own ({_ranks(ranks)})",
            ranks=tuple(ranks),
            lines=(line,) if line is not None else (),
        )
        for (module, line, params, owners), ranks in grouped.items()
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
    if kind == events.OPTIMIZER:
        return f"{event['optimizer']}(...){line}"
    if kind == events.SAVE:
        return f"torch.save{line}"
    return kind


@evidence_kind("hang", lambda signature: "hang (no progress until the timeout)")
def detect_hang(run: RunRecord) -> list[Evidence]:
    """Ranks still running when the timeout expired, with the last event each reached and the line
    its stack dump was in."""
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
            summary=f"timed out after {run.spec.timeout:g}s: " + "; ".join(parts),
            ranks=run.timed_out,
            lines=tuple(dict.fromkeys(lines)),
        )
    ]


# crash --------------------------------------------------------------------------------------------


@evidence_kind("crash", "the process dies or exits non-zero without a Python exception")
def detect_crash(run: RunRecord) -> list[Evidence]:
    """Ranks that ended without finishing the script and without a Python exception: killed by a
    signal, ``os._exit``, ``sys.exit(non-zero)``. Ranks the launcher stopped are not crashes."""
    found = []
    for rank in run.ranks:
        if rank in run.timed_out or rank in run.stopped:
            continue
        final = run.final_event(rank)
        if final is not None and final["kind"] == events.EXCEPTION:
            continue
        if final is not None and final["code"] != 0:
            summary = f"rank {rank} exited with code {final['code']}"
        elif final is None:
            returncode = run.returncodes.get(rank)
            how = f" (exit status {returncode})" if returncode is not None else ""
            last = describe_event(run.last_event(rank))
            summary = f"rank {rank} ended without finishing the script{how}; last: {last}"
        else:
            continue
        found.append(Evidence(kind="crash", summary=summary, ranks=(rank,)))
    return found
