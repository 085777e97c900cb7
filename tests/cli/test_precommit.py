"""The pre-commit hooks as users try them: the real `pre-commit try-repo` (README's command, pointed
at a committed copy of this checkout) installs this repository's hook into its own environment and
runs it over a git repository holding training scripts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner
from fixture_marks import ROOT
from pre_commit.clientlib import load_manifest
from pre_commit.constants import VERSION as pre_commit_version
from samples import BAD, GOOD, write

from fsdp2_lint.cli import main

GIT_IDENTITY = [
    "-c",
    "user.name=fsdp2-lint tests",
    "-c",
    "user.email=tests@fsdp2-lint.invalid",
    "-c",
    "commit.gpgsign=false",
]


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


def test_hook_definition_is_valid_and_runs_the_linter_on_python_files():
    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}  # pre-commit's schema
    hook = hooks["fsdp2-lint"]
    assert hook["entry"].split()[:2] == ["fsdp2-lint", "check"] and "--fix" not in hook["entry"]
    assert "--with-importers" in hook["entry"].split()  # a staged helper is checked with its callers
    assert (hook["language"], hook["types_or"], hook["require_serial"]) == ("python", ["python", "pyi"], True)
    assert hook["additional_dependencies"] == []  # the linter alone: no torch
    minimum = tuple(int(part) for part in hook["minimum_pre_commit_version"].split("."))
    assert (2, 9) <= minimum <= tuple(int(part) for part in pre_commit_version.split(".")[:3])  # types_or: 2.9


def readme_try_repo(repository: Path) -> list[str]:
    """README's `pre-commit try-repo` command, for the hooks of ``repository``."""
    section = (ROOT / "README.md").read_text().split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"^pre-commit try-repo .+$", section, re.M)
    words = command.split("#", 1)[0].split()
    assert words[2] == "/path/to/fsdp2-lint"  # a clone of this repository: no release to name yet
    return [sys.executable, "-m", "pre_commit", *words[1:2], str(repository), *words[3:]]


def test_hook_fails_on_the_bad_file_with_its_diagnostic_and_passes_on_good_ones(tmp_path):
    hooks_repo = committed_copy_of_this_checkout(tmp_path / "fsdp2-lint")
    project = tmp_path / "project"
    (project / "generated").mkdir(parents=True)
    (project / "bad.py").write_text(BAD)
    (project / "good.py").write_text(GOOD)
    (project / "generated" / "bad.py").write_text(BAD)  # excluded by the configuration below
    (project / "pyproject.toml").write_text('[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    git(project, "init", "--quiet")
    git(project, "add", "--all")
    (tmp_path / "constraints.txt").write_text("torch<0\n")  # no torch can install: the hook must need none
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PRE_COMMIT_COLOR": "never",
        "PIP_CONSTRAINT": str(tmp_path / "constraints.txt"),
    }
    command = readme_try_repo(hooks_repo)

    failed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert re.search(r"^fsdp2-lint\.+Failed$", failed.stdout, re.M), failed.stdout
    assert "bad.py:5:7: FSDP001 optimizer built from parameters of `model`" in failed.stdout
    assert "generated/bad.py" not in failed.stdout and "Found 1 problem (1 error)." in failed.stdout

    git(project, "rm", "--quiet", "--cached", "bad.py")
    passed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"^fsdp2-lint\.+Passed$", passed.stdout, re.M), passed.stdout


FIXABLE = GOOD + "out = model.forward(x)  # direct call: skips FSDP's hooks\n"


def readme_fix_hook_config(repository: Path) -> str:
    """README's fix-hook configuration (under Fixes), for a clone at ``repository`` and its HEAD."""
    section = (ROOT / "README.md").read_text().split("\n## Fixes\n", 1)[1].split("\n## ", 1)[0]
    (snippet,) = re.findall(r"```yaml\n(repos:\n.+?)```", section, re.S)
    assert "/path/to/fsdp2-lint " in snippet and "rev: COMMIT " in snippet
    commit = git(repository, "rev-parse", "HEAD").strip()
    return snippet.replace("/path/to/fsdp2-lint ", f"{repository} ").replace("rev: COMMIT ", f"rev: {commit} ")


