"""README's promises: its quick-start commands are what CI runs, and its rule table is current."""

from __future__ import annotations

import re

from click.testing import CliRunner
from fixture_marks import ROOT

from fsdp2_lint.cli import main

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
