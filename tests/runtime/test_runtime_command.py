"""`fsdp2-lint confirm` end to end: the CPU confirmation of every rule with fixtures, the JSON and
text reports, the per-launch (torchrun) launcher, and how the command fails without torch or GPUs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from runtime_helpers import line_of, script_source

from fsdp2_lint.rule import RuntimeSignature, all_rules
from fsdp2_lint.runtime.evidence.record import RunSpec
from fsdp2_lint.runtime.evidence.registry import EVIDENCE_KINDS, observe
from fsdp2_lint.runtime.harness.fixtures import Fixture, fixtures_root
from fsdp2_lint.runtime.harness.report import RunSettings, as_json, print_table
from fsdp2_lint.runtime.harness.verdict import FixtureResult, Verdict
from fsdp2_lint.runtime.launch.torchrun import TorchrunLauncher

CLI = [sys.executable, "-m", "fsdp2_lint.cli"]


def confirm(*args: str, cwd: Path | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    """``fsdp2-lint confirm ARGS``. The time limit only stops a run that hangs: the whole fixture
    suite takes minutes, many more on a loaded machine with the CUDA build of torch."""
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout)


# What each rule's fixtures show here, kept in the test rather than read from the rules' own signatures:
# a wrong `min_gpus` or `min_ranks` on a rule must not turn its fixtures into silent skips.
NEEDS_GPUS = {"FSDP011", "FSDP037", "FSDP043"}  # their failures only show on CUDA: not runnable on CPU
NEEDS_TWO_RANKS = {"FSDP002", "FSDP004", "FSDP007", "FSDP010", "FSDP012", "FSDP015", "FSDP016"}


def test_the_tables_name_rules_that_exist():
    codes = {rule.code for rule in all_rules()}
    assert NEEDS_GPUS <= codes and NEEDS_TWO_RANKS <= codes


def test_every_bad_fixture_is_confirmed_and_every_good_one_is_clean_on_cpu():
    result = confirm("--device", "cpu", "--output-format", "json")
    report = json.loads(result.stdout)
    assert (report["device"], report["backend"], report["nproc"]) == ("cpu", "gloo", 2)
    rules = {rule.code: rule for rule in all_rules()}
    on_disk = {(p.parent.name, p.stem) for p in fixtures_root().glob("FSDP*/*_*.py") if p.parent.name in rules}
    projects = {(p.parent.parent.name, p.parent.name) for p in fixtures_root().glob("FSDP*/*_*/ENTRY")}
    assert on_disk and projects, "no fixtures to confirm"
    on_disk |= projects
    assert {(r["rule"], r["fixture"]) for r in report["results"]} == on_disk

    def expected(r: dict) -> str:
        if r["rule"] in NEEDS_GPUS:
            return "not runnable here"
        return "clean" if r["kind"] == "good" else "confirmed"

    # a fixture that should run here and was skipped fails this as much as one that failed
    failures = [
        f"{r['rule']}/{r['fixture']}: {r['verdict']} ({[e['summary'] for e in r['evidence']]} {r['note']})"
        for r in report["results"]
        if r["verdict"] != expected(r)
    ]
    assert failures == [], "\n".join(failures) + "\n" + result.stderr[-3000:]
    for r in report["results"]:
        if r["verdict"] == "confirmed":
            assert any(e["matches_signature"] for e in r["evidence"])
        elif r["verdict"] == "clean":
            assert r["evidence"] == []
    assert {rule.signature.evidence for rule in all_rules()} <= set(EVIDENCE_KINDS)
    assert [f"{r['rule']}/{r['fixture']}: {r['note']}" for r in report["results"] if "probe errors" in r["note"]] == []
    skipped = [r for r in report["results"] if r["rule"] in NEEDS_GPUS]
    assert skipped and {(r["outcome"], r["passed"]) for r in skipped} == {("skipped", False)}
    assert report["outcomes"] == {"passed": len(report["results"]) - len(skipped), "skipped": len(skipped), "failed": 0}
    assert report["ok"] is True
    assert result.returncode == 0


def test_on_one_rank_only_failures_that_need_a_second_rank_go_unshown_and_each_such_claim_is_needed():
    report = json.loads(confirm("--device", "cpu", "--nproc", "1", "--output-format", "json").stdout)

    def expected(r: dict) -> str:
        if r["rule"] in NEEDS_GPUS or (r["kind"] == "bad" and r["rule"] in NEEDS_TWO_RANKS):
            return "not runnable here"
        return "clean" if r["kind"] == "good" else "confirmed"

    # every rule that needs two ranks has a fixture that shows nothing on one, and no other rule's does
    failures = [
        f"{r['rule']}/{r['fixture']}: {r['verdict']} {r['note']}"
        for r in report["results"]
        if r["verdict"] != expected(r) and not (r["rule"] in NEEDS_TWO_RANKS and r["verdict"] == "confirmed")
    ]
    assert failures == []
    unshown = {r["rule"] for r in report["results"] if r["kind"] == "bad" and r["verdict"] == "not runnable here"}
    assert unshown - NEEDS_GPUS == NEEDS_TWO_RANKS
    assert report["ok"] is True


def test_text_table_shows_device_rows_verdicts_and_summary():
    signature = RuntimeSignature("exception", ("AttributeError",), "no_sync")
    fixture = Fixture("FSDP005", Path("/f/FSDP005/bad_no_sync.py"), signature)
    good = Fixture("FSDP005", Path("/f/FSDP005/good_flag.py"), signature)
    results = [FixtureResult(fixture, Verdict.NOT_CONFIRMED, note="ran to completion without the failure"),
               FixtureResult(good, Verdict.CLEAN, seconds=0.4)]  # fmt: skip
    console = Console(record=True, width=200)
    print_table(
        console, RunSettings("cpu", "gloo", 2, "pool", 1, 30.0, "2.13.0+cpu"), results, ["FSDP006 has no fixtures"], 3.0
    )
    text = console.export_text()
    assert "device cpu (gloo), 2 ranks per run, launcher pool (jobs 1), timeout 30s" in text
    assert "bad_no_sync" in text and "NOT confirmed" in text and "ran to completion without the failure" in text
    assert "AttributeError matching /no_sync/" in text
    assert "good_flag" in text and "clean" in text and "trains cleanly" in text
    assert "note: FSDP006 has no fixtures" in text
    assert "2 fixtures: 1 NOT confirmed, 1 clean — FAILED (1 passed, 1 failed)" in text


def test_a_fixture_not_runnable_here_is_counted_as_skipped_neither_passed_nor_failed():
    signature = RuntimeSignature("exception", ("RuntimeError",), min_gpus=2)
    gpu_only = Fixture("FSDP011", Path("/f/FSDP011/bad_no_set_device.py"), signature)
    good = Fixture("FSDP011", Path("/f/FSDP011/good_set_device.py"), signature)
    results = [FixtureResult(gpu_only, Verdict.NOT_RUNNABLE, note="needs 2 GPUs; running on CPU"),
               FixtureResult(good, Verdict.CLEAN)]  # fmt: skip
    settings = RunSettings("cpu", "gloo", 2, "pool", 1, 30.0, "2.13.0+cpu")
    console = Console(record=True, width=200)
    print_table(console, settings, results, [], 1.0)
    assert "2 fixtures: 1 clean, 1 not runnable here — OK (1 passed, 1 skipped)" in console.export_text()
    document = json.loads(as_json(settings, results, [], 1.0))
    assert document["outcomes"] == {"passed": 1, "skipped": 1, "failed": 0} and document["ok"] is True
    assert [(r["outcome"], r["passed"]) for r in document["results"]] == [("skipped", False), ("passed", True)]
    assert (Verdict.NOT_RUNNABLE.passed, Verdict.NOT_RUNNABLE.failed) == (False, False)
    assert (Verdict.NOT_REPRODUCIBLE.passed, Verdict.NOT_REPRODUCIBLE.failed) == (False, False)


def test_without_torch_confirm_says_how_to_install_it_and_exits_2():
    block_torch = "import sys; sys.modules['torch'] = None; from fsdp2_lint.cli import main; main()"
    result = subprocess.run([sys.executable, "-c", block_torch, "confirm"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip install 'fsdp2-lint[runtime]'" in result.stderr


def test_cuda_without_gpus_exits_2():
    result = confirm("--device", "cuda", "--rule", "FSDP001")
    assert result.returncode == 2
    assert "--device cuda needs one GPU per rank: 2 ranks, 0 GPU(s) visible" in result.stderr


def test_cuda_without_gpus_refuses_before_running_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w').close()\n")
    result = confirm("--device", "cuda", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "--device cuda needs one GPU per rank" in result.stderr
    assert not (tmp_path / "ran").exists()


DEADLOCK = """
buffer = torch.zeros(1)
dist.recv(buffer, src=1 - rank)  # <recv>
"""
FORWARD_CALLED_DIRECTLY = """
model = nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 4))
fully_shard(model[1])
fully_shard(model)  # the root's own group holds the embedding
model.forward(torch.arange(4))  # <forward>
"""


def test_torchrun_launcher_reports_hangs_with_stacks_and_exceptions(tmp_path):
    specs = []
    for name, body, timeout in (("deadlock", DEADLOCK, 25.0), ("forward", FORWARD_CALLED_DIRECTLY, 60.0)):
        script = tmp_path / f"{name}.py"
        script.write_text(script_source(body))
        specs.append(RunSpec(script=script, run_dir=tmp_path / name, timeout=timeout))
    with TorchrunLauncher(nproc=2, device_request="cpu", jobs=2) as launcher:
        hang, failure = launcher.run_all(specs)

    recv_line = line_of(script_source(DEADLOCK), "# <recv>")
    assert hang.timed_out == (0, 1)
    [evidence] = observe(hang)
    assert evidence.kind == "hang" and evidence.lines == (recv_line,)
    assert evidence.summary.count(f"stuck at line {recv_line} in recv") == 2

    [evidence] = observe(failure)
    assert evidence.kind == "exception" and evidence.ranks == (0, 1)
    assert "mixed torch.Tensor and DTensor" in evidence.message
    assert line_of(script_source(FORWARD_CALLED_DIRECTLY), "# <forward>") in evidence.lines
    assert failure.device.describe() == "cpu (gloo)"
