"""`fsdp2-lint check|rules|rule` as users drive it: exit codes, output, configuration, discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from samples import BAD, BAD_WITH_FIX, GOOD, write

from fsdp2_lint.cli import main


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_exit_codes_clean_reported_and_usage(project):
    write(project / "good.py", GOOD)
    write(project / "bad.py", BAD)
    assert run("check", "good.py")[0] == 0
    assert run("check", "bad.py")[0] == 1
    code, output = run("check", "--select", "FSDP999", "good.py")
    assert code == 2 and "FSDP999" in output


def test_text_output_shows_location_source_caret_and_hint(project):
    write(project / "bad.py", BAD)
    code, output = run("check", "bad.py")
    lines = output.splitlines()
    assert lines[0].startswith("bad.py:5:7: FSDP001 optimizer built from parameters of `model`")
    assert lines[2] == "5 | opt = torch.optim.AdamW(model.parameters())"
    assert lines[3] == "  |       " + "^" * len("torch.optim.AdamW(model.parameters())")
    assert lines[4].startswith("  = help: build the optimizer after the last `fully_shard` call")
    assert lines[-2:] == [
        "Found 1 problem (1 error).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    assert "\x1b[" not in output  # plain when not a terminal


def test_text_output_is_coloured_on_a_terminal(project):
    write(project / "bad.py", BAD)
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    result = subprocess.run(
        [sys.executable, "-m", "fsdp2_lint", "check", "bad.py"], capture_output=True, text=True, env=env, cwd=project
    )
    assert result.returncode == 1
    assert "\x1b[" in result.stdout


def test_json_output(project):
    write(project / "src" / "bad.py", BAD)
    code, output = run("check", "--output-format", "json", "src")
    assert code == 1
    (diagnostic,) = json.loads(output)
    assert diagnostic == {
        "code": "FSDP001",
        "name": "optimizer-before-shard",
        "message": diagnostic["message"],
        "hint": diagnostic["hint"],
        "severity": "error",
        "path": os.path.join("src", "bad.py"),
        "line": 5,
        "column": 7,
        "end_line": 5,
        "end_column": 7 + len("torch.optim.AdamW(model.parameters())"),
        "fix": {  # moved after the last fully_shard: lines 5-8 become lines 6-8 and 5
            "description": diagnostic["fix"]["description"],
            "applicability": "unsafe",
            "edits": [
                {"line": 5, "column": 1, "end_line": 6, "end_column": 1, "content": ""},
                {
                    "line": 9,
                    "column": 1,
                    "end_line": 9,
                    "end_column": 1,
                    "content": "opt = torch.optim.AdamW(model.parameters())\n",
                },
            ],
        },
        "related": [  # the first `fully_shard` of the model's parameters, which the message names
            {
                "path": os.path.join("src", "bad.py"),
                "line": 7,
                "column": 5,
                "end_line": 7,
                "end_column": 5 + len("fully_shard(block)"),
                "message": "`model` is sharded here",
            }
        ],
    }
    assert "(line 7)" in diagnostic["message"]


def test_absolute_paths_are_shown_relative_to_the_working_directory(project):
    write(project / "bad.py", BAD)
    code, output = run("check", "--output-format", "json", str(project / "bad.py"))
    assert json.loads(output)[0]["path"] == "bad.py"


def test_unparsable_and_unreadable_files_are_fsdp000_and_others_still_linted(project):
    write(project / "broken.py", "from torch.distributed.fsdp import fully_shard\ndef f(:\n")
    (project / "undecodable.py").write_bytes(b"# -*- coding: ascii -*-\nfully_shard(m)  # \xff\n")
    write(project / "bad.py", BAD)
    code, output = run("check", "--output-format", "json", "broken.py", "undecodable.py", "missing.py", "bad.py")
    assert code == 1
    found = {(d["path"], d["code"]) for d in json.loads(output)}
    assert found == {
        ("broken.py", "FSDP000"),
        ("undecodable.py", "FSDP000"),
        ("missing.py", "FSDP000"),
        ("bad.py", "FSDP001"),
    }
    by_path = {d["path"]: d for d in json.loads(output)}
    broken = by_path["broken.py"]
    assert (broken["message"], broken["line"], broken["column"]) == ("syntax error: invalid syntax", 2, 7)
    assert "No such file" in by_path["missing.py"]["message"]
    assert "permissions" in by_path["missing.py"]["hint"]
    assert "encoding" in by_path["undecodable.py"]["hint"]


@pytest.mark.parametrize(
    "args, configuration",
    [(("--ignore", "FSDP000"), ""), ((), 'per-file-ignores = { "broken.py" = ["FSDP000"] }\n')],
    ids=["ignore", "per-file-ignores"],
)
def test_fsdp000_left_out_by_the_settings_is_not_reported_among_other_files(project, args, configuration):
    write(project / "broken.py", "from torch.distributed.fsdp import fully_shard\ndef f(:\n")
    write(project / "bad.py", BAD)
    write(project / "good.py", GOOD)
    write(project / "pyproject.toml", "[tool.fsdp2-lint]\n" + configuration)
    code, output = run("check", "--output-format", "json", *args, "broken.py", "bad.py", "good.py")
    assert code == 1
    assert [(d["path"], d["code"]) for d in json.loads(output)] == [("bad.py", "FSDP001")]


def test_per_file_ignores_patterns_matching_one_file_add_up(project):
    write(project / "tests" / "bad_test.py", BAD_WITH_FIX)  # FSDP001 and FSDP003
    write(project / "tests" / "other.py", BAD_WITH_FIX)
    write(
        project / "pyproject.toml",
        '[tool.fsdp2-lint]\nper-file-ignores = { "tests/*" = ["FSDP001"], "*_test.py" = ["FSDP003"] }\n',
    )
    code, output = run("check", "--output-format", "json", ".")
    assert sorted((d["path"], d["code"]) for d in json.loads(output)) == [
        ("tests/other.py", "FSDP003")  # only the first pattern matches it
    ]


def test_a_file_outside_the_configurations_folder_is_linted_without_its_path_patterns(project):
    write(project / "outside" / "train.py", BAD_WITH_FIX)  # FSDP001 and FSDP003
    write(project / "repo" / "pyproject.toml", '[tool.fsdp2-lint]\nper-file-ignores = { "*.py" = ["FSDP003"] }\n')
    os.chdir(project / "repo")
    for name in ("../outside/train.py", str(project / "outside" / "train.py")):  # the same file, named two ways
        code, output = run("check", "--config", "pyproject.toml", "--output-format", "json", name)
        assert code == 1
        assert sorted(d["code"] for d in json.loads(output)) == ["FSDP001", "FSDP003"]  # no pattern reaches it


@pytest.mark.parametrize(
    "source, message, line, column",
    [
        ("x = (1,\n", "'(' was never closed", 1, 5),
        ("if x\n    pass\n", "expected ':'", 1, 5),
        ("a = 1\n  b = 2\n", "unexpected indent", 2, 2),
    ],
)
def test_syntax_errors_carry_pythons_message_and_position(project, source, message, line, column):
    write(project / "broken.py", "from torch.distributed.fsdp import fully_shard\n" + source)
    code, output = run("check", "--output-format", "json", "broken.py")
    (diagnostic,) = json.loads(output)
    assert code == 1
    assert (diagnostic["message"], diagnostic["line"], diagnostic["column"]) == (
        f"syntax error: {message}",
        line + 1,
        column,
    )


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("  # noqa: FSDP001", True),
        ("  # noqa", True),
        ("  # NOQA:FSDP001,FSDP004", True),
        ("  # noqa: fsdp001", True),  # codes are read in any case, as the keyword is
        ("  # fsdp2-lint: disable=fsdp001", True),
        ("  # fsdp2-lint: disable=FSDP001", True),
        ("  # noqa: E501", False),
        ("  # noqa: FSDP004", False),
        ("  # fsdp2-lint: disable=FSDP002", False),
    ],
)
def test_suppression_comments(project, comment, suppressed):
    source = BAD.replace(
        "opt = torch.optim.AdamW(model.parameters())", "opt = torch.optim.AdamW(model.parameters())" + comment
    )
    write(project / "bad.py", source)
    assert run("check", "bad.py")[0] == (0 if suppressed else 1)


def test_select_ignore_and_prefixes(project):
    write(project / "bad.py", BAD)
    assert run("check", "--ignore", "FSDP001", "bad.py")[0] == 0
    assert run("check", "--select", "FSDP00", "bad.py")[0] == 1
    assert run("check", "--select", "FSDP002,FSDP003", "bad.py")[0] == 0
    assert run("check", "--select", "FSDP002", "--extend-select", "FSDP001", "bad.py")[0] == 1


def test_pyproject_configuration(project):
    write(project / "bad.py", BAD)
    write(project / "tests" / "bad_test.py", BAD)
    write(project / "generated" / "bad_gen.py", BAD)
    write(
        project / "pyproject.toml",
        textwrap.dedent(
            """
            [tool.fsdp2-lint]
            exclude = ["generated/"]
            per-file-ignores = { "tests/*" = ["FSDP001"] }
            """
        ),
    )
    code, output = run("check", "--output-format", "json", ".")
    assert [d["path"] for d in json.loads(output)] == ["bad.py"]
    # named explicitly, an excluded file is still linted
    assert run("check", "generated/bad_gen.py")[0] == 1
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nselect = ["FSDP002"]\n')
    assert run("check", ".")[0] == 0
    assert run("check", "--select", "FSDP001", ".")[0] == 1  # the command line wins


def test_configuration_of_a_subproject_applies_to_its_files(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nignore = ["FSDP001"]\n')
    write(project / "sub" / "pyproject.toml", "[tool.other]\nx = 1\n")
    write(project / "sub" / "bad.py", BAD)
    assert run("check", "sub/bad.py")[0] == 0  # nearest pyproject with our table is the top one
    assert run("check", "--isolated", "sub/bad.py")[0] == 1


@pytest.mark.parametrize(
    "config, message",
    [
        ('[tool.fsdp2-lint]\nselct = ["FSDP001"]\n', "unknown key(s) in [tool.fsdp2-lint]: selct"),
        ('[tool.fsdp2-lint]\nignore = ["FSDP123"]\n', "pyproject.toml: unknown rule code or prefix 'FSDP123'"),
        (
            '[tool.fsdp2-lint]\nper-file-ignores = { "a/*" = ["FSDP123"] }\n',
            "pyproject.toml: per-file-ignores['a/*']: unknown rule code or prefix 'FSDP123'",
        ),
        ("[tool.fsdp2-lint]\nmax-file-size = -1\n", "max-file-size"),
        ('[tool.fsdp2-lint]\nignore = "FSDP001"\n', "`ignore` must be a list of strings"),
        ("[tool.fsdp2-lint\n", "cannot read configuration"),
    ],
)
def test_configuration_errors_exit_2_and_name_the_problem(project, config, message):
    write(project / "pyproject.toml", config)
    write(project / "good.py", GOOD)
    code, output = run("check", "good.py")
    assert code == 2
    assert message in output
    assert "Traceback" not in output


@pytest.mark.parametrize("setting", ['select = ["ALL"]', "max-file-size = 0"])
def test_settings_that_keep_everything_on_are_accepted(project, setting):
    write(project / "pyproject.toml", "[tool.fsdp2-lint]\n" + setting + "\n")
    write(project / "bad.py", BAD)
    code, output = run("check", "--output-format", "json", "bad.py")
    assert code == 1 and [d["code"] for d in json.loads(output)] == ["FSDP001"]


def test_directory_walk_respects_gitignore_and_default_excludes(project):
    (project / ".git").mkdir()
    write(project / ".gitignore", "ignored/\n*_skip.py\n!keep_skip.py\n")
    for name in ("ignored/a.py", "b_skip.py", "keep_skip.py", ".venv/c.py", "build/d.py", "sub/e.py"):
        write(project / name, BAD)
    write(project / "sub" / ".gitignore", "e.py\n")
    code, output = run("check", "--output-format", "json", ".")
    assert sorted(d["path"] for d in json.loads(output)) == ["keep_skip.py"]


def test_rules_and_rule_explain(project):
    code, output = run("rules", "--output-format", "json")
    assert code == 0
    codes = [rule["code"] for rule in json.loads(output)]
    assert codes == sorted(codes) and "FSDP001" in codes
    code, output = run("rule", "fsdp001")
    assert code == 0
    assert "optimizer-before-shard" in output and "Why is this bad?" in output and "0 of 10" in output
    assert run("rule", "FSDP999")[0] == 2


def test_rules_show_the_fix_they_declare(project):
    """`rules --output-format json` and `rule CODE` give each rule's declared fix and its safety."""
    rules = {rule["code"]: rule for rule in json.loads(run("rules", "--output-format", "json")[1])}
    assert rules["FSDP022"]["fix"]["applicabilities"] == ["safe", "unsafe"]
    assert rules["FSDP001"]["fix"]["safety"].startswith("Unsafe: only `--fix --unsafe-fixes` applies it.")
    assert rules["FSDP004"]["fix"] is None
    code, output = run("rule", "FSDP001")
    assert "Fix safety" in output and "Unsafe: only --fix --unsafe-fixes applies it." in output
    assert "No fix is offered" in run("rule", "FSDP004")[1]


