"""Reports of confirmation runs (torch-free): the console they print to, a rich table of the fixture
results or the same as JSON, and the JSON of one piece of evidence."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsdp2_lint.runtime.evidence.registry import Evidence
from fsdp2_lint.runtime.harness.verdict import OUTCOMES, FixtureResult, Verdict

WIDE_TABLE_COLUMNS = 120  # the six-column table from this width, else a three-column one
VERDICT_STYLES = {
    Verdict.CONFIRMED: "green",
    Verdict.CLEAN: "green",
    Verdict.NOT_CONFIRMED: "bold red",
    Verdict.UNEXPECTED: "bold red",
    Verdict.NOT_RUNNABLE: "yellow",
    Verdict.NOT_REPRODUCIBLE: "yellow",
}


def report_console() -> Console:
    """Tables are wide: give them 160 columns when not writing to a terminal (CI logs) unless
    COLUMNS says otherwise."""
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
    return Console(file=sys.stdout, width=width, highlight=False, emoji=False)


@dataclass(frozen=True)
class RunSettings:
    device: str
    backend: str
    nproc: int
    launcher: str
    jobs: int
    timeout: float
    torch: str  # the installed torch's version, which the ranks run

    def describe(self) -> str:
        return (
            f"torch {self.torch}, device {self.device} ({self.backend}), {self.nproc} ranks per run, "
            f"launcher {self.launcher} (jobs {self.jobs}), timeout {self.timeout:g}s"
        )


def passed(results: Sequence[FixtureResult]) -> bool:
    """Whether the run succeeds: no fixture failed (skipped ones do not fail it, nor count as passes)."""
    return not any(result.verdict.failed for result in results)


def outcome_counts(results: Sequence[FixtureResult]) -> dict[str, int]:
    counts = Counter(result.verdict.outcome for result in results)
    return {outcome: counts[outcome] for outcome in OUTCOMES}


def summary_line(results: Sequence[FixtureResult]) -> str:
    counts = Counter(result.verdict for result in results)
    parts = [f"{counts[verdict]} {verdict.value}" for verdict in Verdict if counts[verdict]]
    status = "OK" if passed(results) else "FAILED"
    outcomes = ", ".join(f"{count} {outcome}" for outcome, count in outcome_counts(results).items() if count)
    return f"{len(results)} fixtures: {', '.join(parts) or 'none run'} — {status}" + (
        f" ({outcomes})" if outcomes else ""
    )


def _observed(result: FixtureResult) -> str:
    ordered = sorted(result.evidence, key=lambda evidence: not result.matching(evidence))
    lines = [f"[{evidence.kind}] {evidence.summary}" for evidence in ordered]
    if result.note:
        lines.append(result.note)
    return "\n".join(lines) or "none"


def _table(results: Sequence[FixtureResult]) -> Table:
    table = Table(show_lines=True)
    table.add_column("Rule", no_wrap=True)
    table.add_column("Fixture", no_wrap=True)
    table.add_column("Expected failure", ratio=1)
    table.add_column("Observed evidence", ratio=2, overflow="fold")
    table.add_column("Verdict", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    for result in results:
        style = VERDICT_STYLES[result.verdict]
        table.add_row(
            result.fixture.rule,
            result.fixture.name,
            Text(result.expected),
            Text(_observed(result)),
            f"[{style}]{result.verdict.value}[/{style}]",
            f"{result.seconds:.1f}",
        )
    return table


def _narrow_table(results: Sequence[FixtureResult]) -> Table:
    """Below ``WIDE_TABLE_COLUMNS`` (a CI log at 80, a terminal split): three columns, the rule over
    the fixture, the verdict over the seconds, and what was expected over what was observed."""
    table = Table(show_lines=True)
    table.add_column("Fixture", overflow="fold", max_width=28)
    table.add_column("Verdict", overflow="fold", max_width=16)
    table.add_column("Expected / observed", overflow="fold")
    for result in results:
        style = VERDICT_STYLES[result.verdict]
        details = Text("expected: ", style="bold")
        details.append(result.expected)
        details.append("\nobserved: ", style="bold")
        details.append(_observed(result))
        table.add_row(
            f"{result.fixture.rule}\n{result.fixture.name}",
            Text.assemble((result.verdict.value, style), f"\n{result.seconds:.1f}s"),
            details,
        )
    return table


def print_table(
    console: Console, settings: RunSettings, results: Sequence[FixtureResult], notes: Sequence[str], wall: float
) -> None:
    console.print(f"[bold]fsdp2-lint confirm[/bold]: {settings.describe()}")
    table = _table(results) if console.width >= WIDE_TABLE_COLUMNS else _narrow_table(results)
    console.print(table)
    for result in results:
        if result.verdict.failed and result.log_tail:
            console.rule(f"{result.fixture.rule}/{result.fixture.name}: stderr (last lines)")
            console.print(result.log_tail, markup=False, highlight=False)
    for note in notes:
        console.print(f"note: {note}")
    if any(result.verdict is Verdict.NOT_RUNNABLE for result in results):
        console.print(
            "note: fixtures marked 'not runnable here' need more GPUs or ranks than this run has; they do not fail it"
        )
    if any(result.verdict is Verdict.NOT_REPRODUCIBLE for result in results):
        console.print(
            "note: fixtures marked 'not reproducible on this torch' belong to rules whose failure happens on other "
            "torch versions (`fsdp2-lint rule CODE`); they were not run and do not fail it"
        )
    console.print(f"{summary_line(results)} in {wall:.1f}s")


def as_json(settings: RunSettings, results: Sequence[FixtureResult], notes: Sequence[str], wall: float) -> str:
    counts = Counter(result.verdict.value for result in results)
    document: dict[str, Any] = {
        "torch": settings.torch,
        "device": settings.device,
        "backend": settings.backend,
        "nproc": settings.nproc,
        "launcher": settings.launcher,
        "jobs": settings.jobs,
        "timeout": settings.timeout,
        "results": [_result_json(result) for result in results],
        "summary": {verdict.value: counts[verdict.value] for verdict in Verdict},
        "outcomes": outcome_counts(results),
        "notes": list(notes),
        "ok": passed(results),
        "wall_seconds": round(wall, 2),
    }
    return json.dumps(document, indent=2)


def _result_json(result: FixtureResult) -> dict[str, Any]:
    return {
        "rule": result.fixture.rule,
        "fixture": result.fixture.name,
        "path": str(result.fixture.path),
        "kind": "bad" if result.fixture.bad else "good",
        "expected": result.expected,
        "verdict": result.verdict.value,
        "outcome": result.verdict.outcome,
        "passed": result.verdict.passed,
        "seconds": round(result.seconds, 2),
        "evidence": [evidence_json(evidence, result.matching(evidence)) for evidence in result.evidence],
        "note": result.note,
    }


def evidence_json(evidence: Evidence, matches_signature: bool) -> dict[str, Any]:
    return {
        "kind": evidence.kind,
        "summary": evidence.summary,
        "ranks": list(evidence.ranks),
        "lines": list(evidence.lines),
        "matches_signature": matches_signature,
    }
