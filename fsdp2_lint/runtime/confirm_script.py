"""``fsdp2-lint confirm path/to/train.py``: the static findings for a script next to what a run of
it showed (torch-free; the run is one torchrun launch with probes and line tracing)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsdp2_lint.engine import Diagnostic, lint_file
from fsdp2_lint.rule import Rule, all_rules
from fsdp2_lint.runtime.device import can_reproduce
from fsdp2_lint.runtime.evidence import Evidence, matches, observe
from fsdp2_lint.runtime.fixtures import UnknownRule
from fsdp2_lint.runtime.record import RunRecord, RunSpec
from fsdp2_lint.runtime.report import evidence_json
from fsdp2_lint.runtime.torchrun_launcher import TorchrunLauncher

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"  # the run went through the line without the rule's failure
NOT_REACHED = "not reached"  # no rank executed the line
NOT_RUNNABLE = "not runnable here"


@dataclass(frozen=True)
class StaticFinding:
    diagnostic: Diagnostic
    status: str
    evidence: Evidence | None = None


@dataclass(frozen=True)
class RuntimeOnly:
    """Evidence no static finding accounts for; ``rules`` are the rules whose signature it matches."""

    evidence: Evidence
    rules: tuple[str, ...]


def compare(
    diagnostics: Sequence[Diagnostic], run: RunRecord, rules: Sequence[type[Rule]]
) -> tuple[list[StaticFinding], list[RuntimeOnly]]:
    by_code = {rule.code: rule for rule in rules}
    observed = observe(run)
    used: set[int] = set()
    static = []
    for diagnostic in diagnostics:
        rule = by_code.get(diagnostic.code)
        if rule is None:
            continue  # not a rule (an unreadable file)
        span = set(range(diagnostic.line, diagnostic.end_line + 1))
        found = next(
            (i for i, e in enumerate(observed) if matches(e, rule.signature) and span & set(e.lines)), None
        )
        if found is not None:
            used.add(found)
            static.append(StaticFinding(diagnostic, CONFIRMED, observed[found]))
        elif not can_reproduce(rule.signature.min_gpus, run.device, run.world_size, run.world_size):
            # on CUDA every rank had its own GPU, so at least world_size were visible
            static.append(StaticFinding(diagnostic, NOT_RUNNABLE))
        elif span & run.reached_lines:
            static.append(StaticFinding(diagnostic, NOT_CONFIRMED))
        else:
            static.append(StaticFinding(diagnostic, NOT_REACHED))
    runtime_only = [
        RuntimeOnly(evidence, tuple(rule.code for rule in rules if matches(evidence, rule.signature)))
        for i, evidence in enumerate(observed)
        if i not in used
    ]
    return static, runtime_only


def run_script_check(
    script: Path,
    script_args: Sequence[str],
    codes: Sequence[str],
    device_request: str,
    nproc: int,
    timeout: float,
    run_root: Path,
    output_format: str,
) -> int:
    rules = _select(codes)
    diagnostics = lint_file(script, rules, display_path=os.path.relpath(script))
    spec = RunSpec(
        script=script,
        run_dir=run_root / "run",
        timeout=timeout,
        argv=tuple(script_args),
        cwd=Path.cwd(),  # the script runs where the user runs it
        trace_lines=True,
    )
    with TorchrunLauncher(nproc, device_request) as launcher:
        run = launcher.run(spec)
    errors = run.harness_errors()
    if errors:
        from fsdp2_lint.runtime.pool import HarnessError

        raise HarnessError("; ".join(sorted(set(errors))))
    static, runtime_only = compare(diagnostics, run, rules)
    failed = any(item.status == CONFIRMED for item in static) or bool(runtime_only) or not run.completed()
    if output_format == "json":
        print(json.dumps(_as_json(script, run, static, runtime_only, failed), indent=2))
    else:
        from fsdp2_lint.runtime.command import report_console

        _print(report_console(), script, run, static, runtime_only, failed)
    return 1 if failed else 0


def _select(codes: Sequence[str]) -> list[type[Rule]]:
    rules = list(all_rules())
    unknown = sorted(set(codes) - {rule.code for rule in rules})
    if unknown:
        raise UnknownRule(f"unknown rule(s): {', '.join(unknown)}")
    return [rule for rule in rules if not codes or rule.code in codes]


def _outcome(run: RunRecord) -> str:
    if run.timed_out:
        return f"timed out on ranks {list(run.timed_out)}"
    if run.completed():
        return "completed on every rank"
    failed = [rank for rank in run.ranks if run.ended_badly(rank) or run.final_event(rank) is None]
    return f"did not complete on ranks {failed}"


def _print(
    console: Console,
    script: Path,
    run: RunRecord,
    static: list[StaticFinding],
    runtime_only: list[RuntimeOnly],
    failed: bool,
) -> None:
    console.print(
        f"[bold]fsdp2-lint confirm[/bold] {script}: device {run.device.describe()}, {run.world_size} ranks, "
        f"{run.seconds:.1f}s — the run {_outcome(run)}"
    )
    table = Table(title="Static findings and what the run showed", title_justify="left", show_lines=True)
    for column in ("Line", "Rule", "Static finding", "Runtime", "Evidence"):
        table.add_column(column, overflow="fold")
    for item in static:
        d = item.diagnostic
        evidence = f"[{item.evidence.kind}] {item.evidence.summary}" if item.evidence else ""
        style = "red" if item.status == CONFIRMED else "yellow"
        table.add_row(str(d.line), d.code, Text(d.message), Text(item.status, style=style), Text(evidence))
    if static:
        console.print(table)
    else:
        console.print("No static findings.")
    if runtime_only:
        title = "Failures the run showed that the static pass did not report"
        missed = Table(title=title, title_justify="left", show_lines=True)
        for column in ("Lines", "Kind", "Matches rule", "Evidence"):
            missed.add_column(column, overflow="fold")
        for item in runtime_only:
            lines = ", ".join(map(str, item.evidence.lines)) or "-"
            missed.add_row(lines, item.evidence.kind, ", ".join(item.rules) or "(no rule)", Text(item.evidence.summary))
        console.print(missed)
    else:
        console.print("The run showed no failure beyond the static findings.")
    if not run.completed():
        rank = next((r for r in run.ranks if run.ended_badly(r) or run.final_event(r) is None), 0)
        console.rule(f"rank {rank} stderr (last lines)")
        console.print(run.log_tail(rank), markup=False, highlight=False)
    console.print("FAILED" if failed else "OK")


def _as_json(
    script: Path, run: RunRecord, static: list[StaticFinding], runtime_only: list[RuntimeOnly], failed: bool
) -> dict[str, Any]:
    return {
        "script": str(script),
        "device": run.device.kind,
        "backend": run.device.backend,
        "nproc": run.world_size,
        "seconds": round(run.seconds, 2),
        "completed": run.completed(),
        "timed_out_ranks": list(run.timed_out),
        "static": [
            {
                **{key: value for key, value in item.diagnostic.to_json().items() if key != "hint"},
                "status": item.status,
                "evidence": evidence_json(item.evidence, True) if item.evidence else None,
            }
            for item in static
        ],
        "runtime_only": [
            {**evidence_json(item.evidence, bool(item.rules)), "rules": list(item.rules)} for item in runtime_only
        ],
        "ok": not failed,
    }
