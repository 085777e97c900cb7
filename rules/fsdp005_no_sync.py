from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.switches import fsdp2_no_sync_uses
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing.builders import code_of
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature


class NoSync(Rule):
    code = "FSDP005"
    name = "fsdp1-no-sync"
    summary = "`no_sync()` does not exist on FSDP2 modules"
    hint = (
        "use `model.set_requires_gradient_sync(False)` before the accumulation backward passes and "
        "`model.set_requires_gradient_sync(True)` before the last one (try/finally)"
    )
    failure = "`AttributeError: ... has no attribute 'no_sync'`"
    fix_offer = FixOffer(
        summary=(
            "`with X.no_sync(): body` → `X.set_requires_gradient_sync(False)`, `try: body`, `finally: "
            "X.set_requires_gradient_sync(True)`"
        ),
        applicabilities=(Applicability.SAFE,),
        safety=(
            "gradient synchronisation is turned off and back on around the same block, back on even when "
            "the block raises."
        ),
    )
    docs = """
## What it does
Flags `with m.no_sync():`, `m.no_sync()` and `getattr(m, "no_sync", ...)` where `m` is sharded
with `fully_shard` (or contains sharded modules). Not flagged on modules wrapped in
`DistributedDataParallel` or FSDP1 `FullyShardedDataParallel`, which do have `no_sync`, nor
where the receiver's class (or a base class in the project) defines `no_sync` itself, as a
method, property or class attribute: a trainer's own `with self.no_sync():`, or a model class
with its own `no_sync` (after `fully_shard` the model's class derives from it, so the method is
still there). Code inside such a method that calls a sharded model's `no_sync()` is reported there.

## Why is this bad?
`no_sync()` is an FSDP1/DDP method; `fully_shard` does not add it. The call fails with
`AttributeError: 'FSDPModel' object has no attribute 'no_sync'`. The `getattr(m, "no_sync",
nullcontext)` fallback hides the error but then gradients are reduce-scattered on every
micro-batch. FSDP2's equivalent is `set_requires_gradient_sync(False)` ... `(True)`.

## Known problems
A `no_sync` that a class gets from a base class outside the project (a framework's trainer) is
not seen (the analysis does not read third-party packages): such a call on an object that holds a
sharded model is still reported.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
model.set_requires_gradient_sync(False)
try:
    loss.backward()
finally:
    model.set_requires_gradient_sync(True)
""",
        """
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(model)
with model.no_sync():
    loss.backward()
""",
        """
from torch.distributed.fsdp import fully_shard
from utils import fsdp_version


def accumulate(model, loss):
    version = fsdp_version(model)  # 1: FSDP1 wrapper, 2: FSDP2 module
    if version == 1:
        with model.no_sync():
            loss.backward()
    elif version == 2:
        model.set_requires_gradient_sync(False)
        loss.backward()


fully_shard(model)
accumulate(model, loss)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
with model.no_sync():  # expect: FSDP005
    loss.backward()
""",
        """
import contextlib
from torch.distributed.fsdp import fully_shard

fully_shard(model)
sync_context = getattr(model, "no_sync", contextlib.nullcontext)  # expect: FSDP005
""",
        """
from torch.distributed.fsdp import fully_shard
from utils import fsdp_version

fully_shard(model)
if fsdp_version(model) > 0:  # FSDP1 or FSDP2
    with model.no_sync():  # expect: FSDP005
        loss.backward()
""",
    )
    requires = (("fully_shard",), ("no_sync",))
    signature = RuntimeSignature(
        evidence="exception", exception=("AttributeError",), message=r"has no attribute 'no_sync'"
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for use, module, shard in fsdp2_no_sync_uses(facts, trace):
                name = facts.name_as_written(module, use.node)
                at, related = facts.sharded_elsewhere(name, shard, use.node)
                yield Finding(
                    use.node,
                    f"`{name}` is sharded with `fully_shard`{at}, which has no `no_sync()`",
                    fix=_sync_off_inside(facts, use.node),
                    related=related,
                )


def _sync_off_inside(facts: FileFacts, call: cst.CSTNode) -> Rewrite | None:
    """``with X.no_sync(): body`` -> ``X.set_requires_gradient_sync(False)`` / ``try: body`` /
    ``finally: X.set_requires_gradient_sync(True)``: exactly FSDP1's semantics, sync off only
    inside the block. The body is kept as it is, comments and formatting included."""
    statement = facts.enclosing(call, cst.With)
    if not isinstance(statement, cst.With) or statement.asynchronous or len(statement.items) != 1:
        return None
    item = statement.items[0]
    if item.item is not call or item.asname is not None or not isinstance(call.func, cst.Attribute):
        return None
    module = code_of(call.func.value)
    disable, enable = (
        cst.parse_statement(f"{module}.set_requires_gradient_sync({flag})\n") for flag in ("False", "True")
    )
    body, header = statement.body, disable.trailing_whitespace
    if isinstance(body, cst.IndentedBlock):  # the comment on the `with` line goes to the first line
        body, header = body.with_changes(header=cst.TrailingWhitespace()), body.header
    guarded = cst.Try(body=body, finalbody=cst.Finally(body=cst.IndentedBlock([enable])))
    first = disable.with_changes(leading_lines=statement.leading_lines, trailing_whitespace=header)
    replacement = cst.FlattenSentinel([first, guarded])
    return Rewrite("use set_requires_gradient_sync(False) ... (True) around the block", {statement: replacement})
