"""``fsdp2-lint confirm path/to/train.py``: the static findings for a script next to what a run of
it showed (torch-free; the run is one torchrun launch with probes and line tracing). For a project
(``confirm -m pkg.train``, ``confirm path/to/project`` with an ``ENTRY``), the findings in all its
files next to what the run of its entry showed in any of them."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsdp2_lint.diagnostics import Diagnostic
from fsdp2_lint.discovery import discover
from fsdp2_lint.engine import lint_file
from fsdp2_lint.pipeline import LintTask, lint_files
from fsdp2_lint.rule import Rule
from fsdp2_lint.runtime.evidence.device import can_reproduce
from fsdp2_lint.runtime.evidence.events import EXCEPTION
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec
from fsdp2_lint.runtime.evidence.registry import Evidence, matches, observe
from fsdp2_lint.runtime.evidence.scope import split_line
from fsdp2_lint.runtime.harness.progress import ScriptHeartbeat
from fsdp2_lint.runtime.harness.project import Entry
from fsdp2_lint.runtime.harness.report import evidence_json, report_console
from fsdp2_lint.runtime.harness.verdict import too_few_ranks
from fsdp2_lint.runtime.launch.factory import make_launcher
from fsdp2_lint.runtime.launch.launcher import HarnessError
from fsdp2_lint.torch_version import TorchVersion, installed_torch, installed_torch_version

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"  # the run went through the line without the rule's failure
# no rank got past the line: none executed it, or it raised the failure of another static finding
NOT_REACHED = "not reached"
NOT_RUNNABLE = "not runnable here"
NOT_REPRODUCIBLE = "not reproducible on this torch"  # the rule's failure happens on other torch versions

# What a script that hard-codes CUDA or NCCL raises where the run has neither (torch 2.13: the CPU
# build, and the CUDA build on a machine without a GPU driver).
_CUDA_ONLY_ERRORS = (
    "Torch not compiled with CUDA enabled",
    "no attribute '_cuda_setDevice'",
    "Distributed package doesn't have NCCL built in",
    "ProcessGroupNCCL is only supported with GPUs",
    "Found no NVIDIA driver on your system",
    "No CUDA GPUs are available",
    "Cannot access accelerator device",
)
DEVICE_HINT = (
    "the script expects CUDA/NCCL, which this run does not have (device {device}): read the device the "
    'harness chose from FSDP2_LINT_DEVICE, e.g. `device = os.environ.get("FSDP2_LINT_DEVICE", "cuda")`, '
    '`backend = "nccl" if device == "cuda" else "gloo"`, and place tensors and the model on `device`'
)


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


@dataclass(frozen=True)
class _Finding:
    diagnostic: Diagnostic
    rule: type[Rule]
    span: range
    reached: bool
    file: str | None = None  # in a project: its file, relative to the project (see evidence.scope)

    def distance(self, evidence: Evidence) -> float:
        """0 when the evidence involves a line of the finding, else the gap to its nearest line
        (lines of other files are no nearer than no line)."""
        lines = [number for file, number in map(split_line, evidence.lines) if file == self.file]
        if not lines:
            return math.inf
        return min(0 if line in self.span else min(abs(line - self.span.start), abs(line - self.span[-1]))
                   for line in lines)  # fmt: skip

    def explains(self, evidence: Evidence) -> bool:
        """The rule declares this evidence, and the run went through the finding or the evidence involves it."""
        return matches(evidence, self.rule.signature) and (self.reached or self.distance(evidence) == 0)


def compare(
    diagnostics: Sequence[Diagnostic],
    run: RunRecord,
    rules: Sequence[type[Rule]],
    files: dict[str, str] | None = None,
    torch: TorchVersion | None = None,
) -> tuple[list[StaticFinding], list[RuntimeOnly]]:
    """A failure often shows away from the line a finding points at (the first forward of a model
    built on meta in a helper; the step of an optimizer built too early), so evidence of the kind a
    rule declares confirms a finding of that rule: one on whose lines it is, else the nearest one
    the run went through that no evidence is on. (Evidence away from a finding that has its own is
    another occurrence of the failure, which the static pass missed.) In a project run, ``files``
    maps each diagnostic's path to its file relative to the project, as the run names them. A
    finding of a rule whose failure happens on other versions than ``torch`` (the one that ran) is
    never confirmed: it is not reproducible on this torch."""
    by_code = {rule.code: rule for rule in rules}
    reached = {split_line(line) for line in run.reached_lines}
    findings = []
    for d in diagnostics:
        if d.code not in by_code:
            continue  # FSDP000 (an unreadable file)
        file = files.get(d.path) if files is not None else None
        span = range(d.line, d.end_line + 1)
        findings.append(_Finding(d, by_code[d.code], span, any((file, line) in reached for line in span), file))
    observed = observe(run)
    confirming: dict[int, list[Evidence]] = defaultdict(list)  # finding index -> its evidence
    away = []
    for evidence in observed:
        on_it = [
            i for i, finding in enumerate(findings) if finding.explains(evidence) and not finding.distance(evidence)
        ]
        for i in on_it:
            confirming[i].append(evidence)
        if not on_it:
            away.append(evidence)
    evidence_on = set(confirming)
    runtime_only = []
    for evidence in away:
        candidates = [i for i, finding in enumerate(findings) if finding.explains(evidence) and i not in evidence_on]
        if not candidates:
            rules_matched = tuple(rule.code for rule in rules if matches(evidence, rule.signature))
            runtime_only.append(RuntimeOnly(evidence, rules_matched))
            continue
        nearest = min(findings[i].distance(evidence) for i in candidates)
        for i in candidates:
            if findings[i].distance(evidence) == nearest:
                confirming[i].append(evidence)
    static = []
    for i, finding in enumerate(findings):
        if finding.rule.reproducible_on().excludes(torch):
            static.append(StaticFinding(finding.diagnostic, NOT_REPRODUCIBLE))
        elif confirming[i]:
            best = min(confirming[i], key=finding.distance)
            static.append(StaticFinding(finding.diagnostic, CONFIRMED, best))
        else:
            static.append(StaticFinding(finding.diagnostic, _unconfirmed_status(finding, run, confirming)))
    return static, runtime_only


def _unconfirmed_status(finding: _Finding, run: RunRecord, confirming: dict[int, list[Evidence]]) -> str:
    signature = finding.rule.signature
    if not can_reproduce(signature.min_gpus, run.device, run.world_size, run.world_size):
        return NOT_RUNNABLE  # on CUDA every rank had its own GPU, so at least world_size were visible
    if too_few_ranks(signature, run.world_size):
        return NOT_RUNNABLE
    raised_here = any(
        evidence.kind == "exception" and finding.distance(evidence) == 0
        for evidence_list in confirming.values()
        for evidence in evidence_list
    )
    if raised_here:
        return NOT_REACHED  # its statement raised another finding's failure: it never completed
    return NOT_CONFIRMED if finding.reached else NOT_REACHED


def run_script_check(
    script: Path,
    script_args: Sequence[str],
    rules: Sequence[type[Rule]],
    device_request: str,
    nproc: int,
    timeout: float,
    run_root: Path,
    output_format: str,
    entry: Entry | None = None,
) -> int:
    """Run ``script`` (or the project ``entry``, whose ``script`` it is) and set its evidence next
    to the static findings."""
    files = None
    if entry is None:
        diagnostics = lint_file(script, rules, display_path=os.path.relpath(script))
    else:
        diagnostics, files = _lint_project(entry.project, rules)
    spec = RunSpec(
        script=script,
        run_dir=run_root / "run",
        timeout=timeout,
        argv=tuple(script_args),
        cwd=entry.project if entry else Path.cwd(),  # a script runs where the user runs it, a project in its directory
        trace_lines=True,
        module=entry.module if entry else None,
        import_root=entry.import_root if entry else None,
        project=entry.project if entry else None,
    )
    name = entry.module if entry and entry.module else os.path.relpath(script)
    with make_launcher("torchrun", nproc, device_request, run_root) as launcher, ScriptHeartbeat(name):
        (run,) = launcher.run_all([spec])
    errors = run.harness_errors()
    if errors:
        raise HarnessError("; ".join(sorted(set(errors))))
    static, runtime_only = compare(diagnostics, run, rules, files, installed_torch_version())
    failed = any(item.status == CONFIRMED for item in static) or bool(runtime_only) or not run.completed()
    torch = installed_torch() or "unknown"
    report = Confirmation(script, run, static, runtime_only, failed, entry, torch, device_hint(run))
    if output_format == "json":
        print(json.dumps(_as_json(report), indent=2))
    else:
        _print(report_console(), report)
    return 1 if failed else 0


@dataclass(frozen=True)
class Confirmation:
    """What one confirmation run found, for either report format."""

    script: Path
    run: RunRecord
    static: list[StaticFinding]
    runtime_only: list[RuntimeOnly]
    failed: bool
    entry: Entry | None
    torch: str  # the installed torch's version, which the ranks ran
    hint: str | None = None  # how to make the script runnable here, when it clearly is not


def device_hint(run: RunRecord) -> str | None:
    """Advice when the script stopped because it hard-codes CUDA or NCCL and the run has neither."""
    if run.device.kind == "cuda":
        return None
    for rank in run.ranks:
        final = run.final_event(rank) or {}
        message = str(final.get("message", ""))
        if final.get("kind") == EXCEPTION and any(error in message for error in _CUDA_ONLY_ERRORS):
            return DEVICE_HINT.format(device=run.device.describe())
    return None


def _lint_project(project: Path, rules: Sequence[type[Rule]]) -> tuple[list[Diagnostic], dict[str, str]]:
    """The diagnostics of every Python file of the project, as ``check PROJECT`` would find them
    (no configuration: ``--rule`` selects), and each one's path relative to the project."""
    paths = [path for path in discover([project], lambda path, is_dir: False) if isinstance(path, Path)]
    paths = [path for path in paths if path.suffix == ".py"]
    displays = [os.path.relpath(path) for path in paths]
    tasks = [LintTask(path, display, tuple(rules)) for path, display in zip(paths, displays, strict=True)]
    diagnostics = [d for found in lint_files(tasks, jobs=1) for d in found]
    files = {
        display: path.resolve().relative_to(project).as_posix() for path, display in zip(paths, displays, strict=True)
    }
    return diagnostics, files


