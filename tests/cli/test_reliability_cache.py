"""Issue 13, the cache never hides a finding: an entry this cache did not write (not a list of
diagnostics, nested past any limit, a FIFO, signed for another cache) is a miss, and a cache that
came with the checked-out tree is not used, while one restored by CI's own cache is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import cache_project
import pytest
from click.testing import CliRunner

from fsdp2_lint.cache import DEFAULT_CACHE_DIR, Cache
from fsdp2_lint.cli import main

project, parses = cache_project.project, cache_project.parses  # fixtures: three bad files in pkg/; parse count

ARGS = ["check", "--jobs", "1", "--output-format", "json", "pkg"]


def check(*args: str):
    return CliRunner().invoke(main, [*ARGS, *args])


def _entries(root) -> list:
    entries = sorted((root / DEFAULT_CACHE_DIR).rglob("*.json"))
    assert len(entries) == 3  # the three bad files of the project
    return entries


NOT_DIAGNOSTICS = {
    "object": b"{}",
    "string": b'"[]"',
    "list-of-lists": b"[[]]",
    "deeply-nested": b"[" * 200_000 + b"]" * 200_000,
}


@pytest.mark.parametrize("content", NOT_DIAGNOSTICS.values(), ids=NOT_DIAGNOSTICS.keys())
def test_an_entry_that_is_not_a_list_of_diagnostics_is_a_miss(project, parses, content):
    first = check()
    assert first.exit_code == 1 and len(json.loads(first.stdout)) == 3
    for entry in _entries(project):
        entry.write_bytes(content)
    again = check()
    assert (again.exit_code, again.stdout) == (1, first.stdout) and parses[0] == 6
    assert check().stdout == first.stdout and parses[0] == 6  # rewritten: hits again


def test_an_entry_replaced_by_a_fifo_is_a_miss_not_a_hang(project):
    command = [sys.executable, "-m", "fsdp2_lint", *ARGS]
    first = subprocess.run(command, capture_output=True, text=True, timeout=60)
    entries = _entries(project)
    entries[0].unlink()
    os.mkfifo(entries[0])
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)  # no writer: a read would block
    assert (again.returncode, again.stdout) == (1, first.stdout)
    assert entries[0].is_file()  # rewritten as an entry


def test_entries_signed_by_another_cache_or_off_schema_are_misses(project, parses):
    from fsdp2_lint.cache import _sign

    first = check()
    entries = _entries(project)
    payload = json.loads(entries[0].read_bytes().partition(b"\n")[2])
    extra = json.dumps([{**payload[0], "unexpected": True}]).encode()
    forged = {entries[0]: (os.urandom(32), b"[]"), entries[1]: (None, extra), entries[2]: (None, b'{"code": []}')}
    secret = bytes.fromhex((project / DEFAULT_CACHE_DIR / "key").read_text())
    for entry, (key, body) in forged.items():
        entry.write_bytes(_sign(key or secret, entry.stem, body) + b"\n" + body)
    assert check().stdout == first.stdout and parses[0] == 6


def _git(*args: str, cwd) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    return subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_cache_committed_to_the_repository_is_not_used(project, monkeypatch):
    _git("init", "-q", cwd=project)
    first = check()
    cache = Cache(project / DEFAULT_CACHE_DIR)
    for entry in _entries(project):
        cache.store(entry.stem, [])  # "no findings", for each bad file, as fsdp2-lint itself writes it
    assert check().exit_code == 0  # the author's own cache, which they may write as they like
    _git("add", "-A", ".", cwd=project)
    _git("add", "-f", DEFAULT_CACHE_DIR, cwd=project)  # past the cache's own .gitignore
    _git("commit", "-q", "-m", "cache", cwd=project)
    _git("clone", "-q", str(project), "checkout", cwd=project)
    monkeypatch.chdir(project / "checkout")  # CI: a fresh checkout of that commit
    result = check()
    assert (result.exit_code, result.stdout) == (1, first.stdout)
    warning = (
        f"warning: the cache in {project / 'checkout' / DEFAULT_CACHE_DIR} is not used: git tracks "
        "6 files in it, so it came with the checked-out tree and could hide findings "
        f"(untrack it: git rm -r --cached {project / 'checkout' / DEFAULT_CACHE_DIR})\n"
    )
    assert result.stderr == warning  # once, for three entries


def test_a_cache_restored_by_ci_is_used(project, parses, monkeypatch):
    _git("init", "-q", cwd=project)
    _git("add", "-A", ".", cwd=project)
    _git("commit", "-q", "-m", "code", cwd=project)
    first = check()  # an earlier CI job: it lints, then the CI system saves the cache directory
    assert _git("status", "--porcelain", cwd=project) == ""  # the cache stays out of the repository
    _git("clone", "-q", str(project), "checkout", cwd=project)
    shutil.copytree(project / DEFAULT_CACHE_DIR, project / "checkout" / DEFAULT_CACHE_DIR)  # restored
    monkeypatch.chdir(project / "checkout")
    result = check()
    assert (result.exit_code, result.stdout, result.stderr) == (1, first.stdout, "")
    assert parses[0] == 3  # the first job's: every answer came from the restored cache


def test_a_git_marker_git_does_not_recognise_is_no_repository(project, parses):
    """A `.git` that is no repository (a test's marker, a broken copy) brought no cache with it:
    the cache is used, without a warning."""
    (project / ".git").mkdir()
    first = check()
    again = check()
    assert (again.exit_code, again.stdout, again.stderr) == (1, first.stdout, "")
    assert parses[0] == 3
