"""`fsdp2-lint check --fix / --unsafe-fixes / --diff / --show-fixes` as users drive them (Ruff's
conventions), and how files are written: atomically, permissions kept, never over a file that
changed on disk meanwhile, never when the file does not parse."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from fix_samples import FIXABLE, FIXABLE_SAFE_FIXED
from samples import write

from fsdp2_lint import pipeline
from fsdp2_lint.cli import main

ALL_FIXED = textwrap.dedent(
    """\
    import torch
    from torch.distributed.fsdp import fully_shard

    model = Net()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters())
    opt.step()
    out = model(x)  # logits
    """
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, ["check", "--isolated", *args], input=stdin)


def test_text_output_marks_fixable_diagnostics_and_counts_hidden_unsafe_fixes(project):
    write(project / "train.py", FIXABLE)
    result = check("--output-format", "concise", "train.py")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("train.py:5:7: FSDP001 optimizer built")  # unsafe: not applicable by default
    assert lines[1].startswith("train.py:10:7: FSDP003 [*] `model.forward(...)`")
    assert lines[2:] == [
        "Found 2 problems (2 errors).",
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    unsafe = check("--output-format", "concise", "--unsafe-fixes", "train.py").stdout.splitlines()
    assert (
        unsafe[0].startswith("train.py:5:7: FSDP001 [*] optimizer")
        and unsafe[-1] == "[*] 2 fixable with the `--fix` option."
    )


def test_json_carries_each_fix_with_its_applicability_and_edits(project):
    write(project / "train.py", FIXABLE)
    optimizer, forward = json.loads(check("--output-format", "json", "train.py").stdout)
    assert (
        optimizer["fix"]["applicability"] == "unsafe"
        and "after the last `fully_shard`" in optimizer["fix"]["description"]
    )
    assert forward["fix"] == {
        "description": "call the module instead of `.forward`",
        "applicability": "safe",
        "edits": [{"line": 10, "column": 1, "end_line": 11, "end_column": 1, "content": "out = model(x)  # logits\n"}],
    }


def test_fix_applies_safe_fixes_and_reports_what_remains(project):
    path = write(project / "train.py", FIXABLE)
    result = check("--fix", "train.py")
    assert path.read_text() == FIXABLE_SAFE_FIXED
    assert result.exit_code == 1  # FSDP001 remains
    assert result.stdout.startswith("train.py:5:7: FSDP001")
    assert result.stdout.splitlines()[-2:] == [
        "Found 2 problems (1 fixed, 1 remaining).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    again = check("--fix", "--unsafe-fixes", "--show-fixes", "train.py")
    assert path.read_text() == ALL_FIXED
    assert again.exit_code == 0
    assert again.stdout.splitlines() == [
        "Found 1 problem (1 fixed, 0 remaining).",
        "Fixed 1 problem:",
        "- train.py:",
        "    1 × FSDP001 (optimizer-before-shard)",
    ]
    assert check("--fix", "train.py").exit_code == 0


def test_diff_prints_what_fix_would_change_writes_nothing_and_exits_1(project):
    path = write(project / "train.py", FIXABLE)
    result = check("--diff", "train.py")
    assert result.exit_code == 1 and path.read_text() == FIXABLE
    assert result.stdout == (
        "--- train.py\n+++ train.py\n@@ -7,4 +7,4 @@\n     fully_shard(block)\n fully_shard(model)\n"
        " opt.step()\n-out = model.forward(x)  # logits\n+out = model(x)  # logits\n"
    )
    assert result.stderr == "Would fix 1 problem.\n"
    shown = check("--diff", "--unsafe-fixes", "--show-fixes", "train.py")
    assert "+opt = torch.optim.AdamW(model.parameters())" in shown.stdout
    assert shown.stderr.splitlines() == [
        "Would fix 2 problems:",
        "- train.py:",
        "    1 × FSDP001 (optimizer-before-shard)",
        "    1 × FSDP003 (direct-forward-call)",
    ]
    write(project / "clean.py", ALL_FIXED)
    clean = check("--diff", "clean.py")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "", "No fixes to apply.\n")
    assert check("--diff", "--exit-zero", "train.py").exit_code == 0


def test_diff_marks_a_last_line_without_newline(project):
    write(project / "train.py", FIXABLE.rstrip("\n"))
    assert check("--diff", "train.py").stdout.endswith(
        "-out = model.forward(x)  # logits\n\\ No newline at end of file\n+out = model(x)  # logits\n\\ No newline at end of file\n"
    )


def test_fix_with_stdin_prints_the_fixed_source_and_the_rest_on_stderr(project):
    result = check("--fix", "--stdin-filename", "train.py", stdin=FIXABLE)
    assert result.stdout == FIXABLE_SAFE_FIXED
    assert result.exit_code == 1 and "train.py:5:7: FSDP001" in result.stderr
    assert "Found 2 problems (1 fixed, 1 remaining)." in result.stderr
    assert not (project / "train.py").exists()
    clean = check("--fix", "--unsafe-fixes", "-", stdin=FIXABLE)
    assert (clean.exit_code, clean.stdout) == (0, ALL_FIXED)
    diff = check("--diff", "--stdin-filename", "train.py", stdin=FIXABLE)
    assert diff.exit_code == 1 and diff.stdout.startswith("--- train.py\n+++ train.py\n")


def test_fix_with_stdin_keeps_bytes_exactly(project):
    source = "\ufeff" + FIXABLE.replace("\n", "\r\n")
    result = subprocess.run(
        [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--fix", "--stdin-filename", "train.py"],
        input=source.encode(), capture_output=True, cwd=project,
    )  # fmt: skip
    assert result.stdout == ("\ufeff" + FIXABLE_SAFE_FIXED.replace("\n", "\r\n")).encode()


def test_statistics_after_fix_count_what_remains(project):
    write(project / "train.py", FIXABLE)
    result = check("--fix", "--statistics", "train.py")
    assert result.stdout.splitlines() == [
        "1\tFSDP001\toptimizer-before-shard",
        "Found 2 problems (1 fixed, 1 remaining).",
    ]


def test_writes_keep_permissions_follow_symlinks_and_leave_no_temporary_files(project):
    path = write(project / "real" / "train.py", FIXABLE)
    path.chmod(0o640)
    link = project / "train.py"
    link.symlink_to(path)
    assert check("--fix", "train.py").exit_code == 1
    assert link.is_symlink() and path.read_text() == FIXABLE_SAFE_FIXED
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in (project / "real").iterdir()) == ["train.py"]


def test_a_file_changed_on_disk_while_fixing_is_not_overwritten(project, monkeypatch):
    path = write(project / "train.py", FIXABLE)
    edited = FIXABLE + "print('saved by the editor meanwhile')\n"
    real_fix = pipeline._fix_guarded

    def edit_meanwhile(*args, **kwargs):
        result = real_fix(*args, **kwargs)
        path.write_text(edited)
        return result

    monkeypatch.setattr(pipeline, "_fix_guarded", edit_meanwhile)
    result = check("--fix", "train.py")
    assert path.read_text() == edited
    assert result.exit_code == 1
    assert "error: train.py: the file changed on disk while it was being fixed; it was left as it is" in result.stderr
    assert "Found 2 problems (2 errors)." in result.stdout  # what was read: nothing fixed
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


@pytest.mark.parametrize(
    "edited",
    [FIXABLE + "print('saved by the editor meanwhile')\n", FIXABLE[: FIXABLE.rindex("\n", 0, -1) + 1]],
    ids=["line-added", "last-line-removed"],
)
def test_a_file_changed_on_disk_while_its_fixed_text_is_written_is_not_overwritten(project, monkeypatch, edited):
    path = write(project / "train.py", FIXABLE)
    real_fsync = os.fsync

    def save_meanwhile(descriptor):  # the fixed text is in the temporary file, not yet renamed
        real_fsync(descriptor)
        path.write_text(edited)

    monkeypatch.setattr(os, "fsync", save_meanwhile)
    result = check("--fix", "train.py")
    assert path.read_text() == edited
    assert "error: train.py: the file changed on disk while it was being fixed; it was left as it is" in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_a_failed_write_leaves_the_file_and_no_temporary_file(project, monkeypatch):
    path = write(project / "train.py", FIXABLE)

    def no_rename(source, destination):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", no_rename)
    result = check("--fix", "train.py")
    assert path.read_text() == FIXABLE and result.exit_code == 1
    assert "error: train.py: cannot write the fixed file: Permission denied" in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_a_file_that_does_not_parse_is_not_modified(project):
    broken = FIXABLE + "def broken(:\n"
    path = write(project / "train.py", broken)
    before = path.stat().st_mtime_ns
    result = check("--fix", "--unsafe-fixes", "--output-format", "concise", "train.py")
    assert path.read_text() == broken and path.stat().st_mtime_ns == before
    assert result.exit_code == 1 and "FSDP000 syntax error" in result.stdout


def test_fix_honours_the_configured_selection_and_per_file_ignores(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nper-file-ignores = { "legacy/*" = ["FSDP003"] }\n')
    legacy = write(project / "legacy" / "train.py", FIXABLE)
    current = write(project / "train.py", FIXABLE)
    CliRunner().invoke(main, ["check", "--fix", "."])
    assert legacy.read_text() == FIXABLE and current.read_text() == FIXABLE_SAFE_FIXED
    write(project / "other.py", FIXABLE)
    CliRunner().invoke(main, ["check", "--fix", "--ignore", "FSDP003", "other.py"])
    assert (project / "other.py").read_text() == FIXABLE


def test_exit_zero_after_fix(project):
    write(project / "train.py", FIXABLE)
    assert check("--fix", "--exit-zero", "train.py").exit_code == 0
