"""The wheel: rules/ and fixtures/ ship inside the fsdp2_lint namespace, and the core needs no torch."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from fsdp2_lint.rule import all_rules

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_rules_and_fixtures_under_fsdp2_lint_only(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("fsdp2_lint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"fsdp2_lint", wheel.name.split("-py3")[0] + ".dist-info"}
    shipped_rules = {name.rsplit("/", 1)[1] for name in names if name.startswith("fsdp2_lint/rules/")}
    assert {f"{sys.modules[rule.__module__].__name__.rsplit('.', 1)[1]}.py" for rule in all_rules()} <= shipped_rules
    shipped_fixtures = sorted(name for name in names if name.startswith("fsdp2_lint/fixtures/FSDP"))
    on_disk = sorted(  # the one-file fixtures and every file of the fixture projects (ENTRY included)
        f"fsdp2_lint/{path.relative_to(ROOT).as_posix()}"
        for path in (ROOT / "fixtures").glob("FSDP*/**/*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    assert any(name.endswith("/ENTRY") for name in on_disk)
    assert shipped_fixtures == on_disk
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    requirements = [
        line
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    core = [line for line in requirements if "extra ==" not in line]
    assert core and not any("torch" in line for line in core)
