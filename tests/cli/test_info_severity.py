"""The `info` severity (FSDP033: correct but slow): shown in every output format, in each CI format's
own word for it, never a failure and never a non-zero exit status."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from samples import BAD, write
from sarif_schema import validation_errors

from fsdp2_lint.cli import main
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.lsp.features import SEVERITIES
from fsdp2_lint.rule import all_rules

ACCUMULATES = """\
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for step in range(steps):
    for batch in micro_batches:
        model(batch).sum().backward()
    optimizer.step()
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "slow.py", ACCUMULATES)
    return tmp_path


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--isolated", "--no-cache", *args])
    return result.exit_code, result.output


def test_the_rule_is_info():
    assert {rule.code: rule.severity for rule in all_rules()}["FSDP033"] is Severity.INFO
    assert not Severity.INFO.fails and Severity.WARNING.fails and Severity.ERROR.fails


@pytest.mark.parametrize("fmt", ["text", "concise", "json", "json-lines", "github", "gitlab", "junit", "sarif"])
def test_info_alone_is_shown_and_exits_0(project, fmt):
    code, output = check("--output-format", fmt, "slow.py")
    assert code == 0
    assert "FSDP033" in output


def test_info_beside_an_error_still_exits_1(project):
    write(project / "bad.py", BAD)
    code, output = check("--output-format", "concise", "slow.py", "bad.py")
    assert code == 1
    assert "FSDP033" in output and "FSDP001" in output
    assert "1 info" in output and "error" in output


def test_text_summary_counts_infos(project):
    assert "Found 1 problem (1 info)." in check("--output-format", "concise", "slow.py")[1]


def test_github_writes_a_notice(project):
    (line,) = check("--output-format", "github", "slow.py")[1].splitlines()
    assert line.startswith("::notice title=fsdp2-lint (FSDP033),file=slow.py,line=6,")


def test_gitlab_severity_is_info(project):
    (entry,) = json.loads(check("--output-format", "gitlab", "slow.py")[1])
    assert (entry["check_name"], entry["severity"]) == ("FSDP033", "info")


def test_junit_counts_info_as_a_passed_case(project):
    write(project / "bad.py", BAD)
    suites = ET.fromstring(check("--output-format", "junit", "slow.py", "bad.py")[1])
    assert (suites.get("tests"), suites.get("failures")) == ("2", "1")
    slow = next(suite for suite in suites if suite.get("name") == "slow.py")
    assert slow.get("failures") == "0"
    (case,) = slow
    assert case.find("failure") is None
    assert case.find("system-out").text.startswith("info: FSDP033 line 6")


def test_sarif_level_is_note_and_valid(project):
    log = json.loads(check("--output-format", "sarif", "slow.py")[1])
    assert validation_errors(log) == []
    (run,) = log["runs"]
    (result,) = run["results"]
    assert (result["ruleId"], result["level"]) == ("FSDP033", "note")
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert rule["defaultConfiguration"] == {"level": "note"}


def test_lsp_maps_every_severity_and_info_to_information():
    from lsprotocol import types

    assert set(SEVERITIES) == set(Severity)
    assert SEVERITIES[Severity.INFO] == types.DiagnosticSeverity.Information


def test_fix_with_only_infos_left_exits_0(project):
    code, output = check("--fix", "slow.py")
    assert code == 0 and "FSDP033" in output
