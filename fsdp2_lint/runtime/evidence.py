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
        EVIDENCE_KINDS[name] = EvidenceKind(name, detect, matches or (lambda evidence, signature: True), describe)
        return detect

    return register


def observe(run: RunRecord) -> list[Evidence]:
    """Every piece of evidence the run shows, of every kind."""
    return [evidence for kind in EVIDENCE_KINDS.values() for evidence in kind.detect(run)]


def matches(evidence: Evidence, signature: RuntimeSignature) -> bool:
    kind = EVIDENCE_KINDS.get(signature.evidence)
    return kind is not None and evidence.kind == kind.name and kind.matches(evidence, signature)


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


# params_unchanged ---------------------------------------------------------------------------------


def _silent_step(event: Event) -> bool:
    """The model's parameters are DTensors, the optimizer's are not, and none of them changed."""
    return (
        event["model_params"] > 0
        and event["model_dtensor"] == event["model_params"]
        and event["optimizer_dtensor"] == 0
        and event["compared"] > 0
        and event["changed"] == 0
    )


@evidence_kind("params_unchanged", "optimizer steps leave all (sharded) parameters unchanged")
def detect_params_unchanged(run: RunRecord) -> list[Evidence]:
    """An optimizer whose every probed step left the sharded model's parameters unchanged because
    it holds the pre-shard (non-DTensor) tensors."""
    per_optimizer: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for rank, event in run.of_kind(events.STEP):
        per_optimizer[(rank, event["optimizer_id"])].append(event)
    grouped: dict[tuple, list[int]] = defaultdict(list)
    for (rank, _), steps in per_optimizer.items():
        if all(_silent_step(step) for step in steps):
            last = steps[-1]
            key = (last["optimizer"], last["optimizer_line"], last.get("line"), last["model_params"], len(steps))
            grouped[key].append(rank)
    found = []
    for (optimizer, optimizer_line, step_line, model_params, steps), ranks in grouped.items():
        found.append(
            Evidence(
                kind="params_unchanged",
                summary=(
                    f"{optimizer}{' built' + _at(optimizer_line) if optimizer_line else ''} holds no DTensor; "
                    f"after {steps} step(s){_at(step_line)} 0 of {model_params} parameters changed ({_ranks(ranks)})"
                ),
                ranks=tuple(ranks),
                lines=tuple(line for line in (optimizer_line, step_line) if line is not None),
            )
        )
    return found


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
