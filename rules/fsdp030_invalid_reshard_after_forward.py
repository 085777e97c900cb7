from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, Value, options
from fsdp2_lint.diagnostics import Applicability, Severity
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

KEYWORD = "reshard_after_forward"
# Strings people write for the two bools, and the bool each means.
BOOL_STRINGS = {"True": "True", "true": "True", "False": "False", "false": "False"}


class InvalidReshardAfterForward(Rule):
    code = "FSDP030"
    name = "invalid-reshard-after-forward"
    summary = "`reshard_after_forward` given a value `fully_shard` rejects, or `1`, which turns resharding off"
    hint = (
        "pass `True` (free the unsharded parameters after forward), `False` (keep them until backward), or an "
        "int that divides the mesh's shard size (e.g. the GPUs per node)"
    )
    failure = (
        "`ValueError: reshard_after_forward should be a bool or an int ..., not True` (a string, a float) or "
        "`... it should be a factor of 2, not 0` at the call; `1`: no error, the parameters stay unsharded "
        "after forward (more memory)"
    )
    docs = """
## What it does
Flags `fully_shard(..., reshard_after_forward=v)` where `v` is a string (`"True"`, `"false"`,
`"full"`), a float, `0` or a negative int (errors), or `1` (accepted, but it means "reshard to
groups of one rank": the parameters are never resharded after forward, as with `False`). Also
through a variable or configuration constant the analysis can read. Not flagged: `True`,
`False`, `None`, an int of 2 or more, values it cannot read, and a value that is one of several
where one of them is valid (a setting converted on one path and not on another).

## Why is this bad?
Observed with torch 2.13 (CPU/gloo, 2 ranks): `reshard_after_forward="True"` (and `1.0`) raises
`ValueError: reshard_after_forward should be a bool or an int representing the group size to
reshard to, not True` at the `fully_shard` call, and `0` (or `3` on 2 ranks) raises `ValueError:
If passing reshard_after_forward as an int, it should be a factor of 2, not 0`. `1` raises
nothing: torch logs that it means resharding to world size 1 and keeps every rank's unsharded
parameters from forward to backward, the memory cost `reshard_after_forward=True` was meant to
avoid; nothing points back at the argument (that case is a warning).

## Fix safety
A string naming a bool (`"True"`, `"false"`) becomes that bool: safe, it is what the string says
and the only reading `fully_shard` could give it. `1` is not changed: it may mean `True` or a
real group size of one.

## Known problems
An int that does not divide the mesh's shard size (`3` on 8 ranks) fails too, but the mesh size
is not known statically and such values are not reported.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block, reshard_after_forward=True)
fully_shard(model, reshard_after_forward=False)
""",
        """
from torch.distributed.fsdp import fully_shard

GPUS_PER_NODE = 8
fully_shard(model, mesh=mesh, reshard_after_forward=GPUS_PER_NODE)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model, reshard_after_forward="True")  # expect: FSDP030
""",
        """
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block, reshard_after_forward=1)  # expect: FSDP030
""",
    )
    fix_offer = FixOffer(
        summary='a string naming a bool → that bool (`"True"` → `True`) (safe)',
        applicabilities=(Applicability.SAFE,),
        safety="the bool the string names is what it says, and the only reading `fully_shard` could give it",
    )
    requires = (("fully_shard",), ("reshard_after_forward",))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("ValueError",),
        message=r"reshard_after_forward should be a bool or an int|it should be a factor of",
        note="`reshard_after_forward=1` raises nothing (it only keeps the parameters unsharded): its findings are "
        "not confirmed by a run",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for shard in trace.shards:
                value = shard.kwargs.get(KEYWORD)
                if value is None:
                    continue
                values = _certain_values(value)
                rejected = [v for v in values if _rejected(v)]
                if values and len(rejected) == len(values):
                    yield Finding(
                        shard.node,
                        f"`{KEYWORD}={rejected[0]!r}`: `fully_shard` takes a bool or an int that divides the "
                        "shard size, and raises `ValueError` at this call",
                        fix=_bool_from_string(shard),
                    )
                elif values and all(v == 1 and not isinstance(v, bool) for v in values):
                    yield Finding(
                        shard.node,
                        f"`{KEYWORD}=1` means resharding to groups of one rank: the parameters are never resharded "
                        "after forward (as with `False`), keeping the whole unsharded group in memory until backward; "
                        "write `True` to free them",
                        severity=Severity.WARNING,
                    )


def _certain_values(value: Value) -> list[object]:
    """The constants the argument may be, when it can be nothing else (a value also read from
    somewhere the analysis cannot follow, or joined with a valid one, is not certainly wrong)."""
    found = list(options(value))
    return [option.value for option in found] if all(isinstance(option, Const) for option in found) else []


def _rejected(value: object) -> bool:
    """What ``fully_shard`` raises for, whatever the mesh: not a bool, None or int; an int below 1."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int):
        return value < 1
    return True


def _bool_from_string(shard: Event) -> Rewrite | None:
    call = shard.node
    if not isinstance(call, cst.Call):
        return None
    arg = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == KEYWORD), None)
    literal = arg.value if arg is not None else None
    if not isinstance(literal, cst.SimpleString) or literal.evaluated_value not in BOOL_STRINGS:
        return None
    return Rewrite("use a bool, not a string", {literal: cst.Name(BOOL_STRINGS[literal.evaluated_value])})
