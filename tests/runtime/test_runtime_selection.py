"""Which rules `confirm --rule` selects, checked once before anything runs, and their fixtures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.evidence.registry import EVIDENCE_KINDS
from fsdp2_lint.runtime.harness.fixtures import discover
from fsdp2_lint.runtime.harness.selection import UnknownRule, select_rules

RULES = {rule.code: rule for rule in all_rules()}


def confirm(*args: str, cwd) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=120)


def test_no_codes_select_every_rule_and_every_signature_is_observable():
    assert select_rules(()) == all_rules()


def test_codes_are_read_as_fsdp2_lint_rule_reads_them_and_each_rule_comes_once_in_code_order():
    assert select_rules((" fsdp005", "FSDP001", "FSDP005")) == (RULES["FSDP001"], RULES["FSDP005"])


def test_unknown_codes_are_refused_together():
    with pytest.raises(UnknownRule, match=r"^unknown rule\(s\): FSDP998, FSDP999$"):
        select_rules(("FSDP999", "FSDP001", "fsdp998"))


def test_a_rule_whose_signature_no_evidence_kind_observes_is_refused(monkeypatch):
    monkeypatch.delitem(EVIDENCE_KINDS, "hang")
    hanging = [code for code, rule in RULES.items() if rule.signature.evidence == "hang"]
    assert hanging
    with pytest.raises(UnknownRule, match=f"runtime signature of {hanging[0]} \\(hang\\)"):
        select_rules((hanging[0],))
    with pytest.raises(UnknownRule, match="no evidence kind in this harness"):
        select_rules(())


@pytest.mark.parametrize("script", [False, True], ids=["fixtures", "script"])
def test_an_unknown_rule_is_a_usage_error_before_anything_runs(tmp_path, script):
    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    result = confirm("--keep-runs", "runs", "--rule", "FSDP999", *(["train.py"] if script else []), cwd=tmp_path)
    assert result.returncode == 2
    assert "Error: Invalid value for '--rule': unknown rule(s): FSDP999" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["train.py"]  # no run directory, no run


def test_fixtures_of_the_selected_rules_and_notes_on_what_is_missing(tmp_path):
    for name in ("FSDP001/bad_a.py", "FSDP001/good_b.py", "FSDP999/bad_c.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    fixtures, notes = discover(select_rules(("FSDP001", "FSDP002")), tmp_path)
    assert [(fixture.rule, fixture.name, fixture.bad) for fixture in fixtures] == [
        ("FSDP001", "bad_a", True),
        ("FSDP001", "good_b", False),
    ]
    assert notes == ["FSDP002 has no fixtures"]
    _, notes = discover(select_rules(()), tmp_path)
    assert notes[-1] == "FSDP999: fixtures without a rule (not run)"  # only when every rule is selected
