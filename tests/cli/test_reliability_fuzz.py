"""The seeded fuzz test: a small budget of mutated fixtures and generated programs, each checked for
the properties in `fuzzing.py` (no crash or internal error, valid code never blamed, every output
format renders, fixes keep the file valid and are idempotent). `bench/fuzz.py` runs a long budget."""

from __future__ import annotations

import fuzzing
import pytest
from fuzzing import check, fuzz, program, programs

from fsdp2_lint.engine import FixResult

SEEDS = (0, 1, 2)
BUDGET = 120  # programs per seed: a few seconds


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_programs_keep_every_property(seed):
    checked, problems = fuzz(seed, BUDGET)
    assert checked == BUDGET
    assert problems == []


def test_programs_are_reproducible_from_seed_and_index():
    assert [p.source for p in programs(7, 20)] == [program(7, index).source for index in range(20)]
    assert program(7, 3).source != program(8, 3).source


def test_budget_covers_every_generator():
    made = {p.how for p in programs(SEEDS[0], BUDGET)}
    assert made == {"token", "line", "layout", "grammar"}


def test_a_broken_fix_is_reported(monkeypatch):
    """The checker is not vacuous: a fix that leaves invalid Python is a problem, named by program."""
    monkeypatch.setattr(fuzzing, "fix_source", lambda data, path, unsafe: FixResult(b"def f(:\n", (), ()))
    assert check(program(0, 5)) == [f"seed 0 program 5 ({program(0, 5).how}): a fix broke the file"]
