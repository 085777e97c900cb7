"""`fsdp2-lint confirm` and the torch it runs on: it records the version, and a bad fixture or a
finding of a rule whose failure happens on other versions is not reproducible there, never
confirmed (no processes, no torch: a launcher that runs nothing, hand-written events)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console
from runtime_helpers import START, synthetic_record

from fsdp2_lint.cli import main
from fsdp2_lint.diagnostics import Diagnostic, Severity
from fsdp2_lint.rule import all_rules
from fsdp2_lint.runtime.harness import confirm_fixtures as confirming
from fsdp2_lint.runtime.harness.confirm_script import (
    CONFIRMED,
    NOT_REPRODUCIBLE,
    Confirmation,
    _as_json,
    _print,
    compare,
)
from fsdp2_lint.runtime.harness.fixtures import discover
from fsdp2_lint.runtime.harness.report import as_json, print_table
from fsdp2_lint.runtime.harness.verdict import Verdict
from fsdp2_lint.torch_version import TorchVersion, TorchVersions

NO_SYNC = next(rule for rule in all_rules() if rule.code == "FSDP005")
NO_SYNC_ERROR = {"kind": "exception", "types": ["AttributeError"], "message": "'M' object has no attribute 'no_sync'",
                 "line": 27, "script_lines": [27]}  # fmt: skip


class RunsNothing:
    """A launcher that must not be asked to run anything."""

    device = None
    jobs = 1

    def __enter__(self) -> RunsNothing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def visible_gpus(self) -> int:
        return 0

    def run_all(self, specs: dict) -> list:
        assert not specs, "a fixture that cannot reproduce its failure on this torch was run"
        return []


@pytest.fixture
def fixed_in_2_8(monkeypatch):
    monkeypatch.setattr(NO_SYNC, "torch_versions", TorchVersions(before="2.8"))


def test_a_bad_fixture_of_a_rule_fixed_before_this_torch_is_not_reproducible_and_not_run(
    tmp_path, monkeypatch, fixed_in_2_8
):
    (tmp_path / "FSDP005").mkdir()
    (tmp_path / "FSDP005" / "bad_no_sync.py").write_text("raise SystemExit(1)\n")
    monkeypatch.setattr(confirming, "make_launcher", lambda *args: RunsNothing())
    monkeypatch.setattr(confirming, "installed_torch", lambda: "2.13.0+cpu")
    monkeypatch.setattr(confirming, "installed_torch_version", lambda: TorchVersion(2, 13))

    report = confirming.confirm_fixtures([NO_SYNC], "cpu", 2, 30.0, 1, "pool", tmp_path, tmp_path)

    [result] = report.results
    assert (result.verdict, result.note) == (
        Verdict.NOT_REPRODUCIBLE,
        "its failure happens on torch < 2.8 only; torch 2.13 ran",
    )
    assert result.verdict.outcome == "skipped"  # it does not fail the run, nor counts as a pass
    console = Console(record=True, width=200)
    print_table(console, report.settings, report.results, report.notes, 1.0)
    text = console.export_text()
    assert text.startswith("fsdp2-lint confirm: torch 2.13.0+cpu, device cpu")
    assert (
        "not reproducible on this torch" in text
        and "1 fixtures: 1 not reproducible on this torch — OK (1 skipped)" in text
    )
    document = json.loads(as_json(report.settings, report.results, report.notes, 1.0))
    assert document["torch"] == "2.13.0+cpu" and document["ok"] is True
    assert document["results"][0]["verdict"] == "not reproducible on this torch"


def diagnostic(code: str, line: int) -> Diagnostic:
    return Diagnostic(code, "name", "message", "hint", Severity.ERROR, "train.py", line, 1, line, 10, "")


def test_a_finding_of_a_rule_whose_failure_happens_on_other_torch_versions_is_never_confirmed(fixed_in_2_8):
    run = synthetic_record({0: [START, NO_SYNC_ERROR], 1: [START, NO_SYNC_ERROR]}, reached_lines=frozenset({27}))
    static, _ = compare([diagnostic("FSDP005", 27)], run, all_rules(), torch=TorchVersion(2, 13))
    assert [item.status for item in static] == [NOT_REPRODUCIBLE]  # even with the failure on its line
    static, _ = compare([diagnostic("FSDP005", 27)], run, all_rules(), torch=TorchVersion(2, 7))
    assert [item.status for item in static] == [CONFIRMED]


def test_confirm_script_reports_the_torch_it_ran_on(fixed_in_2_8):
    run = synthetic_record({0: [START, NO_SYNC_ERROR], 1: [START, NO_SYNC_ERROR]}, reached_lines=frozenset({27}))
    static, runtime_only = compare([diagnostic("FSDP005", 27)], run, all_rules(), torch=TorchVersion(2, 13))
    report = Confirmation(Path("train.py"), run, static, runtime_only, True, None, "2.13.0+cpu")
    console = Console(record=True, width=200)
    _print(console, report)
    text = console.export_text()
    assert text.startswith("fsdp2-lint confirm train.py: torch 2.13.0+cpu, device cpu")
    assert "not reproducible on this torch" in text
    assert _as_json(report)["torch"] == "2.13.0+cpu"


def test_a_signature_range_narrows_where_confirm_reproduces_not_where_the_rule_runs(tmp_path):
    """FSDP018's ValueError is new in torch 2.13 (2.11 breaks the tie silently): the rule runs for
    every version, its fixtures are not reproducible before 2.13."""
    tied = next(rule for rule in all_rules() if rule.code == "FSDP018")
    assert tied.torch_versions.unbounded
    assert TorchVersion(2, 11) not in tied.reproducible_on() and TorchVersion(2, 13) in tied.reproducible_on()
    fixtures, _ = discover([tied])
    bad = [fixture for fixture in fixtures if fixture.bad]
    assert bad and all(fixture.torch_versions.excludes(TorchVersion(2, 11)) for fixture in bad)
    assert NO_SYNC.reproducible_on() is NO_SYNC.torch_versions  # no narrower range: the rule's own
    script = tmp_path / "tied.py"
    script.write_text(bad[0].path.read_text())
    linted = CliRunner().invoke(
        main, ["check", "--isolated", "--torch-version", "2.11", "--select", "FSDP018", str(script)]
    )
    assert "FSDP018" in linted.output


class _StateOf211:
    """An FSDP2 state as torch 2.11 has it: one parameter group, or None, and no list."""

    def __init__(self, group: object) -> None:
        self._fsdp_param_group = group


class _StateOf213:
    """An FSDP2 state as torch 2.13 has it: a list of parameter groups."""

    def __init__(self, groups: list) -> None:
        self._fsdp_param_groups = groups


def test_the_probes_read_a_states_parameter_groups_on_each_supported_torch():
    from fsdp2_lint.runtime.rank.probe_core import state_groups  # imports torch: the rest of this file does not

    group, other = object(), object()
    assert state_groups(_StateOf211(group)) == [group]
    assert state_groups(_StateOf211(None)) == []
    assert state_groups(_StateOf213([group, other])) == [group, other]
    assert state_groups(_StateOf213([])) == []  # an empty list is the answer, not a reason to look further


def test_fsdp029s_signature_accepts_the_string_dtype_error_of_each_torch():
    signature = next(rule for rule in all_rules() if rule.code == "FSDP029").signature
    torch_2_13 = "TypeError: to() received an invalid combination of arguments: must be torch.dtype, not str"
    torch_2_11 = (
        "TypeError: empty() received an invalid combination of arguments - got (tuple, dtype=str, "
        "device=torch.device), but expected one of:"
    )
    assert re.search(signature.message, torch_2_13)
    assert re.search(signature.message, torch_2_11)
    assert not re.search(signature.message, torch_2_11.replace("dtype=str", "dtype=torch.dtype"))


class _Log:
    def __init__(self) -> None:
        self.written: list[tuple[str, dict]] = []

    def write(self, kind: str, **fields: object) -> None:
        self.written.append((kind, fields))


def test_a_probe_that_cannot_be_installed_on_this_torch_costs_its_own_evidence_only():
    from fsdp2_lint.runtime.evidence import events
    from fsdp2_lint.runtime.rank.probes import Probes  # imports torch: the rest of this file does not

    core = SimpleNamespace(log=_Log())
    Probes._install_alone(core, "passes", "no_such_module.PassCountProbe")  # a module this torch cannot import
    Probes._install_alone(core, "ties", "tie_probes.NoSuchProbe")  # a name the module lacks
    assert [(kind, fields["probe"]) for kind, fields in core.log.written] == [
        (events.PROBE_ERROR, "passes"),
        (events.PROBE_ERROR, "ties"),
    ]
    first, second = (fields["message"] for _, fields in core.log.written)
    assert first.startswith("not installed on torch ") and "ModuleNotFoundError" in first
    assert "AttributeError" in second and "NoSuchProbe" in second
