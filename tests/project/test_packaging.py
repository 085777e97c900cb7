"""The wheel: rules/ and fixtures/ ship inside the fsdp2_lint namespace, the core needs no torch, and
README's way to build and install one from a clone works."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

from samples import BAD

from fsdp2_lint.rule import all_rules

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

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


def test_supported_pythons_agree_across_classifiers_requires_python_ruff_and_readme():
    """3.10 to 3.13, said once each way: the classifiers, requires-python's lower bound, the
    syntax ruff keeps the code to, and README's sentence (the suite runs on the oldest and newest)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    prefix = "Programming Language :: Python :: 3."
    minors = [int(c.removeprefix(prefix)) for c in pyproject["project"]["classifiers"] if c.startswith(prefix)]
    assert minors == list(range(minors[0], minors[-1] + 1)) == [10, 11, 12, 13]
    assert pyproject["project"]["requires-python"] == f">=3.{minors[0]}"
    assert pyproject["tool"]["ruff"]["target-version"] == f"py3{minors[0]}"
    readme = (ROOT / "README.md").read_text()
    assert f"Python 3.{minors[0]} to 3.{minors[-1]} are supported." in readme


def test_readme_wheel_commands_build_a_wheel_that_installs_and_lints_in_a_fresh_environment(tmp_path):
    """README's Install section: `pip wheel ... && pip install dist/...whl`, run verbatim in a copy
    of the checkout; offline, so the build uses this environment's setuptools (no isolation) and
    the fresh environment finds the dependencies in this one's site-packages (no index)."""
    section = (ROOT / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"^pip wheel .+$", section, re.M)
    build, install = command.split(" && ")
    clone = tmp_path / "clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    here = {
        **offline,
        "PIP_NO_BUILD_ISOLATION": "0",
        "PATH": sysconfig.get_path("scripts") + os.pathsep + os.environ["PATH"],
    }
    built = subprocess.run(build, shell=True, cwd=clone, env=here, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr

    fresh = tmp_path / "env"
    venv.create(fresh, with_pip=True)
    (site,) = fresh.glob("lib/python*/site-packages")
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")  # libcst, click, rich, pathspec
    there = {**offline, "PATH": str(fresh / "bin") + os.pathsep + os.environ["PATH"]}
    installed = subprocess.run(install, shell=True, cwd=clone, env=there, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    (tmp_path / "train.py").write_text(BAD)
    shutil.rmtree(clone)  # the installed wheel, not the clone, is what runs
    linted = subprocess.run(
        [str(fresh / "bin" / "fsdp2-lint"), "check", "--no-cache", "--output-format", "concise", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert linted.returncode == 1 and "train.py:5:7: FSDP001 " in linted.stdout, linted.stdout + linted.stderr
    assert (
        str(fresh)
        in subprocess.run(
            [str(fresh / "bin" / "python"), "-c", "import fsdp2_lint; print(fsdp2_lint.__file__)"],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
