"""A file of many mutually calling helpers costs time linear in its functions (issue 13, group A;
issue 14): a same-file call is expanded once per distinct input and replayed from its summary after
that, within a bound per function and per file (:mod:`fsdp2_lint.analysis.interpreter.summaries`),
so an exponential call tree (sympy's gruntz.py, numpy's crackfortran.py) cannot take a run or an
editor down, and what comes after such helpers is still analysed."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from samples import CLUSTERS, HELPERS

from fsdp2_lint.analysis.interpreter import core, summaries
from fsdp2_lint.engine import lint_source


def interpreted(source: str) -> tuple[core.Interpreter, int]:
    """The interpreter that ran ``source``, and the number of entry points it analysed."""
    interpreter = core.Interpreter(cst.parse_module(source), source.encode())
    return interpreter, len(interpreter.run())


@pytest.mark.parametrize("kind", CLUSTERS)
def test_mutually_calling_helpers_stay_within_the_bound(kind):
    make_cluster, call = CLUSTERS[kind]
    interpreter, entry_points = interpreted(f"from torch.distributed.fsdp import fully_shard\n{make_cluster()}{call}\n")
    bound = interpreter.summaries
    assert entry_points <= HELPERS + 1  # the module body and each helper
    assert len(bound.expansions) == HELPERS
    assert max(bound.expansions.values()) <= summaries.MAX_EXPANSIONS_PER_FUNCTION
    assert 0 < bound.replayed <= summaries.MAX_REPLAYED
    assert interpreter.steps <= summaries.MAX_STEPS


def misuse_after_helpers(kind: str) -> tuple[str, list[tuple[str, int, str]]]:
    """A file that calls its helpers at module level, then has a misuse in ``main``; and the
    (code, line, message) of that misuse's diagnostic."""
    make_cluster, call = CLUSTERS[kind]
    source = (
        "import torch\nfrom torch.distributed.fsdp import fully_shard\n"
        + make_cluster(HELPERS)
        + textwrap.dedent(
            f"""\
            {call}


            def main():
                model = Net()
                optimizer = torch.optim.AdamW(model.parameters())
                for block in model.blocks:
                    fully_shard(block)
                fully_shard(model)
                optimizer.step()


            if __name__ == "__main__":
                main()
            """
        )
    )
    line = source.splitlines().index("    optimizer = torch.optim.AdamW(model.parameters())") + 1
    message = (
        f"optimizer built from parameters of `model` captured before `fully_shard` (line {line + 2}): "
        "its step() updates the old, non-DTensor tensors and training silently does nothing"
    )
    return source, [("FSDP001", line, message)]


def diagnostics_of(source: str) -> list[tuple[str, int, str]]:
    return [(d.code, d.line, d.message) for d in lint_source(source.encode(), "train.py")]


@pytest.mark.parametrize("kind", CLUSTERS)
def test_a_misuse_after_the_helpers_is_still_reported(kind):
    """The helpers' replays spend the file's bound, so the module body's call of ``main`` is not
    expanded; ``main`` is then analysed as an entry point of its own. (Before issue 13, the helpers
    spent the file's statement budget, after which not even an entry point's own code ran.)"""
    source, expected = misuse_after_helpers(kind)
    assert diagnostics_of(source) == expected


def test_entry_points_still_run_once_the_file_statement_budget_is_spent(monkeypatch):
    """Past ``MAX_STEPS`` no call is expanded or replayed any more, but every entry point's own code still runs."""
    monkeypatch.setattr(summaries, "MAX_STEPS", 100)
    source, expected = misuse_after_helpers("functions")
    assert diagnostics_of(source) == expected
