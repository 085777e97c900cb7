"""The reusable GitHub Action, action.yml: a composite action that installs the linter from its own
checkout and runs valid `fsdp2-lint check` commands, run here as a runner would run them, and the
workflow README gives for it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sysconfig

import yaml
from fixture_marks import ROOT
from samples import BAD
from sarif_schema import validation_errors

from fsdp2_lint.cli import check

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
README = (ROOT / "README.md").read_text()


def resolve(value: str, inputs: dict[str, str]) -> str:
    """``${{ inputs.NAME }}`` as the runner expands it; any other expression is not expected here."""
    resolved = re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda match: inputs[match.group(1)], value)
    assert "${{" not in resolved, value
    return resolved


def run_steps() -> list[dict]:
    return [step for step in ACTION["runs"]["steps"] if "run" in step]


def test_action_is_composite_sets_up_python_and_installs_from_its_own_checkout():
    assert ACTION["runs"]["using"] == "composite" and ACTION["name"] == "fsdp2-lint"
    setup = ACTION["runs"]["steps"][0]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    install, *checks = run_steps()
    assert install["run"] == 'python -m pip install --quiet "$GITHUB_ACTION_PATH"'  # no [runtime]: no torch
    assert all(step["shell"] == "bash" for step in run_steps())  # a composite action's run step needs one
    assert ACTION["outputs"]["sarif-file"]["value"] == "${{ inputs.sarif-file }}"
    defaults = {name: spec["default"] for name, spec in ACTION["inputs"].items()}
    assert defaults == {"args": ".", "sarif-file": "fsdp2-lint.sarif", "python-version": "3.12"}
    # each command is a valid `check` invocation, parsed as the CLI parses it
    for step in checks:
        program, command, *arguments = shlex.split(resolve(step["run"].replace("$ARGS", "."), defaults))
        assert (program, command) == ("fsdp2-lint", "check")
        arguments = arguments[: arguments.index(">")] if ">" in arguments else arguments
        options = check.make_context("check", arguments).params
        assert options["output_format"] in ("sarif", "github")


def test_action_steps_write_valid_sarif_and_fail_with_annotations_on_a_bad_script(tmp_path):
    """The check steps as the runner runs them (bash, their env with the inputs expanded), on a
    checkout holding a bad script in src/ and another outside it, with `args: src/`."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "other.py").write_text(BAD)  # outside `args`: not linted
    inputs = {"args": "src/", "sarif-file": "report.sarif", "python-version": "3.12"}
    scripts = sysconfig.get_path("scripts")
    results = []
    for step in run_steps()[1:]:
        env = {name: resolve(str(value), inputs) for name, value in step.get("env", {}).items()}
        env = {**os.environ, **env, "PATH": scripts + os.pathsep + os.environ["PATH"]}
        results.append(
            subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True)
        )
    sarif, annotate = results
    assert sarif.returncode == 0, sarif.stderr
    log = json.loads((tmp_path / "report.sarif").read_text())
    assert validation_errors(log) == []
    locations = [
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for result in log["runs"][0]["results"]
    ]
    assert locations == ["src/train.py"]
    assert annotate.returncode == 1
    assert annotate.stdout.startswith("::error title=fsdp2-lint (FSDP001),file=src/train.py,line=5,")


def test_readme_workflow_uses_the_action_and_uploads_its_sarif_even_when_it_fails():
    _workflow, example = re.findall(
        r"```yaml\n(.+?)```", README.split("\n## GitHub Actions\n", 1)[1].split("\n## ", 1)[0], re.S
    )
    steps = yaml.safe_load(example)["jobs"]["lint"]["steps"]
    action = next(step for step in steps if step.get("uses", "").startswith("fsdp2-lint/fsdp2-lint@"))
    upload = next(step for step in steps if step.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert set(action["with"]) <= set(ACTION["inputs"])
    assert upload["with"]["sarif_file"] == f"${{{{ steps.{action['id']}.outputs.sarif-file }}}}"
    assert upload["if"] == "${{ !cancelled() }}" and steps.index(upload) > steps.index(action)
