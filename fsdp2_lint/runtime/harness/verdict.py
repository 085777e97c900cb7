"""Judging a fixture's run by what was observed, against its rule's declared signature (torch-free)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.record import RunRecord
from fsdp2_lint.runtime.evidence.registry import Evidence, describe_expected, matches, observe
from fsdp2_lint.runtime.harness.fixtures import Fixture


class Verdict(enum.Enum):
    CONFIRMED = "confirmed"  # bad fixture: the declared failure was observed
    NOT_CONFIRMED = "NOT confirmed"  # bad fixture: it was not (other failures do not count)
    CLEAN = "clean"  # good fixture: every rank finished, no evidence of any kind
    UNEXPECTED = "unexpected failure"  # good fixture: it failed or showed evidence
    NOT_RUNNABLE = "not runnable here"  # the failure needs GPUs or ranks this run does not have
    # bad fixture: its rule's failure happens on other torch versions than the one installed (not run)
    NOT_REPRODUCIBLE = "not reproducible on this torch"

    @property
    def outcome(self) -> str:
        """ "passed" (confirmed, clean), "failed" (NOT confirmed, unexpected failure) or "skipped" (not
        run here: like a skipped test it does not fail the run, and it is never counted as a pass)."""
        if self in (Verdict.CONFIRMED, Verdict.CLEAN):
            return PASSED
        if self in (Verdict.NOT_CONFIRMED, Verdict.UNEXPECTED):
            return FAILED
        return SKIPPED

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED


PASSED, SKIPPED, FAILED = "passed", "skipped", "failed"
OUTCOMES = (PASSED, SKIPPED, FAILED)


@dataclass(frozen=True)
class FixtureResult:
    fixture: Fixture
    verdict: Verdict
    evidence: tuple[Evidence, ...] = ()
    seconds: float = 0.0
    note: str = ""
    log_tail: str = ""  # stderr of a failing rank, for fixtures that did not pass

    @property
    def expected(self) -> str:
        return describe_expected(self.fixture.signature) if self.fixture.bad else "trains cleanly"

    def matching(self, evidence: Evidence) -> bool:
        return self.fixture.bad and matches(evidence, self.fixture.signature)


def judge(fixture: Fixture, run: RunRecord) -> FixtureResult:
    observed = tuple(observe(run))
    if fixture.bad:
        confirmed = any(matches(evidence, fixture.signature) for evidence in observed)
        verdict = Verdict.CONFIRMED if confirmed else Verdict.NOT_CONFIRMED
        note = "" if confirmed or observed else _unfinished_note(run) or "ran to completion without the failure"
        too_few = too_few_ranks(fixture.signature, run.world_size)
        if too_few and not confirmed:
            verdict, note = Verdict.NOT_RUNNABLE, too_few
    else:
        verdict = Verdict.CLEAN if run.completed() and not observed else Verdict.UNEXPECTED
        note = "" if verdict is Verdict.CLEAN else _unfinished_note(run)
    probe_errors = sorted({f"{event['probe']}: {event['message']}" for _, event in run.of_kind(events.PROBE_ERROR)})
    if probe_errors:  # the run may hold evidence a failing probe could not record
        note = "; ".join(filter(None, [note, "probe errors: " + "; ".join(probe_errors)]))
    log_tail = _failing_log_tail(run) if verdict.failed else ""
    return FixtureResult(fixture, verdict, observed, run.seconds, note, log_tail)


def too_few_ranks(signature: RuntimeSignature, world_size: int) -> str:
    """Why a run of ``world_size`` ranks cannot show the failure, or "" when it can."""
    if world_size >= signature.min_ranks:
        return ""
    return f"its failure needs {signature.min_ranks} ranks; {world_size} ran"


def not_runnable(fixture: Fixture, reason: str) -> FixtureResult:
    return FixtureResult(fixture, Verdict.NOT_RUNNABLE, note=reason)


def not_reproducible(fixture: Fixture, reason: str) -> FixtureResult:
    return FixtureResult(fixture, Verdict.NOT_REPRODUCIBLE, note=reason)


def _unfinished_note(run: RunRecord) -> str:
    unfinished = [rank for rank in run.ranks if run.final_event(rank) is None]
    return f"ranks {unfinished} did not finish" if unfinished else ""


def _failing_log_tail(run: RunRecord) -> str:
    return run.log_tail((run.failed_ranks() or [0])[0])
