"""`fsdp2-lint check` for CI: the output formats (SARIF checked against the official 2.1.0 schema)
and Ruff's conventions: --statistics, --exit-zero, --stdin-filename, --quiet, --force-exclude and
FSDP2_LINT_OUTPUT_FORMAT."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from samples import BAD, GOOD, write
from sarif_schema import validation_errors

from fsdp2_lint.cli import main
from fsdp2_lint.diagnostics import Diagnostic, Severity
from fsdp2_lint.output import write_github, write_report
from fsdp2_lint.rule import all_rules

BROKEN = "from torch.distributed.fsdp import fully_shard\ndef f(:\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A git work tree, entered at its subdirectory `src` (CI formats give paths from the root)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    return tmp_path


def check(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", *args], input=stdin, env=env)
    return result.exit_code, result.output


def test_concise_prints_one_line_per_problem_and_quiet_drops_the_summary(project):
    write(project / "src" / "bad.py", BAD)
    code, output = check("--output-format", "concise", "bad.py")
    assert code == 1
    assert output.splitlines() == [
        "bad.py:5:7: FSDP001 optimizer built from parameters of `model` captured before `fully_shard` (line 7): "
        "its step() updates the old, non-DTensor tensors and training silently does nothing",
        "Found 1 problem (1 error).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    assert check("--output-format", "concise", "--quiet", "bad.py")[1].splitlines() == output.splitlines()[:1]
    assert check("-q", "bad.py")[1].splitlines()[-1].startswith("  = help:")  # text: no "Found ..." line
    write(project / "src" / "good.py", GOOD)
    assert check("-q", "good.py") == (0, "")


def test_json_lines_holds_the_json_objects_one_per_line(project):
    write(project / "src" / "bad.py", BAD)
    write(project / "src" / "broken.py", BROKEN)
    lines = check("--output-format", "json-lines", "bad.py", "broken.py")[1].splitlines()
    assert [json.loads(line) for line in lines] == json.loads(
        check("--output-format", "json", "bad.py", "broken.py")[1]
    )
    assert [json.loads(line)["code"] for line in lines] == ["FSDP001", "FSDP000"]


def test_github_annotations_point_at_repository_paths_with_escaping(project):
    write(project / "src" / "run,1:a.py", BAD)
    code, output = check("--output-format", "github", "run,1:a.py")
    assert code == 1
    assert output == (
        "::error title=fsdp2-lint (FSDP001),file=src/run%2C1%3Aa.py,line=5,col=7,endLine=5,endColumn=44::"
        "run,1:a.py:5:7: FSDP001 optimizer built from parameters of `model` captured before `fully_shard` (line 7): "
        "its step() updates the old, non-DTensor tensors and training silently does nothing\n"
    )
    warning = Diagnostic("FSDP003", "n", "100% sure\r\nsecond line", "h", Severity.WARNING, "a.py", 1, 1, 1, 2, "")
    stream = io.StringIO()
    write_github([warning], stream)
    assert stream.getvalue().endswith("::a.py:1:1: FSDP003 100%25 sure%0D%0Asecond line\n")
    assert stream.getvalue().startswith("::warning title=fsdp2-lint (FSDP003),file=")


def test_gitlab_code_quality_fingerprints_survive_edits_elsewhere_and_stay_unique(project):
    twice = BAD + "out = model.forward(x)\n" * 2
    write(project / "src" / "bad.py", twice)
    report = json.loads(check("--output-format", "gitlab", "bad.py")[1])
    assert [entry["location"] for entry in report][:1] == [{"path": "src/bad.py", "lines": {"begin": 5, "end": 5}}]
    assert [entry["check_name"] for entry in report] == ["FSDP001", "FSDP003", "FSDP003"]
    assert report[0]["severity"] == "major"
    assert report[0]["description"].startswith("FSDP001 optimizer built from parameters")
    fingerprints = [entry["fingerprint"] for entry in report]
    assert len(set(fingerprints)) == len(report) == 3  # the two identical lines differ too

    write(project / "src" / "bad.py", "# a comment pushes everything down\n" + twice)
    shifted = json.loads(check("--output-format", "gitlab", "bad.py")[1])
    assert [entry["fingerprint"] for entry in shifted] == fingerprints
    assert shifted[0]["location"]["lines"]["begin"] == 6


def test_junit_has_a_suite_per_file_and_a_failure_per_problem(project):
    write(project / "src" / "bad.py", BAD)
    write(project / "src" / "broken.py", BROKEN)
    suites = ET.fromstring(check("--output-format", "junit", "bad.py", "broken.py")[1])
    assert (suites.tag, suites.get("tests"), suites.get("failures")) == ("testsuites", "2", "2")
    assert [suite.get("name") for suite in suites] == ["bad.py", "broken.py"]
    case = suites.find("testsuite/testcase")
    assert (case.get("name"), case.get("classname"), case.get("line"), case.get("column")) == (
        "fsdp2-lint.FSDP001",
        "bad.py",
        "5",
        "7",
    )
    assert case.find("failure").get("message").startswith("optimizer built from parameters of `model`")
    write(project / "src" / "good.py", GOOD)
    clean = ET.fromstring(check("--output-format", "junit", "good.py")[1])
    assert (clean.get("tests"), clean.get("failures"), clean.find("testsuite/testcase").get("name")) == (
        "1",
        "0",
        "No problems found",
    )


def test_sarif_is_valid_2_1_0_with_every_rule_and_repository_relative_results(project):
    write(project / "src" / "bad.py", BAD)
    write(project / "src" / "broken.py", BROKEN)
    code, output = check("--output-format", "sarif", "bad.py", "broken.py")
    log = json.loads(output)
    assert validation_errors(log) == []
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == ["FSDP000"] + [rule.code for rule in all_rules()]
    optimizer_rule = rules[1]
    assert optimizer_rule["name"] == "optimizer-before-shard" and optimizer_rule["helpUri"].endswith(
        "/docs/rules/FSDP001.md"
    )
    assert optimizer_rule["shortDescription"]["text"].startswith("optimizer built from parameters")
    assert optimizer_rule["fullDescription"]["text"] and optimizer_rule["help"]["markdown"].startswith("# FSDP001")
    assert "## Fix safety\nUnsafe: only `--fix --unsafe-fixes` applies it." in optimizer_rule["help"]["markdown"]
    assert all(
        rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"] for rule in rules
    )

    optimizer, parse_error = run["results"]
    assert (optimizer["ruleId"], optimizer["level"], rules[optimizer["ruleIndex"]]["id"]) == (
        "FSDP001",
        "error",
        "FSDP001",
    )
    assert optimizer["message"]["text"].startswith("optimizer built from parameters of `model`")
    location = optimizer["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src/bad.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 5, "startColumn": 7, "endLine": 5, "endColumn": 44}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.as_uri() + "/"
    assert (
        parse_error["ruleId"] == "FSDP000"
        and parse_error["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    )

    write(project / "src" / "good.py", GOOD)
    clean = json.loads(check("--output-format", "sarif", "good.py")[1])
    assert validation_errors(clean) == [] and clean["runs"][0]["results"] == []


def test_the_sarif_schema_check_rejects_what_the_2_1_0_schema_forbids(project):
    """The vendored schema is the real one: a log this linter would never write fails it."""
    write(project / "src" / "bad.py", BAD)
    log = json.loads(check("--output-format", "sarif", "bad.py")[1])
    log["runs"][0]["results"][0]["level"] = "fatal"  # not one of none/note/warning/error
    del log["version"]
    errors = validation_errors(log)
    assert errors[0].startswith("<root>: 'version' is a required property")
    assert any(e.startswith("runs/0/results/0/level: 'fatal' is not one of") for e in errors), errors


def test_statistics_count_each_code_most_frequent_first(project):
    write(project / "src" / "bad.py", BAD + "out = model.forward(x)\n" * 2)
    code, output = check("--statistics", "bad.py")
    assert code == 1
    assert output.splitlines() == [
        "2\tFSDP003\t[*] direct-forward-call",
        "1\tFSDP001\t[ ] optimizer-before-shard",
        "Found 3 problems (3 errors).",
    ]
    assert check("--statistics", "--output-format", "concise", "bad.py")[1] == output  # only JSON differs
    rows = json.loads(check("--statistics", "--output-format", "json", "bad.py")[1])
    assert rows == [
        {"code": "FSDP003", "name": "direct-forward-call", "count": 2, "fixable": True},
        {"code": "FSDP001", "name": "optimizer-before-shard", "count": 1, "fixable": False},
    ]


def source_and_caret(source_line: str, column: int, end_column: int, end_line: int = 7) -> list[str]:
    """The text format's source line and the caret line under it, for a diagnostic on line 7."""
    d = Diagnostic("FSDP003", "n", "m", "h", Severity.ERROR, "a.py", 7, column, end_line, end_column, source_line)
    stream = io.StringIO()
    write_report([d], "text", stream, summary=False)
    return stream.getvalue().splitlines()[2:4]


