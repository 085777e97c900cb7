"""Projects under `fsdp2-lint confirm`: fixture projects (a directory with an ENTRY) found next to
the one-file fixtures and run through the real harness, `confirm -m pkg.mod` and `confirm DIR` on
a user's project, the ENTRY format, and how lines of a project's files are named."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixture_marks import FIXTURES, project_marks
from runtime_helpers import START, line_of, synthetic_record

from fsdp2_lint.diagnostics import Diagnostic, Severity
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.evidence.record import RunSpec, parse_stack
from fsdp2_lint.runtime.evidence.registry import EVIDENCE_KINDS, matches
from fsdp2_lint.runtime.evidence.scope import HARNESS, SourceScope, parse_line, split_line
from fsdp2_lint.runtime.harness.confirm_fixtures import confirm_fixtures
from fsdp2_lint.runtime.harness.confirm_script import CONFIRMED, NOT_CONFIRMED, compare
from fsdp2_lint.runtime.harness.fixtures import discover
from fsdp2_lint.runtime.harness.project import ProjectError, find_module_file, read_entry
from fsdp2_lint.runtime.harness.selection import select_rules
from fsdp2_lint.runtime.harness.verdict import Verdict
from fsdp2_lint.runtime.launch.launcher import HarnessError

RULES = {rule.code: rule for rule in all_rules()}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def confirm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


# ENTRY ------------------------------------------------------------------------------------------


def test_entry_runs_a_module_from_the_project_or_its_import_root_or_a_script(tmp_path):
    write(tmp_path / "pkg", {"ENTRY": "# how to run it\n-m app.train\n", "app/__init__.py": "", "app/train.py": ""})
    entry = read_entry(tmp_path / "pkg")
    project = (tmp_path / "pkg").resolve()
    assert (entry.module, entry.import_root, entry.script) == ("app.train", project, project / "app/train.py")
    assert entry.describe() == "-m app.train"

    write(tmp_path / "src", {"ENTRY": "-m app\n\npath = src\n", "src/app/__main__.py": ""})
    entry = read_entry(tmp_path / "src")
    assert (entry.import_root, entry.script.name) == ((tmp_path / "src/src").resolve(), "__main__.py")

    write(tmp_path / "flat", {"ENTRY": "train.py", "train.py": "", "helpers.py": ""})
    entry = read_entry(tmp_path / "flat")
    assert (entry.module, entry.import_root, entry.script.name, entry.describe()) == (
        None,
        None,
        "train.py",
        "train.py",
    )


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("", "empty"),
        ("-m app.train\nroot = src\n", "unknown line 'root = src'"),
        ("train.py\npath = src\n", "applies to `-m package.module` entries only"),
        ("-m app.nothing\n", "no module 'app.nothing' under"),
        ("-m app-train\n", "'app-train' is not a module name"),
        ("../outside.py\n", "is outside the project"),
        ("-m app.train\npath = missing\n", "'missing' is not a directory of the project"),
        ("notes.txt\n", "'notes.txt' is not a Python script of the project"),
    ],
)
def test_a_wrong_entry_says_what_is_wrong(tmp_path, entry, error):
    write(tmp_path, {"p/ENTRY": entry, "p/app/train.py": "", "p/notes.txt": "", "outside.py": ""})
    with pytest.raises(ProjectError, match=re.escape(error)):
        read_entry(tmp_path / "p")


def test_the_entry_module_is_found_on_disk_importing_nothing(tmp_path):
    write(tmp_path, {"a/b.py": "raise SystemExit('imported')", "c/__main__.py": "", "c/__init__.py": ""})
    assert find_module_file("a.b", [tmp_path / "missing", tmp_path]) == tmp_path / "a/b.py"
    assert find_module_file("c", [tmp_path]) == tmp_path / "c/__main__.py"
    assert find_module_file("a.c", [tmp_path]) is None


# lines of a project ------------------------------------------------------------------------------


def test_lines_are_numbers_in_a_script_and_file_and_number_in_a_project(tmp_path):
    script = SourceScope.of(tmp_path / "train.py")
    assert script.name(str((tmp_path / "train.py").resolve()), 7) == 7
    assert script.name(str((tmp_path / "helpers.py").resolve()), 7) is None

    root = tmp_path.resolve()
    project = SourceScope.of(tmp_path / "pkg/train.py", tmp_path)
    assert project.name(f"{root}/pkg/train.py", 7) == "pkg/train.py:7"
    assert project.name(f"{root}/pkg/sub/helpers.py", 3) == "pkg/sub/helpers.py:3"
    for outside in (f"{root}/.venv/lib/python3.11/site-packages/torch/nn/functional.py",
                    f"{root}/build/lib/site-packages/x.py", "/usr/lib/python3.11/runpy.py", "<string>",
                    f"{HARNESS}rank/script.py"):  # fmt: skip
        assert project.name(outside, 1) is None and not project.contains(outside)
    assert [parse_line(text) for text in ("12", "pkg/a.py:12", "a b.py:3", "junk", ":4", "a.py:")] == [
        12, "pkg/a.py:12", "a b.py:3", None, None, None,
    ]  # fmt: skip
    assert split_line(12) == (None, 12) and split_line("pkg/a:b.py:12") == ("pkg/a:b.py", 12)


def test_a_stack_dump_names_the_projects_lines_in_every_file(tmp_path):
    root = tmp_path.resolve()
    dump = (
        "Current thread 0x00007f (most recent call first):\n"
        '  File "/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce\n'
        f'  File "{root}/trainer/utils.py", line 29 in log_loss\n'
        f'  File "{root}/trainer/train.py", line 26 in main\n'
        '  File "<frozen runpy>", line 88 in _run_code\n'
    )
    site = parse_stack(dump, SourceScope.of(root / "trainer/train.py", root))
    assert site.lines == ("trainer/utils.py:29", "trainer/train.py:26")
    assert site.innermost == "all_reduce (distributed_c10d.py:3252)"
    assert parse_stack(dump, str(root / "trainer/train.py")).lines == (26,)  # a script: its own lines only


def project_diagnostic(code: str, path: str, line: int) -> Diagnostic:
    return Diagnostic(code, "name", "message", "hint", Severity.ERROR, path, line, 1, line, 10, "")


def test_compare_matches_findings_and_evidence_file_by_file():
    error = {"kind": "exception", "types": ["AttributeError"], "message": "'M' object has no attribute 'no_sync'",
             "line": "trainer/engine.py:18", "script_lines": ["trainer/engine.py:18", "trainer/train.py:30"]}  # fmt: skip
    reached = frozenset({"trainer/engine.py:18", "trainer/train.py:12", "trainer/train.py:30"})
    run = synthetic_record({0: [START, error], 1: [START, error]}, reached_lines=reached)
    files = {"proj/trainer/engine.py": "trainer/engine.py", "proj/trainer/train.py": "trainer/train.py"}
    findings = [
        project_diagnostic("FSDP005", "proj/trainer/train.py", 18),  # line 18 of another file
        project_diagnostic("FSDP005", "proj/trainer/engine.py", 18),
    ]
    static, runtime_only = compare(findings, run, all_rules(), files)
    assert [(item.diagnostic.path, item.status) for item in static] == [
        ("proj/trainer/train.py", "not reached"),
        ("proj/trainer/engine.py", CONFIRMED),
    ]
    assert runtime_only == []
    # a finding of the rule that the run went through, the nearest to the evidence, is confirmed by it
    static, runtime_only = compare(
        [project_diagnostic("FSDP005", "proj/trainer/train.py", 12)], run, all_rules(), files
    )
    assert [item.status for item in static] == [CONFIRMED]
    static, runtime_only = compare(
        [project_diagnostic("FSDP004", "proj/trainer/train.py", 12)], run, all_rules(), files
    )
    assert [item.status for item in static] == [NOT_CONFIRMED]
    assert [item.evidence.lines for item in runtime_only] == [("trainer/engine.py:18", "trainer/train.py:30")]


def test_evidence_summaries_name_a_projects_lines_by_file():
    save = {"kind": "save", "target": "/out/ckpt.pt", "tensors": 4, "dtensors": 4, "line": "trainer/checkpoint.py:14"}
    [evidence] = EVIDENCE_KINDS["dtensor_save"].detect(synthetic_record({0: [START, save], 1: [START]}))
    assert evidence.summary == "torch.save at trainer/checkpoint.py:14 wrote 4 DTensors to ckpt.pt (rank 0)"
    assert evidence.lines == ("trainer/checkpoint.py:14",)


# fixture projects --------------------------------------------------------------------------------


def test_fixture_projects_are_found_next_to_the_scripts_of_their_rule(tmp_path):
    write(tmp_path, {
        "FSDP001/bad_a.py": "", "FSDP001/good_z.py": "",
        "FSDP001/bad_project/ENTRY": "-m pkg.train", "FSDP001/bad_project/pkg/train.py": "",
        "FSDP001/good_project/ENTRY": "train.py", "FSDP001/good_project/train.py": "",
        "FSDP001/good_notes/README.md": "",
    })  # fmt: skip
    fixtures, notes = discover(select_rules(("FSDP001",)), tmp_path)
    assert [(fixture.name, fixture.bad, fixture.entry is not None) for fixture in fixtures] == [
        ("bad_a", True, False),
        ("bad_project", True, True),
        ("good_project", False, True),
        ("good_z", False, False),
    ]
    assert notes == ["FSDP001/good_notes: a directory without ENTRY (not run)"]
    (tmp_path / "FSDP001/good_project/ENTRY").write_text("-m nowhere\n")
    with pytest.raises(HarnessError, match="fixture project .*good_project/ENTRY: no module 'nowhere'"):
        discover(select_rules(("FSDP001",)), tmp_path)


# A src-layout package run as a module, and a flat script project: each bad one must show its
# rule's failure on a line its marks name (in whichever file), each good one train cleanly.
PROJECTS = ("FSDP005/bad_src_engine_getattr_no_sync", "FSDP005/good_src_engine_gradient_sync",
            "FSDP024/bad_flat_worker_clip_grad_norm")  # fmt: skip


def test_fixture_projects_run_through_the_harness_and_show_their_failure_on_a_marked_line(tmp_path):
    root = tmp_path / "fixtures"
    for name in PROJECTS:
        shutil.copytree(FIXTURES / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    report = confirm_fixtures(select_rules(("FSDP005", "FSDP024")), "cpu", 2, 60.0, 2, "pool", tmp_path / "runs", root)
    verdicts = {f"{r.fixture.rule}/{r.fixture.name}": (r.verdict, r.note) for r in report.results}
    assert verdicts == {
        PROJECTS[0]: (Verdict.CONFIRMED, ""),
        PROJECTS[1]: (Verdict.CLEAN, ""),
        PROJECTS[2]: (Verdict.CONFIRMED, ""),
    }
    for result in report.results:
        if result.fixture.bad:
            marked = {f"{path}:{line}" for path, line, _ in project_marks(result.fixture.path)}
            matching = [evidence for evidence in result.evidence if matches(evidence, result.fixture.signature)]
            assert any(marked & set(evidence.lines) for evidence in matching), (result.fixture.name, matching)


# confirm -m MODULE and confirm DIR ---------------------------------------------------------------

# The misuse sits in one module (so the per-file analysis reports it there); the run starts in
# another, as `python -m pkg.train --steps 1`, and fails inside the first.
HELPERS = """
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


