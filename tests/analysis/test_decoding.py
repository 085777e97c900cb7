"""Which tests end a loop early on what the loop body computed from a call (FSDP012's decode loops)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis.decoding import exits_on_result


def _exits(source: str) -> list[str]:
    """The exit tests, as written, of the first loop of ``source`` that read what its `model(...)` call returned."""
    module = cst.parse_module(textwrap.dedent(source))
    loop = next(node for node in module.body if isinstance(node, (cst.For, cst.While)))
    calls = [node for node in _walk(loop) if isinstance(node, cst.Call) and _calls_model(node)]
    return [module.code_for_node(test) for _, test in exits_on_result(loop, calls)]


def _calls_model(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Name) and call.func.value == "model"


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # the token, then a flag computed from it, then the test
            """
            for _ in range(n):
                nxt = model(ids).argmax(-1)
                hit = nxt == eos
                if hit.all():
                    break
            """,
            ["hit.all()"],
        ),
        (  # set late in the body, tested early in the next step
            """
            while not done:
                logits = model(ids)
                done = bool((logits.argmax(-1) == eos).all())
            """,
            ["not done"],
        ),
        (  # an augmented assignment and a filled buffer compute from the call too
            """
            while True:
                tok = model(ids)
                finished |= tok == eos
                out[step] = finished
                if out.all():
                    return out
            """,
            ["out.all()"],
        ),
        (  # a sequence's length, a counter and a setting are not the model's output
            """
            while ids.shape[1] < max_len:
                nxt = model(ids)
                ids = torch.cat([ids, nxt], dim=1)
                step += 1
                if step >= cfg.max_new or len(ids) > limit:
                    break
            """,
            [],
        ),
        (  # a `break` of a nested loop does not end this one
            """
            for _ in range(n):
                nxt = model(ids)
                for tok in nxt:
                    if tok == eos:
                        break
            """,
            [],
        ),
        (  # the result discarded: nothing computed from it
            """
            for _ in range(n):
                model(ids)
                if (ids == eos).all():
                    break
            """,
            [],
        ),
    ],
)
def test_exits_on_result(source, expected):
    assert _exits(source) == expected
