"""Fixes proven at runtime, not only statically: every bad fixture that fixing (unsafe fixes
included) leaves without diagnostics is written, fixed, to a temporary directory, and all of them
run at once under the confirmation harness (2 ranks, CPU/gloo). Each must now train cleanly:
every rank finishes and the run shows no failure evidence of any kind.

One exception, observed rather than assumed: a script fixed to offload with `CPUOffloadPolicy`
(which FSDP1's ignored `CPUOffload` never did) pins host memory, and pinning needs an accelerator;
on a host without one its run must fail exactly there, which shows the offloading is now active."""

from __future__ import annotations

import torch
from fixture_marks import fixture_files

from fsdp2_lint.engine import fix_source
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.evidence.record import RunSpec
from fsdp2_lint.runtime.harness.fixtures import Fixture
from fsdp2_lint.runtime.harness.verdict import Verdict, judge
from fsdp2_lint.runtime.launch.launcher import default_jobs
from fsdp2_lint.runtime.launch.pool import RankPool

SIGNATURES = {rule.code: rule.signature for rule in all_rules()}


def test_every_fully_fixed_bad_fixture_trains_cleanly(tmp_path):
    fixed: dict[RunSpec, Fixture] = {}
    for path in fixture_files():
        if not path.name.startswith("bad_"):
            continue
        result = fix_source(path.read_bytes(), str(path), unsafe=True)
        if result.fixed and not result.remaining:
            script = tmp_path / "scripts" / path.parent.name / f"good_fixed_{path.stem.removeprefix('bad_')}.py"
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_bytes(result.source)
            spec = RunSpec(script=script, run_dir=tmp_path / "runs" / path.parent.name / path.stem, timeout=120.0)
            fixed[spec] = Fixture(path.parent.name, script, SIGNATURES[path.parent.name])
    fixed_rules = {fixture.rule for fixture in fixed.values()}
    assert {
        "FSDP001",
        "FSDP002",
        "FSDP003",
        "FSDP005",
        "FSDP011",
        "FSDP015",
        "FSDP018",
        "FSDP019",
        "FSDP025",
        "FSDP029",
        "FSDP030",
    } <= fixed_rules

    with RankPool(2, "cpu", tmp_path / "pool", jobs=default_jobs(2, "cpu")) as pool:
        results = [judge(fixed[record.spec], record) for record in pool.run_all(list(fixed))]

    failures = [
        f"{r.fixture.rule}/{r.fixture.name}: {r.verdict.value} {[e.summary for e in r.evidence]} {r.note}\n{r.log_tail}"
        for r in results
        if r.verdict is not Verdict.CLEAN and not _offloads_without_accelerator(r)
    ]
    assert len(results) == len(fixed) and failures == [], "\n".join(failures)


# What pinning memory raises on a host with no accelerator: torch's CPU build, and its CUDA build
# on a machine without a GPU driver (what the default index serves on most Pythons).
NO_ACCELERATOR = ("Cannot access accelerator device", "Found no NVIDIA driver on your system")


def _offloads_without_accelerator(result) -> bool:
    """The run of a script that offloads to pinned memory on a host with no accelerator: it must
    stop at the pinning, on every rank, and nowhere else."""
    if torch.accelerator.is_available() or "CPUOffloadPolicy(" not in result.fixture.path.read_text():
        return False
    return bool(result.evidence) and all(
        e.kind == "exception" and any(reason in e.summary for reason in NO_ACCELERATOR) and e.ranks == (0, 1)
        for e in result.evidence
    )
