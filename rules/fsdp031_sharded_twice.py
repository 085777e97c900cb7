from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, Ref, canonical, is_exact, may_contain, report_node
from fsdp2_lint.analysis.trace import may_have_sharded, proved_distinct
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class ShardedTwice(Rule):
    code = "FSDP031"
    name = "sharded-twice"
    summary = "`fully_shard` applied twice to the same module"
    hint = "shard each module once: delete the second call (or guard it with `if not isinstance(m, FSDPModule)`)"
    failure = (
        "`AssertionError: Each distinct composable distributed API can only be applied to a module once. "
        "fully_shard has already been applied to the following module: ...` at the second call"
    )
    docs = """
## What it does
Flags a `fully_shard` call on a module that an earlier `fully_shard` call in the same run
already sharded: the same call written twice, a helper that shards the model called twice, a
sharding helper followed by an explicit `fully_shard(model)` of the root it already sharded.
Not flagged: calls in different arms of one branch, a second call guarded by
`if not isinstance(m, FSDPModule)`, the same call statement run again by a loop, a root sharded
where an identity test proves it is not the inner module sharded before (`if model is not inner:`),
and modules the analysis cannot name exactly (elements of a loop over `model.modules()`).

## Where it is reported
At the second call; when each call is a helper that is right on its own (`shard_model(model)`
twice), at the second call of the helper in the function that makes both.

## Why is this bad?
`fully_shard` is a composable API that may be applied to a module once. Observed with torch
2.13 (CPU/gloo): the second `fully_shard(m)` raises `AssertionError: Each distinct composable
distributed API can only be applied to a module once. fully_shard has already been applied to
the following module: FSDPLinear(...)` (the same for the root: `FSDPSequential(...)`).

## Known problems
Only modules named exactly are compared: a block sharded explicitly and again by a loop over
`model.modules()` with a type filter is not reported.
"""
    valid = (
        """
from torch.distributed.fsdp import FSDPModule, fully_shard

for block in model.layers:
    fully_shard(block)
if not isinstance(model, FSDPModule):
    fully_shard(model)
""",
        """
from torch.distributed.fsdp import fully_shard

if args.shard_head:
    fully_shard(model.head)
else:
    fully_shard(model.head, reshard_after_forward=False)
fully_shard(model)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model.head)
fully_shard(model)
fully_shard(model.head)  # expect: FSDP031
""",
        """
from torch.distributed.fsdp import fully_shard

def shard(model):
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)

shard(model)
fully_shard(model)  # expect: FSDP031
""",
    )
    requires = (("fully_shard",),)
    signature = RuntimeSignature(
        evidence="exception",
        exception=("AssertionError",),
        message=r"can only be applied to a module once",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        for trace in facts.traces:
            shards = trace.shards
            for index, later in enumerate(shards):
                earlier = _sharded_before(later, shards[:index])
                if earlier is None:
                    continue
                node = report_node(later, earlier)
                if id(node) in reported:
                    continue
                reported.add(id(node))
                module = next(canonical(t) for t in later.targets if is_exact(canonical(t)))
                first = report_node(earlier, later)  # the first call, seen from where both are made
                at = facts.where(first, node)
                if first is not earlier.node:
                    at += f" (its `fully_shard` at {facts.where(earlier.node, node)})"
                yield Finding(
                    node,
                    f"`{module.text}` was already sharded at {at}: a module can be sharded once, the second "
                    "`fully_shard` raises `AssertionError`",
                    related=((earlier.node, f"`{module.text}` sharded here first"),),
                )


def _sharded_before(later: Event, earlier: list[Event]) -> Event | None:
    """An earlier call of the same run that shards one of ``later``'s modules, exactly named."""
    targets = [canonical(t) for t in later.targets]
    for shard in reversed(earlier):
        if shard.node is later.node and shard.stack == later.stack:
            continue  # the same statement run again by a loop
        if shard.exclusive_with(later) or _guarded(later, shard):
            continue
        if proved_distinct(shard.arg(0, "module"), later.arg(0, "module"), later):
            continue  # `if model is not inner:` after `fully_shard(inner)`
        if any(is_exact(t) and t in _modules(shard) and may_have_sharded(shard, t, later) for t in targets):
            return shard
    return None


def _modules(shard: Event) -> list[Ref]:
    return [canonical(s) for s in shard.targets]


def _guarded(later: Event, shard: Event) -> bool:
    """Does ``later`` run only where a test proved its module no FSDP2 module?"""
    return any(may_contain(proved, canonical(t)) for proved in later.ctx.not_fsdp2 for t in later.targets)
