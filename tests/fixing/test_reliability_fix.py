"""Issue 13, `--fix` keeps README's promises: every byte a fix does not replace stays (form feeds,
lone-CR line endings, a missing final newline...), a killed run's temporary files are removed by
the next run, and a file is never written when that would change more than its text (read-only,
owner, hard links)."""

from __future__ import annotations

import difflib
import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fix_samples import FIXABLE, FIXABLE_SAFE_FIXED, ROUND_TRIP, apply_edits
from samples import write

from fsdp2_lint.analysis.syntax import source_lines
from fsdp2_lint.cli import main
from fsdp2_lint.engine import fix_source, lint_source

# --- bytes the fix does not touch ------------------------------------------------------------

_ENDING = re.compile(r"\r\n|\r|\n")


def _with_endings(*endings: str) -> Callable[[list[str]], list[str]]:
    """Each line ends with the next of ``endings``, in turn."""
    return lambda lines: [_ENDING.sub(endings[i % len(endings)], line) for i, line in enumerate(lines)]


def _prefixed(prefix: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [prefix + line for line in lines]


def _trailing_whitespace(lines: list[str]) -> list[str]:
    return [_ENDING.sub(lambda end: " \t" + end.group(), line) for line in lines]


def _no_final_newline(lines: list[str]) -> list[str]:
    return [*lines[:-1], _ENDING.sub("", lines[-1])]


def _combined(*steps: Callable[[list[str]], list[str]]) -> Callable[[list[str]], list[str]]:
    def apply(lines: list[str]) -> list[str]:
        for step in steps:
            lines = step(lines)
        return lines

    return apply


# Each rewrites a file's lines one for one (the form feeds: before every line, indented or not).
DECORATIONS = {
    "lone-cr": _with_endings("\r"),
    "crlf": _with_endings("\r\n"),
    "mixed-endings": _with_endings("\r\n", "\n", "\r"),
    "form-feed": _prefixed("\f"),
    "space-form-feed": _prefixed(" \f"),
    "trailing-whitespace": _trailing_whitespace,
    "no-final-newline": _no_final_newline,
    "lone-cr-no-final-newline": _combined(_with_endings("\r"), _no_final_newline),
    "everything": _combined(_with_endings("\r", "\r\n"), _prefixed("\f"), _trailing_whitespace),
}


def _plain(text: str) -> str:
    """Undo every decoration but a missing final newline."""
    lines = []
    for line in source_lines(text):
        body = line.rstrip("\r\n")
        lines.append(re.sub(r"^[ \t\f]*\f", "", body).rstrip(" \t") + ("\n" if body != line else ""))
    return "".join(lines)


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["", "bom"])
@pytest.mark.parametrize("decoration", DECORATIONS.values(), ids=DECORATIONS.keys())
@pytest.mark.parametrize("source", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_every_byte_a_fix_does_not_replace_is_kept(source, decoration, bom):
    plain_fixed = fix_source(source.encode(), "train.py", unsafe=True).source.decode()
    decorated = "".join(decoration(source_lines(source)))
    result = fix_source(bom + decorated.encode(), "train.py", unsafe=True)
    assert result.source.startswith(bom) and len(result.fixed) == 1
    fixed = result.source.removeprefix(bom).decode()
    # The fix made the same change, and the file still ends as it did.
    final_newline = decorated.endswith(("\n", "\r"))
    assert _plain(fixed) == (plain_fixed if final_newline else plain_fixed.rstrip("\n"))
    assert fixed.endswith(("\n", "\r")) == final_newline
    # Each line the fix left alone is the decorated file's own, byte for byte.
    before, after = source_lines(decorated), source_lines(fixed)
    matcher = difflib.SequenceMatcher(a=source_lines(source), b=source_lines(plain_fixed), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for i, j in zip(range(i1, i2), range(j1, j2), strict=True) if tag == "equal" else ():
            if i == len(before) - 1 and not final_newline:  # the file's last line: code may follow it now
                assert after[j].rstrip("\r\n") == before[i]
            else:
                assert after[j] == before[i]
    # Fixing again changes nothing; an editor applying the diagnostic's edits gets the same file.
    assert fix_source(result.source, "train.py", unsafe=True).source == result.source
    (diagnostic,) = [d for d in lint_source(bom + decorated.encode(), "train.py") if d.fix is not None]
    assert apply_edits(decorated, diagnostic) == fixed


# --- how the fixed file is written ---------------------------------------------------------------

# FIXABLE: a safe FSDP003 fix, next to an FSDP001 with only an unsafe one (--fix leaves 1 of 2).
FIXED = FIXABLE_SAFE_FIXED
TEMPORARY = ".train.py.*.fsdp2-lint"
HANG_GUARD_S = 60  # a sweep that blocks on a FIFO would never end: the test fails instead of hanging


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(*args: str):
    return CliRunner().invoke(main, ["check", "--isolated", *args])


def _fix_in_subprocess(folder: Path, before_rename: str, **options):
    """``check --fix train.py`` in another process whose ``os.replace`` first runs ``before_rename``."""
    script = f"import os, signal, sys\nreal = os.replace\ndef replace(*args):\n    {before_rename}\n    real(*args)\n"
    script += (
        "os.replace = replace\nfrom fsdp2_lint.cli import main\nmain(['check', '--isolated', '--fix', 'train.py'])\n"
    )
    return subprocess.Popen([sys.executable, "-c", script], cwd=folder, text=True, **options)


def _fix_as_user(folder: Path, user: tuple[int, int]) -> tuple[int, str]:
    """``check --fix train.py`` run by ``user``: the exit status and what it wrote to stderr.

    A forked child, not a new interpreter: another user may not be able to load this one's shared
    library (a pyenv build under /root), and that is not what is being tested."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        status = 2
        try:
            sys.stdout, sys.stderr = open(os.devnull, "w"), open(write_end, "w")
            os.chdir(folder)
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
            main(["check", "--isolated", "--fix", "train.py"])
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 2
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as stderr:
        error = stderr.read()
    _, wait_status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(wait_status), error


def test_a_run_killed_before_the_rename_leaves_a_temporary_file_the_next_run_removes(project):
    path = write(project / "train.py", FIXABLE)
    killed = _fix_in_subprocess(project, "os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.wait() == -signal.SIGKILL
    assert len(list(project.glob(TEMPORARY))) == 1 and path.read_text() == FIXABLE
    write(project / "clean.py", "x = 1\n")
    assert check("--fix", "clean.py").exit_code == 0  # any --fix run over that folder
    assert sorted(p.name for p in project.iterdir()) == ["clean.py", "train.py"]
    killed = _fix_in_subprocess(project, "os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.wait() == -signal.SIGKILL
    assert check("--fix", "train.py").exit_code == 1
    assert path.read_text() == FIXED and sorted(p.name for p in project.iterdir()) == ["clean.py", "train.py"]


def test_a_concurrent_runs_temporary_file_is_left_to_it(project):
    path = write(project / "train.py", FIXABLE)
    write(project / "clean.py", "x = 1\n")
    writer = _fix_in_subprocess(
        project, "print('renaming', flush=True); sys.stdin.readline()", stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert writer.stdout.readline() == "renaming\n"  # its temporary file is written, not yet renamed
    (live,) = project.glob(TEMPORARY)
    assert check("--fix", "clean.py").exit_code == 0
    assert live.exists()
    output, _ = writer.communicate("go on\n")
    assert writer.returncode == 1 and "Found 2 problems (1 fixed, 1 remaining)." in output
    assert path.read_text() == FIXED and sorted(p.name for p in project.iterdir()) == ["clean.py", "train.py"]


def test_a_named_pipe_named_like_a_temporary_file_is_left_alone_without_blocking(project):
    """Only regular files are swept: opening a FIFO to lock it would wait for a writer forever."""
    write(project / "clean.py", "x = 1\n")
    pipe = project / ".train.py.abcd1234.fsdp2-lint"
    os.mkfifo(pipe)
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--isolated", "--fix", "clean.py"]
    assert subprocess.run(command, cwd=project, capture_output=True, timeout=HANG_GUARD_S).returncode == 0
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


@pytest.mark.parametrize(
    "taken_by", [None, "older", "newer"], ids=["swept", "taken-by-an-older-file", "taken-by-a-newer-file"]
)
def test_a_temporary_file_swept_before_the_writer_locks_it_is_replaced_by_a_new_one(project, monkeypatch, taken_by):
    """Another run's sweep can remove a temporary file between its creation and its lock (and a
    third run's file take its name: one created before or after it): the writer must write
    through a temporary file of its own."""
    older = write(project / "older", "another run's text")
    path = write(project / "train.py", FIXABLE)
    real_flock = fcntl.flock
    swept = []

    def sweep_first(descriptor, operation):
        if not swept:
            (temporary,) = project.glob(TEMPORARY)
            temporary.unlink()
            if taken_by == "older":
                older.replace(temporary)
            elif taken_by == "newer":
                temporary.write_text("another run's text")
            swept.append(temporary)
        real_flock(descriptor, operation)

    monkeypatch.setattr(fcntl, "flock", sweep_first)
    assert check("--fix", "train.py").exit_code == 1
    assert swept and path.read_text() == FIXED


def test_a_file_system_without_locks_still_gets_its_fixes_written(project, monkeypatch):
    """NFS without its lock service refuses every ``flock`` (ENOLCK): the writer goes on unlocked."""
    path = write(project / "train.py", FIXABLE)

    def no_locks(descriptor, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert check("--fix", "train.py").exit_code == 1
    assert path.read_text() == FIXED and sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_a_read_only_file_is_left_as_it_is_and_its_problems_count(project):
    path = write(project / "train.py", FIXABLE)
    path.chmod(0o444)  # the folder is writable; whoever runs this (root too) could replace the file
    result = check("--fix", "train.py")
    assert result.exit_code == 1
    assert result.stderr == "error: train.py: the file is read-only; it was left as it is\n"
    assert "Found 2 problems (2 errors)." in result.stdout
    assert path.read_text() == FIXABLE and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_a_hard_linked_file_is_left_as_it_is_rather_than_split(project):
    path = write(project / "train.py", FIXABLE)
    os.link(path, project / "other_name.py")
    result = check("--fix", "train.py")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: train.py: the file has 2 names (hard links), and the others would keep the old text; "
        "it was left as it is\n"
    )
    assert path.read_text() == (project / "other_name.py").read_text() == FIXABLE
    assert os.stat(path).st_nlink == 2


def test_the_files_owner_group_and_mode_are_kept_or_it_is_left_as_it_is(project):
    path = write(project / "train.py", FIXABLE)
    root = os.geteuid() == 0
    owner = (4242, 4343) if root else (os.geteuid(), os.getegid())  # root fixes another user's file
    os.chown(path, *owner)
    path.chmod(0o664)
    assert check("--fix", "train.py").exit_code == 1
    status = path.stat()
    assert path.read_text() == FIXED and (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (*owner, 0o664)
    if root:  # and another user, who may write the file and its folder, cannot keep root as its owner
        shared = Path(tempfile.mkdtemp())
        try:
            shared.chmod(0o777)
            path = write(shared / "train.py", FIXABLE)
            path.chmod(0o666)
            returncode, error = _fix_as_user(shared, owner)
            assert returncode == 1
            assert error == "error: train.py: its owner and group cannot be kept by this user; it was left as it is\n"
            assert path.read_text() == FIXABLE and (path.stat().st_uid, path.stat().st_gid) == (0, 0)
            assert sorted(p.name for p in shared.iterdir()) == ["train.py"]
        finally:
            shutil.rmtree(shared)
