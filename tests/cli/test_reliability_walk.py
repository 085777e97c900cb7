"""Nothing on disk takes a run down (issue 13, group A): symbolic link cycles, links that lead
nowhere, FIFOs and devices, unreadable files and directories, broken configuration files.

Each case runs the command line in a child process, as a user runs it: a FIFO can block it, a
device can exhaust its memory (capped here), and permission bits must bind it even when the tests
run as root (the child then drops the capabilities that let root read anything).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from samples import BAD

HANG_GUARD_S = 60  # a run that blocks on a FIFO would never end: the test fails instead of hanging
MEMORY_CAP = 2 << 30  # a run that reads /dev/zero fails at 2 GiB instead of exhausting the machine
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
PERMISSION_DENIED_DIRECTORY = "cannot read directory: Permission denied; no file in it was checked"


def _as_a_user() -> None:
    """In the child, before it runs: cap its memory and, as root, drop the capabilities that
    override file permissions (from the bounding set, so the exec'd Python never has them)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def lint(*args: str) -> tuple[int, list[tuple[str, ...]]]:
    """Exit status, and (path, code) of each diagnostic, with the message for FSDP000."""
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "--output-format", "json", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, preexec_fn=_as_a_user)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (exit {done.returncode}):\n{done.stderr[-3000:]}")
    found = [(d["path"], d["code"]) + ((d["message"],) if d["code"] == "FSDP000" else ()) for d in report]
    return done.returncode, found


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for folder, directories, _ in os.walk(tmp_path):  # give back what a test locked, so it can be removed
        for name in directories:
            os.chmod(os.path.join(folder, name), 0o755)


def bind_socket(name: str) -> None:
    """A Unix socket file ``name`` in the working directory (relative: a socket path must be short)."""
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)


def device_like(system_device: str):
    """A maker of a character device that reads as ``system_device`` does. As root it is a node of our
    own: a regression that wrote through a link to /dev/null would replace the machine's (only root can)."""

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.stat(system_device).st_rdev)
        else:
            path.symlink_to(system_device)

    return make


def write(path: Path, text: str = BAD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_symbolic_link_cycle_is_walked_once(project):
    write(project / "bad.py")
    write(project / "sub" / "bad.py")
    (project / "self").symlink_to(".")
    (project / "sub" / "up").symlink_to("..")
    (project / "sub" / "again").symlink_to("../sub")
    assert lint(".") == (1, [("bad.py", "FSDP001"), ("sub/bad.py", "FSDP001")])


def test_links_that_lead_nowhere_and_special_files_in_a_walk_are_passed_over(project):
    write(project / "bad.py")
    (project / "loop.py").symlink_to("loop.py")
    (project / "dangling.py").symlink_to("missing.py")
    device_like("/dev/zero")(project / "zero.py")
    os.mkfifo(project / "fifo.py")
    assert lint(".") == (1, [("bad.py", "FSDP001")])


@pytest.mark.parametrize("mode", [0o000, 0o100, 0o400], ids=["no-access", "search-only", "list-only"])
def test_a_directory_the_walk_cannot_read_is_reported_once_and_the_rest_linted(project, mode):
    write(project / "bad.py")
    write(project / "locked" / "bad.py")
    write(project / "locked" / "inner" / "bad.py")
    (project / "locked").chmod(mode)
    unreadable = ("locked", "FSDP000", PERMISSION_DENIED_DIRECTORY)
    assert lint(".") == (1, [("bad.py", "FSDP001"), unreadable])  # in the order of the walk


@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
@pytest.mark.parametrize(
    "make, kind",
    [
        (os.mkfifo, "a named pipe (FIFO)"),
        (device_like("/dev/zero"), "a character device"),
        (device_like("/dev/null"), "a character device"),
        (lambda path: bind_socket(path.name), "a socket"),
    ],
    ids=["fifo", "dev-zero", "dev-null", "socket"],
)
def test_a_special_file_named_explicitly_is_fsdp000_and_the_rest_linted(project, make, kind, fix):
    write(project / "bad.py")
    make(project / "special.py")
    status, found = lint(*(["--fix"] if fix else []), "special.py", "bad.py")
    special = ("special.py", "FSDP000", f"cannot read file: {kind}, not a regular file")
    assert (status, found) == (1, [special, ("bad.py", "FSDP001")])


@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
def test_paths_that_cannot_be_linted_are_reported_in_command_line_order(project, fix):
    write(project / "a.py")
    write(project / "b.py")
    os.mkfifo(project / "pipe.py")
    status, found = lint(*(["--fix"] if fix else []), "b.py", "missing.py", "a.py", "pipe.py")
    assert status == 1
    assert [path for path, *_ in found] == ["b.py", "missing.py", "a.py", "pipe.py"]


@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
@pytest.mark.parametrize("locked", ["locked.py", "closed/bad.py"], ids=["unreadable-file", "unsearchable-directory"])
def test_an_unreadable_file_named_explicitly_is_fsdp000_and_the_rest_linted(project, locked, fix):
    write(project / "bad.py")
    write(project / locked).chmod(0o000)
    (project / "closed").mkdir(exist_ok=True)
    (project / "closed").chmod(0o600)  # listable, but nothing in it can be reached
    status, found = lint(*(["--fix"] if fix else []), locked, "bad.py")
    assert (status, found) == (1, [(locked, "FSDP000", "cannot read file: Permission denied"), ("bad.py", "FSDP001")])


@pytest.mark.parametrize(
    "make, reason",
    [
        (os.mkfifo, "not a regular file"),
        (
            lambda path: path.write_bytes(b"[tool.fsdp2-lint]\nselect = ['FSDP\xff']\n"),
            "'utf-8' codec can't decode byte 0xff",
        ),
        (
            lambda path: path.write_text("a = " + "[" * 100_000 + "]" * 100_000),
            # tomllib runs out of recursion; tomli (Python 3.10) refuses past its own limit
            "maximum recursion depth"
            if sys.version_info >= (3, 11)
            else "TOML inline arrays/tables are nested more than the allowed 400 levels",
        ),
    ],
    ids=["fifo", "not-utf8", "nested-too-deep"],
)
def test_a_configuration_file_that_cannot_be_read_is_a_configuration_error_naming_it(project, make, reason):
    write(project / "bad.py")
    make(project / "pyproject.toml")
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--no-cache", "--config", "pyproject.toml", "bad.py"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, preexec_fn=_as_a_user)
    assert done.returncode == 2
    assert f"Error: pyproject.toml: cannot read configuration: {reason}" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_excluded_directory_is_not_walked_so_what_it_holds_cannot_fail_the_run(project):
    """`exclude` prunes a directory: a folder inside it that cannot be read is never reported."""
    write(project / "bad.py")
    write(project / "generated" / "bad.py")
    write(project / "generated" / "locked" / "bad.py")
    (project / "pyproject.toml").write_text('[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    (project / "generated" / "locked").chmod(0o000)
    assert lint(".") == (1, [("bad.py", "FSDP001")])
    (project / "generated" / "locked").chmod(0o755)
    (project / "generated").chmod(0o000)
    assert lint(".") == (1, [("bad.py", "FSDP001")])
