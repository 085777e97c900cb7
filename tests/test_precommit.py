"""The pre-commit hook as users run it: the real `pre-commit` installs this repository's hook from
a `.pre-commit-config.yaml` (README's snippet, pointed at a committed copy of this checkout) into
its own environment and runs it over a git repository holding training scripts.

(`pre-commit try-repo` does the same with a throwaway store, so it would install the hook's
environment, half a minute on CI, for each of the two runs; a config with a store kept in
PRE_COMMIT_HOME installs it once.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from fixture_marks import ROOT
from test_cli import BAD, GOOD

CONFIG = """\
repos:
  - repo: {repo}
    rev: {rev}
    hooks:
      - id: fsdp2-lint
"""
GIT_IDENTITY = ["-c", "user.name=fsdp2-lint tests", "-c", "user.email=tests@fsdp2-lint.invalid", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def committed_copy_of_this_checkout(destination: Path) -> Path:
    """This checkout's files (tracked, and untracked but not ignored) committed in a new
    repository: `try-repo` installs a repository's committed HEAD, and work in progress is not
    committed yet. On a clean CI clone the copy equals HEAD."""
    listed = git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is left out
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git(destination, "init", "--quiet")
    git(destination, "add", "--all")
    git(destination, "commit", "--quiet", "--message", "snapshot")
    return destination


def test_hook_fails_on_the_bad_file_with_its_diagnostic_and_passes_on_good_ones(tmp_path):
    hooks_repo = committed_copy_of_this_checkout(tmp_path / "fsdp2-lint")
    project = tmp_path / "project"
    (project / "generated").mkdir(parents=True)
    (project / "bad.py").write_text(BAD)
    (project / "good.py").write_text(GOOD)
    (project / "generated" / "bad.py").write_text(BAD)  # excluded by the configuration below
    (project / "pyproject.toml").write_text('[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    revision = git(hooks_repo, "rev-parse", "HEAD").strip()
    (project / ".pre-commit-config.yaml").write_text(CONFIG.format(repo=hooks_repo, rev=revision))
    git(project, "init", "--quiet")
    git(project, "add", "--all")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    command = [sys.executable, "-m", "pre_commit", "run", "fsdp2-lint", "--all-files"]

    failed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "fsdp2-lint" in failed.stdout and "Failed" in failed.stdout
    assert "bad.py:5:7: FSDP001 optimizer built from parameters of `model`" in failed.stdout
    assert "generated/bad.py" not in failed.stdout and "Found 1 problem (1 error)." in failed.stdout

    git(project, "rm", "--quiet", "--cached", "bad.py")
    passed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout

    hook_packages = list((tmp_path / "pre-commit-home").glob("repo*/py_env-*/lib/python*/site-packages"))
    assert hook_packages and not any((packages / "torch").exists() for packages in hook_packages)


FIXABLE = GOOD + "out = model.forward(x)  # direct call: skips FSDP's hooks\n"


def test_fix_hook_rewrites_the_file_and_fails_then_passes(tmp_path):
    """`pre-commit try-repo` as a user tries the fix hook: the first run applies the safe fix and
    fails (pre-commit fails a hook that modifies files), the second finds nothing left and passes."""
    hooks_repo = committed_copy_of_this_checkout(tmp_path / "fsdp2-lint")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(FIXABLE)
    (project / "good.py").write_text(GOOD)
    git(project, "init", "--quiet")
    git(project, "add", "--all")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(hooks_repo), "fsdp2-lint-fix", "--all-files"]

    fixed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    assert "Failed" in fixed.stdout and "files were modified by this hook" in fixed.stdout
    assert "Found 1 problem (1 fixed, 0 remaining)." in fixed.stdout
    assert (project / "train.py").read_text() == GOOD + "out = model(x)  # direct call: skips FSDP's hooks\n"
    assert (project / "good.py").read_text() == GOOD

    passed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