def test_the_text_formats_carets_underline_the_reported_span_as_the_terminal_shows_it():
    assert source_and_caret("y = model.forward(x)", 5, 21) == ["7 | y = model.forward(x)", "  |     " + "^" * 16]
    # a tab shows as 4 columns; a wide (CJK) character takes two cells
    assert source_and_caret("\tout = model(x)", 2, 5) == ["7 |     out = model(x)", "  |     ^^^"]
    wide = 'x = "模型"; fully_shard(m)'
    start = wide.index("fully_shard") + 1
    assert source_and_caret(wide, start, start + 14)[1] == "  | " + " " * (start - 1 + 2) + "^" * 14
    # a span that goes on to later lines is underlined to the end of its first line
    assert source_and_caret("fully_shard(model,", 1, 5, end_line=8)[1] == "  | " + "^" * len("fully_shard(model,")
    assert source_and_caret("fully_shard(model)", 3, 3)[1] == "  |   ^"  # an empty span still shows one caret


def test_exit_zero_reports_but_exits_0(project):
    write(project / "src" / "bad.py", BAD)
    code, output = check("--exit-zero", "bad.py")
    assert code == 0 and "FSDP001" in output
    assert check("--exit-zero", "--select", "FSDP999", "bad.py")[0] == 2  # usage errors still fail


