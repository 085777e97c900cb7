"""The options Ruff users reach for, with Ruff's semantics, and no silent passes: a warning when
nothing was linted or a named file is skipped; --show-files, --show-settings, --exclude,
--extend-exclude, -o, --color, --output-format full, --fix-only, --exit-non-zero-on-fix,
--add-noqa, `rule --all` and `clean`."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from samples import BAD, BAD_WITH_FIX, GOOD, write

from fsdp2_lint.cli import main

NO_FILES = "warning: No Python files found under the given path(s)"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", "--no-cache", *args])


# --- no silent passes ---


def test_a_directory_without_python_files_warns_and_still_exits_0(project):
    write(project / "empty" / "notes.md", "# notes\n")
    result = run("empty")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [NO_FILES]
    assert result.stdout == "All checks passed!\n"


def test_the_warning_is_not_given_when_a_file_was_linted_and_quiet_silences_it(project):
    write(project / "src" / "good.py", GOOD)
    assert run("src").stderr == ""
    (project / "empty").mkdir()
    assert run("-q", "empty").stderr == ""


def test_each_named_file_skipped_as_not_python_is_named_in_a_warning(project):
    write(project / "good.py", GOOD)
    write(project / "README.md", BAD)  # Python in a Markdown file is not linted
    (project / "model.bin").write_bytes(b"\x00\x01fully_shard\x00" * 10)
    write(project / "train", BAD)  # a script without a suffix is linted, as Ruff does
    result = run("good.py", "README.md", "model.bin", "train")
    assert result.exit_code == 1  # the usual code: from `train`'s diagnostic
    assert "train:5:7: FSDP001" in result.stdout
    assert result.stderr.splitlines() == [
        "warning: skipping README.md: not a Python file (`.md`)",
        "warning: skipping model.bin: a binary file, not Python source",
    ]


def test_a_named_notebook_is_linted_not_skipped(project):
    """A notebook holding a real misuse is linted (tests/cli/test_notebooks.py: the rest of it)."""
    write(project / "train.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": BAD}]}))
    result = run("train.ipynb")
    assert result.exit_code == 1
    assert "train.ipynb:cell 1:5:7: FSDP001" in result.stdout
    assert result.stderr == ""


def test_show_files_lists_what_would_be_linted_and_lints_nothing(project):
    write(project / "src" / "b.py", BAD)
    write(project / "src" / "a.pyi", GOOD)
    write(project / "src" / "skip" / "c.py", BAD)
    write(project / "src" / "notes.txt", "text\n")
    result = run("--show-files", "--exclude", "src/skip", "src")
    assert result.exit_code == 0  # nothing is linted, so BAD does not fail it
    assert result.stdout.splitlines() == [str(project / "src" / "a.pyi"), str(project / "src" / "b.py")]


def test_show_settings_prints_the_resolved_configuration_of_the_first_file(project):
    write(
        project / "pyproject.toml",
        '[tool.fsdp2-lint]\nselect = ["FSDP001", "FSDP003"]\nexclude = ["gen/"]\n'
        'per-file-ignores = { "tests/*" = ["FSDP003"] }\ntorch-version = "2.11"\n',
    )
    write(project / "tests" / "t.py", GOOD)
    result = run("--show-settings", "--extend-exclude", "tmp/", "tests")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f'Resolved settings for: "{project / "tests" / "t.py"}"'
    assert f'config = "{project / "pyproject.toml"}"' in lines
    assert 'rules = ["FSDP001", "FSDP003"]' in lines
    assert 'exclude = ["gen/"]' in lines
    assert f'command-line-exclude = ["tmp/"]  # relative to {project}' in lines
    assert 'per-file-ignores = { "tests/*" = ["FSDP003"] }' in lines
    assert 'torch-version = "2.11"' in lines
    assert 'rules-for-this-file = ["FSDP001"]' in lines


def test_show_settings_shows_the_defaults_and_every_other_key_a_configuration_sets(project):
    write(project / "b" / "train.py", GOOD)
    defaults = run("--isolated", "--show-settings", "b/train.py").stdout.splitlines()
    assert "config = none (defaults)" in defaults
    assert "report-parse-errors = true  # FSDP000" in defaults
    assert "per-file-ignores = {}" in defaults
    assert "max-file-size = 1048576" in defaults
    assert "follow-imports = true" in defaults
    assert "import-roots = []" in defaults
    write(
        project / "pyproject.toml",
        '[tool.fsdp2-lint]\nignore = ["FSDP000"]\nextend-exclude = ["gen/"]\nmax-file-size = 0\n'
        'follow-imports = false\nimport-roots = ["src", "lib"]\n'
        'per-file-ignores = { "b/*" = ["FSDP001"], "*.py" = ["FSDP002"] }\n',
    )
    lines = run("--show-settings", "b/train.py").stdout.splitlines()
    assert "report-parse-errors = false  # FSDP000" in lines
    assert 'extend-exclude = ["gen/"]' in lines
    assert 'per-file-ignores = { "b/*" = ["FSDP001"], "*.py" = ["FSDP002"] }' in lines
    assert "max-file-size = 0" in lines
    assert "follow-imports = false" in lines
    assert f'import-roots = ["{project / "src"}", "{project / "lib"}"]' in lines  # relative to the pyproject.toml
    for_this_file = json.loads(next(line for line in lines if line.startswith("rules-for-this-file")).split(" = ")[1])
    assert "FSDP003" in for_this_file
    assert "FSDP001" not in for_this_file and "FSDP002" not in for_this_file  # both patterns match: codes add up


# --- file selection on the command line ---


def test_an_excluded_directory_is_left_out_whole_as_git_would_even_for_a_file_a_later_pattern_re_includes(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nexclude = ["gen/", "!gen/keep.py"]\n')
    for name in ("gen/keep.py", "gen/other.py", "keep.py"):
        write(project / name, BAD)
    result = run("--show-files", ".")
    assert result.stdout.splitlines() == [str(project / "keep.py")]


def test_exclude_replaces_the_configured_exclude_and_extend_exclude_adds_to_it(project):
    write(project / "pyproject.toml", '[tool.fsdp2-lint]\nexclude = ["gen/"]\n')
    write(project / "gen" / "bad.py", BAD)
    write(project / "old" / "bad.py", BAD)
    write(project / "new" / "bad.py", BAD)

    def linted(*args: str) -> set[str]:
        return {d["path"] for d in json.loads(run("--output-format", "json", *args).stdout)}

    assert linted(".") == {"new/bad.py", "old/bad.py"}
    assert linted("--extend-exclude", "old", ".") == {"new/bad.py"}
    assert linted("--exclude", "old,new", ".") == {"gen/bad.py"}  # the configured `gen/` no longer applies
    assert linted("--exclude", "old", "old/bad.py") == {"old/bad.py"}  # a named file: as Ruff, unless...
    assert linted("--exclude", "old", "--force-exclude", "old/bad.py", "new/bad.py") == {"new/bad.py"}


# --- the report ---


def test_output_file_takes_the_report_and_the_exit_status_is_unchanged(project):
    write(project / "bad.py", BAD)
    result = run("-o", "reports/lint.json", "--output-format", "json", "bad.py")
    assert result.exit_code == 1
    assert result.stdout == ""
    (diagnostic,) = json.loads((project / "reports" / "lint.json").read_text(encoding="utf-8"))
    assert (diagnostic["code"], diagnostic["line"]) == ("FSDP001", 5)
    assert run("--output-file", "reports/lint.txt", "bad.py").exit_code == 1
    text = (project / "reports" / "lint.txt").read_text(encoding="utf-8")
    assert text.startswith("bad.py:5:7: FSDP001") and "\x1b[" not in text


def test_color_always_never_and_auto(project):
    write(project / "bad.py", BAD)
    assert "\x1b[1;31mFSDP001\x1b[0m" in run("--color", "always", "bad.py").stdout
    assert "\x1b[" not in run("--color", "auto", "bad.py").stdout  # not a terminal
    forced = CliRunner().invoke(main, ["check", "--no-cache", "--color", "never", "bad.py"], env={"FORCE_COLOR": "1"})
    assert "\x1b[" not in forced.stdout


def test_output_format_full_is_the_default_text_format(project):
    write(project / "bad.py", BAD)
    assert run("--output-format", "full", "bad.py").stdout == run("bad.py").stdout
    env = CliRunner().invoke(main, ["check", "--no-cache", "bad.py"], env={"FSDP2_LINT_OUTPUT_FORMAT": "full"})
    assert env.stdout == run("bad.py").stdout


# --- fixing ---


def test_fix_only_fixes_and_reports_nothing_left_and_exits_0(project):
    path = write(project / "train.py", BAD_WITH_FIX)
    result = run("--fix-only", "train.py")
    assert result.exit_code == 0  # FSDP001 is left, but --fix-only does not report it
    assert result.stdout == "Fixed 1 problem.\n"
    assert "out = model(batch)" in path.read_text(encoding="utf-8")
    again = run("--fix-only", "train.py")
    assert (again.exit_code, again.stdout) == (0, "")


def test_fix_only_with_diff_writes_nothing_and_a_diff_still_exits_1(project):
    path = write(project / "train.py", BAD_WITH_FIX)
    result = run("--fix-only", "--diff", "train.py")
    assert result.exit_code == 1 and "+out = model(batch)" in result.stdout
    assert path.read_text(encoding="utf-8") == BAD_WITH_FIX


def test_exit_non_zero_on_fix_fails_a_run_that_changed_a_file(project):
    fixable_only = BAD_WITH_FIX.replace(BAD.splitlines()[4] + "\n", "")  # FSDP003 alone
    path = write(project / "train.py", fixable_only)
    assert run("--fix", "train.py").exit_code == 0
    write(path, fixable_only)
    result = run("--fix", "--exit-non-zero-on-fix", "train.py")
    assert result.exit_code == 1 and "(1 fixed, 0 remaining)" in result.stdout
    assert run("--fix", "--exit-non-zero-on-fix", "train.py").exit_code == 0  # nothing left to change
    write(path, fixable_only)
    assert run("--fix-only", "--exit-non-zero-on-fix", "train.py").exit_code == 1
    write(path, fixable_only)
    assert run("--fix-only", "--exit-non-zero-on-fix", "--exit-zero", "train.py").exit_code == 0  # as Ruff


# --- --add-noqa ---


def test_add_noqa_marks_each_reported_line_keeping_existing_codes_and_every_other_byte(project):
    source = BAD_WITH_FIX.replace(
        "opt = torch.optim.AdamW(model.parameters())", "opt = torch.optim.AdamW(model.parameters())  # noqa: E501"
    )
    source = source.replace("\n", "\r\n")
    path = project / "train.py"
    path.write_bytes(source.encode())
    result = run("--add-noqa", "train.py")
    assert result.exit_code == 0
    assert result.stderr == "Added 2 noqa directives.\n"
    expected = source.replace("# noqa: E501", "# noqa: E501, FSDP001").replace(
        "out = model.forward(batch)", "out = model.forward(batch)  # noqa: FSDP003"
    )
    assert path.read_bytes() == expected.encode()
    assert run("train.py").exit_code == 0  # every diagnostic is now suppressed
    again = run("--add-noqa", "train.py")
    assert again.stderr == "Added 0 noqa directives.\n" and path.read_bytes() == expected.encode()


def test_add_noqa_leaves_a_reported_line_continued_with_a_backslash_as_it_is(project):
    statement = "opt = torch.optim.AdamW(model.parameters())"
    source = BAD.replace(statement, statement + " if True \\\n    else None")
    path = write(project / "train.py", source)
    assert "train.py:5:7: FSDP001" in run("--output-format", "concise", "train.py").stdout
    result = run("--add-noqa", "train.py")
    assert result.stderr == "Added 0 noqa directives.\n"  # a comment there would end the statement
    assert path.read_text(encoding="utf-8") == source


def test_add_noqa_refuses_fix_and_standard_input(project):
    write(project / "train.py", BAD)
    assert run("--add-noqa", "--fix", "train.py").exit_code == 2
    assert run("--add-noqa", "-").exit_code == 2


# --- other commands ---


def test_rule_all_explains_every_rule_and_rule_needs_a_code_or_all(project):
    every = CliRunner().invoke(main, ["rule", "--all"])
    assert every.exit_code == 0
    one = CliRunner().invoke(main, ["rule", "FSDP003"])
    assert one.stdout in every.stdout
    from fsdp2_lint.rule import all_rules

    assert [line.split()[0] for line in every.stdout.splitlines() if line.startswith("FSDP0")] == [
        rule.code for rule in all_rules()
    ]
    assert CliRunner().invoke(main, ["rule"]).exit_code == 2
    assert CliRunner().invoke(main, ["rule", "--all", "FSDP001"]).exit_code == 2


def test_clean_removes_the_caches_below_and_refuses_a_directory_that_is_not_one(project):
    write(project / "pyproject.toml", "[tool.fsdp2-lint]\n")
    write(project / "a" / "bad.py", BAD)
    CliRunner().invoke(main, ["check", "a"])
    CliRunner().invoke(main, ["check", "--cache-dir", "elsewhere", "a"])
    nested = project / "sub" / "deeper" / ".fsdp2-lint-cache"
    nested.mkdir(parents=True)
    (nested / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert (project / ".fsdp2-lint-cache" / "CACHEDIR.TAG").is_file()
    result = CliRunner().invoke(main, ["clean", "--cache-dir", "elsewhere"])
    assert result.exit_code == 0
    assert not (project / ".fsdp2-lint-cache").exists() and not nested.exists()
    assert not (project / "elsewhere").exists()
    assert (project / "a" / "bad.py").is_file()
    precious = project / "precious"
    write(precious / "data.txt", "keep\n")
    refused = CliRunner().invoke(main, ["clean", "--cache-dir", str(precious)])
    assert refused.exit_code == 1 and "is not an fsdp2-lint cache" in refused.stderr
    assert (precious / "data.txt").read_text() == "keep\n"
    assert Path(precious).is_dir()


def test_rule_pages_show_each_example_without_the_tests_expect_marks():
    from fsdp2_lint.rule import all_rules
    from fsdp2_lint.rule_docs import rule_markdown

    for rule in all_rules():
        page = rule_markdown(rule)
        assert "# expect:" not in page, rule.code
        marked = [line for line in rule.invalid[0].strip().splitlines() if "# expect:" in line]
        assert marked, rule.code  # the first example marks its diagnostic: the page keeps that line's code
        for line in marked:
            assert "\n" + line.split("# expect:")[0].rstrip() + "\n" in page, rule.code


def test_watch_lints_again_when_a_file_changes(project):
    path = write(project / "train.py", BAD)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "--watch", "--output-format", "concise", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=project,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout], daemon=True).start()
    seen = []

    def read_until(text: str) -> None:
        while not any(text in line for line in seen):
            seen.append(lines.get(timeout=60))  # queue.Empty: the watcher printed nothing new

    try:
        read_until("Found 1 problem")
        assert "train.py:5:7: FSDP001" in "".join(seen)
        write(path, GOOD)
        later = time.time() + 5
        os.utime(path, (later, later))  # a new mtime even on a coarse clock
        read_until("All checks passed!")
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    stderr = watcher.stderr.read()
    assert "Starting linter in watch mode..." in stderr and "File change detected..." in stderr


def test_watch_refuses_fix_and_standard_input(project):
    write(project / "train.py", BAD)
    assert run("--watch", "--fix", "train.py").exit_code == 2
    assert run("--watch", "-").exit_code == 2