def test_fix_hook_rewrites_the_file_and_fails_then_passes(tmp_path):
    """README's fix-hook configuration as a user adopts it before a release (a clone's path and one
    of its commits), run by `pre-commit run`: the first run applies the safe fix and fails
    (pre-commit fails a hook that modifies files), the second finds nothing left and passes."""
    hooks_repo = committed_copy_of_this_checkout(tmp_path / "fsdp2-lint")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(FIXABLE)
    (project / "good.py").write_text(GOOD)
    (project / ".pre-commit-config.yaml").write_text(readme_fix_hook_config(hooks_repo))
    git(project, "init", "--quiet")
    git(project, "add", "--all")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files"]

    fixed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    assert "Failed" in fixed.stdout and "files were modified by this hook" in fixed.stdout
    assert "Found 1 problem (1 fixed, 0 remaining)." in fixed.stdout
    assert (project / "train.py").read_text() == GOOD + "out = model(x)  # direct call: skips FSDP's hooks\n"
    assert (project / "good.py").read_text() == GOOD

    passed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


# A project where the staged helpers' findings show only in their callers' analyses
PROJECT = {
    "trainer/__init__.py": "",
    "trainer/parallel.py": """
        from torch.distributed.fsdp import fully_shard


        def shard_model(model):
            for layer in model.layers:
                fully_shard(layer)
            fully_shard(model)
            return model
        """,
    "trainer/checkpoint.py": """
        import torch


        def save(model, path):
            torch.save(model.state_dict(), path)
        """,
    "trainer/sharding.py": """
        from trainer.parallel import shard_model


        def prepare(model):
            return shard_model(model)
        """,
    # loads on rank 0 only, then shards through sharding.py: FSDP010 here, related in parallel.py
    "trainer/train.py": """
        import torch
        import torch.distributed as dist

        from trainer.checkpoint import save
        from trainer.sharding import prepare


        def main(model):
            if dist.get_rank() == 0:
                model.load_state_dict(torch.load("pretrained.pt"))
            model = prepare(model)
            save(model, "ckpt.pt")
        """,
    # imports the helper, but its finding is its own (both locations here)
    "trainer/local.py": """
        import torch
        from torch.distributed.fsdp import fully_shard

        from trainer.parallel import shard_model


        def main(model):
            opt = torch.optim.AdamW(model.parameters())
            fully_shard(model)
            opt.step()
        """,
    "generated/train.py": "from trainer.parallel import shard_model\n",  # excluded: never analysed
}


def check_json(*args: str) -> tuple[int, list[tuple[str, int, str]]]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", *args])
    found = json.loads(result.stdout) if result.exit_code in (0, 1) else result.output
    return result.exit_code, [(d["path"], d["line"], d["code"]) for d in found]


def test_with_importers_a_staged_helper_is_checked_with_its_callers(tmp_path, monkeypatch):
    for name, text in PROJECT.items():
        write(tmp_path / name, textwrap.dedent(text).lstrip())
    write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    monkeypatch.chdir(tmp_path)

    assert check_json("trainer/parallel.py") == (0, [])  # plain `check FILE`: its own analysis only
    # reached through sharding.py, each related to the staged file's sharding; local.py's is its own
    shown = (1, [("trainer/train.py", 10, "FSDP010"), ("trainer/checkpoint.py", 5, "FSDP004")])
    assert check_json("--with-importers", "trainer/parallel.py") == shown
    assert check_json("trainer/checkpoint.py") == (0, [])
    # in the staged file, found by its caller's analysis (train.py shards what it saves)
    assert check_json("--with-importers", "trainer/checkpoint.py") == (1, [("trainer/checkpoint.py", 5, "FSDP004")])
    own = [("trainer/local.py", 8, "FSDP001"), ("trainer/local.py", 9, "FSDP034")]
    assert check_json("--with-importers", "trainer/local.py") == (1, own)  # a named file's own, as plain `check`
    assert check_json("--with-importers", "--no-follow-imports", "trainer/parallel.py") == (0, [])

    refused = CliRunner().invoke(main, ["check", "--with-importers", "--fix", "trainer/parallel.py"])
    assert refused.exit_code == 2 and "--with-importers checks files named on the command line" in refused.output