def test_stdin_is_linted_as_the_named_file_with_its_settings(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nper-file-ignores = { "tests/*" = ["FSDP001"] }\n')
    code, output = check("--output-format", "concise", "--stdin-filename", "train.py", stdin=BAD)
    assert code == 1 and output.startswith("train.py:5:7: FSDP001")
    assert (
        check("--stdin-filename", str(project / "tests" / "test_train.py"), stdin=BAD)[0] == 0
    )  # per-file-ignores by NAME
    code, output = check("--output-format", "concise", "-", stdin=BAD)
    assert code == 1 and output.startswith("-:5:7: FSDP001")
    code, output = check("--stdin-filename", "x.py", "other.py", stdin=BAD)
    assert code == 2 and "--stdin-filename" in output


def test_force_exclude_applies_the_configured_exclude_to_named_files(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    write(project / "src" / "generated" / "bad.py", BAD)
    assert check("generated/bad.py")[0] == 1  # named explicitly: linted
    nothing = "warning: No Python files found under the given path(s)\nAll checks passed!\n"  # as Ruff says
    assert check("--force-exclude", "generated/bad.py") == (0, nothing)
    assert check("--force-exclude", "--stdin-filename", "generated/bad.py", stdin=BAD)[0] == 0


def test_output_format_from_the_environment_and_the_flag_wins(project):
    write(project / "src" / "bad.py", BAD)
    from_env = check("bad.py", env={"FSDP2_LINT_OUTPUT_FORMAT": "json-lines"})[1]
    assert json.loads(from_env)["code"] == "FSDP001"
    assert check("--output-format", "concise", "bad.py", env={"FSDP2_LINT_OUTPUT_FORMAT": "json"})[1].startswith(
        "bad.py:5:7:"
    )
    code, output = check("bad.py", env={"FSDP2_LINT_OUTPUT_FORMAT": "xml"})
    assert code == 2 and "'xml' is not one of" in output
