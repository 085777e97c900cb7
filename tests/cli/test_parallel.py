"""`check --jobs`: parallel analysis gives the serial run's output, small inputs stay in-process,
and no syntax tree outlives its file."""

from __future__ import annotations

import gc
import shutil

import cache_project
import libcst
import pytest
from click.testing import CliRunner
from fixture_marks import FIXTURES
from samples import BAD, BAD_WITH_FIX, write

from fsdp2_lint import isolation
from fsdp2_lint.cli import main
from fsdp2_lint.pipeline import PARALLEL_THRESHOLD, LintTask, lint_files
from fsdp2_lint.rule import all_rules

parses = cache_project.parses  # fixture: how many files libcst parsed


@pytest.fixture
def pools(monkeypatch):
    """The worker counts of the process pools the linter starts."""
    started: list[int] = []
    real = isolation.run_isolated

    def recording(work, items, workers, limit):
        started.append(workers)
        return real(work, items, workers, limit)

    monkeypatch.setattr(isolation, "run_isolated", recording)  # imported by the pipeline when it starts workers
    return started


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """Fixtures of several rules, a syntax error and an undecodable file among them."""
    monkeypatch.chdir(tmp_path)
    for code in ("FSDP001", "FSDP003", "FSDP005", "FSDP007", "FSDP010"):
        shutil.copytree(FIXTURES / code, tmp_path / "src" / code, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "src" / "FSDP003" / "broken.py").write_text("from torch.distributed.fsdp import fully_shard\ndef f(:\n")
    (tmp_path / "src" / "FSDP005" / "latin.py").write_bytes(b"# coding: ascii\nfully_shard(m)  # \xff\n")
    return tmp_path


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", *args])
    return result.exit_code, result.output


def test_parallel_output_is_the_serial_output(tree, pools):
    serial = check("--jobs", "1", "src")
    assert pools == []
    assert serial[0] == 1 and '"FSDP000"' in serial[1] and '"FSDP007"' in serial[1]
    assert check("--jobs", "2", "src") == serial
    assert check("--jobs", "3", "src") == serial
    assert check("src") == serial  # default: every core
    assert pools[:2] == [2, 3] and len(pools) == 3


def test_small_inputs_are_analysed_in_process(tmp_path, pools):
    files = sorted(FIXTURES.glob("FSDP00[1-3]/bad_*.py"))[: PARALLEL_THRESHOLD - 1]
    tasks = [LintTask(path, path.name, all_rules()) for path in files]
    assert sum(lint_files(tasks, jobs=4), []) and pools == []
    many = [LintTask(path, path.name, all_rules()) for path in sorted(FIXTURES.glob("FSDP*/bad_*.py"))]
    assert len(many) >= PARALLEL_THRESHOLD
    assert lint_files(many, jobs=2) == lint_files(many, jobs=1) and pools == [2]


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_file_gets_its_own_findings_in_the_order_given_whatever_their_sizes(tmp_path, jobs):
    """Work is scheduled largest file first; the results come back in the order the files were given."""
    files = []
    for index in range(PARALLEL_THRESHOLD):
        padding = "# padding\n" * (50 * (index % 5))  # sizes that neither rise nor fall with the index
        body = BAD if index % 2 else BAD_WITH_FIX
        files.append(write(tmp_path / f"f{index:02}.py", padding + body))
    tasks = [LintTask(path, path.name, all_rules()) for path in files]
    results = lint_files(tasks, jobs=jobs)
    assert [{d.path for d in found} for found in results] == [{path.name} for path in files]
    expected = [["FSDP001"] if index % 2 else ["FSDP001", "FSDP003"] for index in range(len(files))]
    assert [[d.code for d in found] for found in results] == expected


def _live_modules() -> int:
    gc.collect()
    return sum(type(obj) is libcst.Module for obj in gc.get_objects())


def test_no_syntax_tree_outlives_its_file(parses):
    before = _live_modules()
    paths = sorted(FIXTURES.glob("FSDP00[1-5]/*.py"))
    diagnostics = sum(lint_files([LintTask(path, path.name, all_rules()) for path in paths], jobs=1), [])
    assert diagnostics and parses[0] > 30
    assert _live_modules() == before
