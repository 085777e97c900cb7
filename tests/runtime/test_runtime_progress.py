"""`fsdp2-lint confirm` progress on stderr (stdout keeps the table or the JSON alone) and the
results table at 80 columns."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.harness.fixtures import Fixture
from fsdp2_lint.runtime.harness.progress import FixtureProgress, ScriptHeartbeat
from fsdp2_lint.runtime.harness.report import RunSettings, print_table
from fsdp2_lint.runtime.harness.verdict import FixtureResult, Verdict

PROGRESS_LINE = re.compile(r"confirm: (\d+)/(\d+) fixtures done, (\d+) running, \d+ s")


def test_confirm_of_one_rule_shows_progress_on_stderr_and_only_the_json_on_stdout():
    command = [sys.executable, "-c", "from fsdp2_lint.cli import main; main()", "confirm", "--device", "cpu", "--rule", "FSDP005",
               "--output-format", "json"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout)  # the whole of stdout is the report
    assert result.returncode == 0, result.stderr
    total = len(report["results"])
    assert total >= 2 and {r["rule"] for r in report["results"]} == {"FSDP005"}
    lines = [line for line in result.stderr.splitlines() if line.startswith("confirm:")]
    matches = [PROGRESS_LINE.fullmatch(line) for line in lines]
    assert lines and all(matches), result.stderr
    done = [int(m.group(1)) for m in matches if m]
    assert {int(m.group(2)) for m in matches if m} == {total}
    assert done == sorted(done) and done[-1] == total
    assert matches[-1] and matches[-1].group(3) == "0"  # nothing left running at the end
    assert "confirm:" not in result.stdout


def test_plain_progress_prints_at_most_every_few_seconds_and_always_the_last_line():
    now = [100.0]
    stream = io.StringIO()
    progress = FixtureProgress(stream, live=False, every=5.0, clock=lambda: now[0])
    progress.start(4)
    progress.update(1, 2)  # the first line comes at once
    now[0] = 102.0
    progress.update(2, 2)  # too soon after it
    now[0] = 106.0
    progress.update(3, 1)
    now[0] = 107.0
    progress.update(4, 0)  # the last one, however soon
    progress.stop()
    assert stream.getvalue().splitlines() == [
        "confirm: 1/4 fixtures done, 2 running, 0 s",
        "confirm: 3/4 fixtures done, 1 running, 6 s",
        "confirm: 4/4 fixtures done, 0 running, 7 s",
    ]


def test_script_heartbeat_prints_while_running_and_stops_on_exit():
    stream = io.StringIO()
    with ScriptHeartbeat("train.py", stream, every=0.05):
        time.sleep(0.3)
    after = stream.getvalue()
    time.sleep(0.15)
    assert stream.getvalue() == after  # nothing once the run is over
    lines = after.splitlines()
    assert len(lines) >= 2 and all(re.fullmatch(r"confirm: train\.py running, \d+ s", line) for line in lines)


def _results() -> list[FixtureResult]:
    signature = RuntimeSignature("exception", ("AttributeError",), "has no attribute 'no_sync'")
    bad = Fixture("FSDP005", Path("/f/FSDP005/bad_src_engine_getattr_no_sync_in_a_long_named_fixture.py"), signature)
    good = Fixture("FSDP005", Path("/f/FSDP005/good_flag.py"), signature)
    note = "ran to completion without the failure; " * 4
    return [FixtureResult(bad, Verdict.NOT_CONFIRMED, note=note, seconds=12.5),
            FixtureResult(good, Verdict.CLEAN, seconds=0.4)]  # fmt: skip


def _render(width: int) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    settings = RunSettings("cpu", "gloo", 2, "pool", 2, 30.0, "2.13.0+cpu")
    print_table(console, settings, _results(), [], 13.0)
    return console.export_text()


def _column(text: str, index: int) -> str:
    """One column of the table's body read top to bottom, its folds and wraps joined (spaces dropped)."""
    cells = [line.split("│")[index + 1] for line in text.splitlines() if line.startswith("│")]
    return "".join(cell.replace(" ", "") for cell in cells)


def test_the_table_fits_80_columns_and_keeps_every_field():
    text = _render(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Observed evidence" not in text  # the narrow layout, not the wide one squeezed
    fixtures, verdicts, details = (_column(text, index) for index in range(3))
    assert fixtures == "FSDP005bad_src_engine_getattr_no_sync_in_a_long_named_fixtureFSDP005good_flag"
    assert verdicts == "NOTconfirmed12.5sclean0.4s"
    assert details.startswith("expected:AttributeErrormatching/hasnoattribute'no_sync'/observed:ranto")
    assert details.endswith("expected:trainscleanlyobserved:none")


def test_a_wide_console_keeps_the_six_column_table():
    text = _render(200)
    assert "Observed evidence" in text and "Expected failure" in text
    assert max(len(line) for line in text.splitlines()) <= 200
