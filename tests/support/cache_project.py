"""Fixtures of the cache tests: a project of three bad files and an unrelated one in ``pkg/``, and
how many files libcst parsed (the linter runs in this process with --jobs 1)."""

from __future__ import annotations

import libcst
import pytest
from fixture_marks import FIXTURES

BAD_FILE = (FIXTURES / "FSDP001" / "bad_module_level.py").read_text()


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FSDP2_LINT_CACHE_DIR", raising=False)
    (tmp_path / "pkg").mkdir()
    for index in range(3):
        (tmp_path / "pkg" / f"bad{index}.py").write_text(BAD_FILE)
    (tmp_path / "pkg" / "unrelated.py").write_text("x = 1\n")
    return tmp_path


@pytest.fixture
def parses(monkeypatch):
    """How many files libcst parsed."""
    count = [0]
    real = libcst.parse_module

    def counting(source, *args, **kwargs):
        count[0] += 1
        return real(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting)
    return count