def _outcome(run: RunRecord) -> str:
    if run.timed_out:
        return f"timed out on ranks {list(run.timed_out)}"
    if run.completed():
        return "completed on every rank"
    return f"did not complete on ranks {sorted(run.failed_ranks())}"


def _print(console: Console, report: Confirmation) -> None:
    run, entry = report.run, report.entry
    what = f"{entry.describe()} (project {os.path.relpath(entry.project)})" if entry else report.script
    console.print(
        f"[bold]fsdp2-lint confirm[/bold] {what}: torch {report.torch}, device {run.device.describe()}, "
        f"{run.world_size} ranks, {run.seconds:.1f}s — the run {_outcome(run)}"
    )
    table = Table(title="Static findings and what the run showed", title_justify="left", show_lines=True)
    for column in ("Line", "Rule", "Static finding", "Runtime", "Evidence"):
        table.add_column(column, overflow="fold")
    for item in report.static:
        d = item.diagnostic
        evidence = f"[{item.evidence.kind}] {item.evidence.summary}" if item.evidence else ""
        style = "red" if item.status == CONFIRMED else "yellow"
        line = f"{d.path}:{d.line}" if entry else str(d.line)
        table.add_row(line, d.code, Text(d.message), Text(item.status, style=style), Text(evidence))
    if report.static:
        console.print(table)
    else:
        console.print("No static findings.")
    if report.runtime_only:
        title = "Failures the run showed that the static pass did not report"
        missed = Table(title=title, title_justify="left", show_lines=True)
        for column in ("Lines", "Kind", "Matches rule", "Evidence"):
            missed.add_column(column, overflow="fold")
        for item in report.runtime_only:
            lines = ", ".join(map(str, item.evidence.lines)) or "-"
            missed.add_row(lines, item.evidence.kind, ", ".join(item.rules) or "(no rule)", Text(item.evidence.summary))
        console.print(missed)
    else:
        console.print("The run showed no failure beyond the static findings.")
    if not run.completed():
        rank = (run.failed_ranks() or [0])[0]
        console.rule(f"rank {rank} stderr (last lines)")
        console.print(run.log_tail(rank), markup=False, highlight=False)
    if report.hint:
        console.print(Text(f"hint: {report.hint}", style="yellow"))
    console.print("FAILED" if report.failed else "OK")


def _as_json(report: Confirmation) -> dict[str, Any]:
    run, entry = report.run, report.entry
    project = {"project": str(entry.project), "module": entry.module} if entry else {}
    return {
        "script": str(report.script),
        **project,
        "torch": report.torch,
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
            for item in report.static
        ],
        "runtime_only": [
            {**evidence_json(item.evidence, bool(item.rules)), "rules": list(item.rules)}
            for item in report.runtime_only
        ],
        "hint": report.hint,
        "ok": not report.failed,
    }