def run(steps):
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 4))
    fully_shard(model)
    tok = torch.randint(0, 8, (4,))
    for _ in range(steps):
        model.forward(tok).sum().backward()  # <forward>
    dist.destroy_process_group()
"""
MODULE_TRAIN = """
import sys

from .helpers import run

if __name__ == "__main__":
    if sys.argv[1:] != ["--steps", "1"] or not sys.argv[0].endswith("train.py"):
        sys.exit(f"argv as `python -m` does not set it: {sys.argv}")
    run(int(sys.argv[2]))  # <run>
"""


def test_confirm_dash_m_runs_the_module_of_the_current_project_and_attributes_across_its_files(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS, "pkg/train.py": MODULE_TRAIN})
    result = confirm(
        "--device", "cpu", "--output-format", "json", "-m", "pkg.train", "--", "--steps", "1", cwd=tmp_path
    )
    report = json.loads(result.stdout)
    assert (report["project"], report["module"]) == (str(tmp_path.resolve()), "pkg.train")
    forward = line_of(textwrap.dedent(HELPERS).lstrip("\n"), "# <forward>")
    [finding] = report["static"]
    assert (finding["code"], finding["path"], finding["line"], finding["status"]) == (
        "FSDP003", os.path.join("pkg", "helpers.py"), forward, "confirmed",
    )  # fmt: skip
    run = line_of(textwrap.dedent(MODULE_TRAIN).lstrip("\n"), "# <run>")
    assert f"pkg/helpers.py:{forward}" in finding["evidence"]["lines"]
    assert f"pkg/train.py:{run}" in finding["evidence"]["lines"]
    assert (report["runtime_only"], report["ok"], result.returncode) == ([], False, 1)


def test_confirm_a_project_directory_runs_its_entry_in_it(tmp_path):
    main = """
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard

    from app.data import batch

    dist.init_process_group("gloo")
    model = nn.Linear(4, 4)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(batch()).sum().backward()
    optimizer.step()
    dist.destroy_process_group()
    """
    data = """
    import torch

    def batch():
        with open("size.txt") as size:  # the project directory is the working directory
            return torch.ones(int(size.read()), 4)
    """
    project = write(tmp_path / "proj", {"ENTRY": "-m app.main\npath = src\n", "size.txt": "2",
                                        "src/app/__init__.py": "", "src/app/main.py": main, "src/app/data.py": data})  # fmt: skip
    result = confirm("--device", "cpu", "--output-format", "json", "proj", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert (report["project"], report["module"], report["completed"]) == (str(project.resolve()), "app.main", True)
    assert (report["static"], report["runtime_only"], report["ok"], result.returncode) == ([], [], True, 0)


def test_a_project_error_is_a_usage_error_and_scripts_keep_their_errors(tmp_path):
    result = confirm("-m", "nothing.here", cwd=tmp_path)
    assert result.returncode == 2
    assert f"Error: Invalid value for '-m': no module 'nothing.here' under {tmp_path.resolve()}" in result.stderr
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken/ENTRY").write_text("-m app\nroot = src\n")
    result = confirm("broken", cwd=tmp_path)
    assert result.returncode == 2 and "unknown line 'root = src'" in result.stderr
    (tmp_path / "plain").mkdir()
    result = confirm("plain", cwd=tmp_path)
    assert (
        result.returncode == 2 and "Error: Invalid value for '[SCRIPT]': File 'plain' is a directory." in result.stderr
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken", "plain"]  # nothing ran


def test_spec_of_a_project_names_lines_of_its_files(tmp_path):
    spec = RunSpec(script=tmp_path / "pkg/train.py", run_dir=tmp_path / "run", timeout=1.0, project=tmp_path)
    assert spec.scope() == SourceScope(str((tmp_path / "pkg/train.py").resolve()), str(tmp_path.resolve()))