def test_installed_entry_point_runs(project):
    write(project / "bad.py", BAD)
    script = Path(sysconfig.get_path("scripts")) / "fsdp2-lint"
    result = subprocess.run([str(script), "check", "bad.py"], capture_output=True, text=True, cwd=project)
    assert result.returncode == 1 and "FSDP001" in result.stdout


@pytest.mark.parametrize(
    "expression, message",
    [
        ("[" * 3000 + "]" * 3000, "syntax error: too many nested parentheses"),
        ("f(" * 3000 + ")" * 3000, "syntax error: too many nested parentheses"),
        ("+".join(["1"] * 20000), "Python cannot compile this file: maximum recursion depth exceeded"),
    ],
    ids=["brackets", "calls", "operator-chain"],
)
def test_code_nested_deeper_than_python_accepts_is_fsdp000_not_a_crash(project, expression, message):
    """libcst's native parser crashes the process on these (or takes minutes); Python refuses them."""
    write(project / "deep.py", f"from torch.distributed.fsdp import fully_shard\nx = {expression}\n")
    write(project / "bad.py", BAD)
    result = subprocess.run(
        [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "--output-format", "json", "deep.py", "bad.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    found = {d["path"]: d for d in json.loads(result.stdout)}
    assert found["deep.py"]["code"] == "FSDP000" and found["deep.py"]["message"].startswith(message)
    assert found["bad.py"]["code"] == "FSDP001"


def test_long_lines_and_brackets_inside_strings_python_accepts_are_still_linted(project):
    write(project / "bad.py", BAD + f"TABLE = [{', '.join(['1'] * 5000)}]\nDOC = '{'(' * 300}'\n")
    code, output = run("check", "--no-cache", "--output-format", "json", "bad.py")
    assert [d["code"] for d in json.loads(output)] == ["FSDP001"]
