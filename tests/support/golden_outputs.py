"""The differential safety net: what `check` prints over everything the project can lint.

Golden files in tests/golden/ hold `check --output-format json` over the shipped fixtures, the rules'
VALID/INVALID examples, the style cases and the installed torch package's sources, and
`check --diff --unsafe-fixes` over the bad fixtures. tests/rules/test_golden.py regenerates them and
compares. A change that alters output on purpose (a message, a new rule, an analysis change)
regenerates them in the same commit, so the diff shows what changed:

    python tests/support/golden_outputs.py --update
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from fixture_marks import FIXTURES, ROOT

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TORCH_VERSION_FILE = GOLDEN / "torch_version.txt"


def check(arguments: list[str], cwd: Path) -> str:
    """stdout of `fsdp2-lint check ARGUMENTS` run in CWD, with no configuration and no cache."""
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--no-cache", *arguments]
    run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"{command} exited {run.returncode}: {run.stderr}")
    return run.stdout


def _lint_written(files: dict[str, str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in files.items():
            (Path(tmp) / name).write_text(source)
        return check(["--output-format", "json", "."], Path(tmp))


def fixtures_json() -> str:
    return check(["--output-format", "json", FIXTURES.name], ROOT)


def fixtures_unsafe_diff() -> str:
    bad = sorted(str(path.relative_to(ROOT)) for path in FIXTURES.glob("FSDP*/bad*.py"))
    return check(["--diff", "--unsafe-fixes", *bad], ROOT)


def rule_examples_json() -> str:
    from fsdp2_lint.rule import all_rules

    files = {}
    for rule in all_rules():
        for kind, sources in (("valid", rule.valid), ("invalid", rule.invalid)):
            for index, source in enumerate(sources):
                files[f"{rule.code}_{kind}{index}.py"] = source
    return _lint_written(files)


def style_cases_json() -> str:
    from style_cases import CASES

    return _lint_written({f"{name}.py": textwrap.dedent(source) for name, source in CASES.items()})


def torch_version() -> str:
    import torch

    return torch.__version__ + "\n"


def torch_sources_json() -> str:
    """The installed torch package's sources, copied out of site-packages (which the walk skips)."""
    import torch

    package = Path(torch.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        for source in package.rglob("*.py"):
            copy = Path(tmp) / "torch" / source.relative_to(package)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(source.read_bytes())
        return check(["--output-format", "json", "torch"], Path(tmp))


OUTPUTS: dict[str, Callable[[], str]] = {
    "fixtures.json": fixtures_json,
    "fixtures_unsafe.diff": fixtures_unsafe_diff,
    "rule_examples.json": rule_examples_json,
    "style_cases.json": style_cases_json,
    "torch_sources.json": torch_sources_json,
}


def update() -> None:
    GOLDEN.mkdir(exist_ok=True)
    TORCH_VERSION_FILE.write_text(torch_version())
    for name, produce in OUTPUTS.items():
        (GOLDEN / name).write_text(produce())
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: python {sys.argv[0]} --update   (rewrites {GOLDEN})")
    update()
