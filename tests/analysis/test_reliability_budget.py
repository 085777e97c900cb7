"""A file of many mutually calling helpers costs time linear in its functions (issue 13, group A):
the interpreter expands at most ``MAX_EXPANSIONS_PER_ENTRY`` same-file calls per entry point, so
an exponential call tree (sympy's gruntz.py, numpy's crackfortran.py) cannot take a run or an
editor down, and what comes after such helpers is still analysed."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis import facts
from fsdp2_lint.analysis.interpreter import calls, core
from fsdp2_lint.engine import lint_source

HELPERS = 12
FAN_OUT = 5  # each helper calls the next five: 5**8 calls at the depth limit, for one call of the first


def _helper(receiver: str, index: int, count: int) -> list[str]:
    """A helper's lines (unindented); ``receiver`` is what its calls go through ("self." or "")."""
    calls = " + ".join(f"{receiver}helper_{(index + step) % count}(z)" for step in range(1, FAN_OUT + 1))
    params = "self, x" if receiver else "x"
    return [f"def helper_{index}({params}):", "    y = x + 1", "    z = y * 2", f"    return {calls}"]


def function_cluster(count: int) -> str:
    """Helpers that call each other, as sympy's gruntz.py does."""
    return "".join(line + "\n" for index in range(count) for line in _helper("", index, count))


def method_cluster(count: int) -> str:
    """Methods that call each other through ``self``."""
    lines = [line for index in range(count) for line in _helper("self.", index, count)]
    return "class Helpers:\n" + "".join(f"    {line}\n" for line in lines)


CLUSTERS = {
    "functions": (function_cluster, "helper_0(1)"),
    "methods": (method_cluster, "Helpers().helper_0(1)"),
}


def expansions_of(source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(same-file calls the interpreter expanded, entry points it analysed) for ``source``."""
    expanded = 0
    call_function = core.Interpreter.call_function

    def counting(self, fn, args, kwargs, node, symbolic=False):
        nonlocal expanded
        result = call_function(self, fn, args, kwargs, node, symbolic)
        expanded += result is not None and not symbolic
        return result

    monkeypatch.setattr(core.Interpreter, "call_function", counting)
    module = cst.parse_module(source)
    traces = facts.interpret(module, source.encode())
    return expanded, len(traces)


@pytest.mark.parametrize("kind", CLUSTERS)
def test_mutually_calling_helpers_expand_within_the_budget_of_each_entry_point(kind, monkeypatch):
    make_cluster, call = CLUSTERS[kind]
    source = f"from torch.distributed.fsdp import fully_shard\n{make_cluster(HELPERS)}{call}\n"
    expanded, entry_points = expansions_of(source, monkeypatch)
    assert entry_points <= HELPERS + 1  # the module body and each helper
    assert expanded <= calls.MAX_EXPANSIONS_PER_ENTRY * entry_points


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
    """The helpers spend the module body's budget, so its call of ``main`` is not expanded; ``main``
    is then analysed as an entry point of its own, with a budget of its own. (Before, the helpers
    spent the file's statement budget, after which not even an entry point's own code ran.)"""
    source, expected = misuse_after_helpers(kind)
    assert diagnostics_of(source) == expected


def test_entry_points_still_run_once_the_file_statement_budget_is_spent(monkeypatch):
    """Past ``MAX_STEPS`` no call is expanded any more, but every entry point's own code still runs."""
    monkeypatch.setattr(calls, "MAX_STEPS", 100)
    source, expected = misuse_after_helpers("functions")
    assert diagnostics_of(source) == expected
