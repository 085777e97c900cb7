"""README's promises: its quick-start commands are what CI runs, its rule table is current, and the
configurations it gives users (pre-commit, VS Code, GitHub Actions) are valid and do what it says.
(Its Neovim configurations run in test_lsp_neovim.py, its `pre-commit try-repo` in test_precommit.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sysconfig

import yaml
from click.testing import CliRunner
from fixture_marks import ROOT
from pre_commit.clientlib import load_config, load_manifest
from samples import BAD
from sarif_schema import validation_errors

from fsdp2_lint import __version__
from fsdp2_lint.cache import DEFAULT_CACHE_DIR
from fsdp2_lint.cli import main
from fsdp2_lint.output import FORMATS, HOMEPAGE
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.evidence.registry import Evidence, matches
from fsdp2_lint.runtime.harness.command import confirm

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

README = (ROOT / "README.md").read_text()


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_command():
    install_and_lint, install_and_test = quick_start_commands()
    assert "pip install -e ." in install_and_lint and "fsdp2-lint check fixtures/" in install_and_lint
    assert install_and_test.endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_and_test in ci.splitlines()


def test_rule_table_matches_the_rules():
    table = README.split("<!-- rules-table", 1)[1].split("-->", 1)[1].split("<!-- end rules-table -->", 1)[0]
    generated = CliRunner().invoke(main, ["rules", "--output-format", "markdown"]).output
    assert table.strip() == generated.strip(), "regenerate with `fsdp2-lint rules --output-format markdown`"


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.+?)```", text, re.S)


def test_pre_commit_snippets_are_valid_configurations_of_hooks_this_repository_defines(tmp_path):
    snippets = [block for block in blocks("yaml") if block.startswith("repos:")]
    assert len(snippets) >= 2  # pre-commit section, and the fix hook under Fixes
    defined = {hook["id"] for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    for number, snippet in enumerate(snippets):
        path = tmp_path / f"config{number}.yaml"
        path.write_text(snippet)
        (repo,) = load_config(str(path))["repos"]  # pre-commit's own schema check
        # a clone and one of its commits: what works before a release (test_precommit.py runs it)
        assert (repo["repo"], repo["rev"]) == ("/path/to/fsdp2-lint", "COMMIT")
        assert {hook["id"] for hook in repo["hooks"]} <= defined
    (hook_snippet,) = [snippet for snippet in snippets if snippet in section("pre-commit")]
    assert "      - id: fsdp2-lint\n" in hook_snippet


def test_vs_code_settings_run_the_language_server_for_python():
    (settings,) = blocks("json", section("Editors (LSP)"))
    assert json.loads(settings) == {
        "glspc.server.command": "fsdp2-lint",
        "glspc.server.commandArguments": ["lsp"],
        "glspc.server.languageId": ["python"],
    }
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "pip install -e '.[lsp]'" in section("Editors (LSP)") and extras["lsp"] == ["pygls>=2,<3"]


def test_output_formats_table_lists_every_format():
    table = section("Output formats")
    assert re.findall(r"^\| `([a-z-]+)`", table, re.M) == list(FORMATS)


def github_workflow() -> dict:
    workflow, _action_workflow = blocks("yaml", section("GitHub Actions"))  # the action's: test_action.py
    return yaml.safe_load(workflow)


def test_github_workflow_lint_job_uploads_the_sarif_its_command_writes_and_fails_on_findings(tmp_path):
    workflow = github_workflow()
    assert set(workflow[True]) == {"push", "pull_request"}  # YAML 1.1 reads the key `on` as true
    lint = workflow["jobs"]["lint"]
    assert lint["permissions"]["security-events"] == "write"
    steps = lint["steps"]
    upload = next(step for step in steps if step.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    commands = [step["run"] for step in steps if "run" in step]
    assert commands[0] == f"pip install git+{HOMEPAGE}@main"  # no release on PyPI yet
    # CI keeps the results cache `check` writes, restored before the first check
    cache = next(step for step in steps if step.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == DEFAULT_CACHE_DIR
    assert steps.index(cache) < next(i for i, step in enumerate(steps) if "check" in step.get("run", ""))

    # the workflow's own commands, run in a checkout holding a bad script
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(BAD)
    env = {**os.environ, "PATH": sysconfig.get_path("scripts") + os.pathsep + os.environ["PATH"]}
    sarif_run, annotate = (
        subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
        for command in commands[1:]
    )
    assert sarif_run.returncode == 0, sarif_run.stderr  # --exit-zero: the upload step still runs
    log = json.loads((tmp_path / upload["with"]["sarif_file"]).read_text())
    assert validation_errors(log) == [] and [result["ruleId"] for result in log["runs"][0]["results"]] == ["FSDP001"]
    assert annotate.returncode == 1 and annotate.stdout.startswith(
        "::error title=fsdp2-lint (FSDP001),file=train.py,line=5,"
    )


def test_github_workflow_gpu_job_runs_confirm_on_cuda():
    job = github_workflow()["jobs"]["confirm"]
    install, run = [step["run"] for step in job["steps"] if "run" in step]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert install == f"pip install 'fsdp2-lint[runtime] @ git+{HOMEPAGE}@main'" and any(
        r.startswith("torch") for r in extras["runtime"]
    )
    program, command, *arguments = run.split()
    assert (program, command) == ("fsdp2-lint", "confirm")
    options = confirm.make_context("confirm", arguments).params  # parsed as the CLI parses them
    assert options["device"] == "cuda" and options["nproc"] >= 2


def test_wave3_evidence_quotes_what_each_rules_signature_accepts():
    table = README.split("<!-- wave3-evidence -->", 1)[1].split("<!-- end wave3-evidence -->", 1)[0]
    rows = table.strip().splitlines()[2:]
    assert rows, "the evidence table lists no rule"
    for row in rows:
        code, bad, good = (cell.strip() for cell in row.strip("|").split("|"))
        rule = {rule.code: rule for rule in all_rules()}[code]
        bad_fixture, kind, quoted = re.fullmatch(r"`(\w+)`: `\[(\w+)\] (.+?)`.*", bad).groups()
        if kind == "exception":  # the rule's own kind, or one that also accepts its declared exception
            raised = Evidence(kind, quoted, (0,), exception_types=(quoted.split(":", 1)[0],), message=quoted)
            assert matches(raised, rule.signature), (code, quoted)
        else:
            assert kind == rule.signature.evidence, code
        good_fixture = re.match(r"`(\w+)`", good).group(1)
        assert good.endswith(": clean"), (code, good)
        for fixture in (ROOT / "fixtures" / code / bad_fixture, ROOT / "fixtures" / code / good_fixture):
            assert fixture.with_suffix(".py").exists() or fixture.is_dir(), fixture


def test_every_option_of_every_command_is_documented():
    """A user reads README, not only --help: each long option of each command (check's Ruff-style
    ones included) is named there, in code."""
    missing = [
        f"{name} {option}"
        for name, command in main.commands.items()
        for parameter in command.params
        for option in getattr(parameter, "opts", [])
        if option.startswith("--") and not re.search(rf"`[^`\n]*{re.escape(option)}(?![\w-])", README)
    ]
    assert missing == []


def test_readme_names_no_internal_issue_numbers():
    """A user cannot resolve the project's issue numbers ("targets (issue 8)"); README says what they mean."""
    assert re.findall(r"\bissues? \d+", README, re.IGNORECASE) == []


def test_install_from_a_clone_names_extras_that_exist_and_published_forms_are_marked_as_after_a_release():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    editable, wheel = blocks("bash", section("Install"))
    installs = [line.split("#")[0].split() for line in editable.splitlines()]
    assert [words[:3] for words in installs] == [["pip", "install", "-e"]] * 3
    named = [re.fullmatch(r"'?\.(?:\[(\w+)\])?'?", words[3]).group(1) for words in installs]
    assert named[0] is None and set(named[1:]) == {"lsp", "runtime"} <= set(extras)
    assert f"dist/fsdp2_lint-{__version__}-py3-none-any.whl" in wheel  # tests/project/test_packaging.py runs it
    # the forms that need a published package or tag: each says it is for after a release
    published = list(re.finditer(r"pip install (?:fsdp2-lint\b|'fsdp2-lint\[\w+\]')|rev: v\d", README))
    assert len(published) >= 5
    for match in published:
        before = README[max(0, match.start() - 300) : match.start()].lower()
        assert "after a release" in before, README[match.start() - 80 : match.end()]
