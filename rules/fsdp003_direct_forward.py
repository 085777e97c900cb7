from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts, sharded_note
from fsdp2_lint.analysis.model import Const, Event, Ref, canonical, may_be_same, may_contain, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature


class DirectForward(Rule):
    code = "FSDP003"
    name = "direct-forward-call"
    summary = "`.forward(...)` on a sharded module skips FSDP's hooks: its parameters are never all-gathered"
    hint = 'call the module itself, `model(x)`, or `register_fsdp_forward_method(model, "forward")` after sharding'
    failure = "`RuntimeError: ... got mixed torch.Tensor and DTensor` (or, after `unshard()`, no parameter updates)"
    fix_offer = FixOffer(
        summary="`X.forward(args)` → `X(args)`",
        applicabilities=(Applicability.SAFE,),
        safety="calling the module runs the hooks that `.forward` skipped, and nothing else changes.",
    )
    docs = """
## What it does
Flags `X.forward(...)` (also `f = X.forward; f(...)`) where `X` is a module that was passed to
`fully_shard`, or a submodule of one called outside the sharded ancestor's own `forward`.
Not flagged: `super().forward(...)`, `self.forward(...)`, `self.child.forward(...)` inside a
module's `forward` when `child` is not sharded itself, calls after
`register_fsdp_forward_method(X, "forward")`, and calls after `X.unshard()` that run under
`torch.no_grad()` / `torch.inference_mode()`.

## Why is this bad?
FSDP2 all-gathers a module's parameters in a pre-forward hook that only `module(...)` runs.
Calling `forward` directly computes with the sharded DTensor parameters and fails with
`RuntimeError: aten.embedding.default got mixed torch.Tensor and DTensor, need to convert all
torch.Tensor to DTensor before calling distributed operators!` (the op is whichever first
touches a sharded parameter). After a manual `unshard()`, the call runs but, with autograd on,
no parameter is updated by the following step: the exemption holds only for inference.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
loss = model(batch).sum()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

fully_shard(model)
register_fsdp_forward_method(model, "forward")
out = model.forward(batch)
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
model.unshard()
with torch.no_grad():
    logits = model.forward(batch)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
logits = model.forward(batch)  # expect: FSDP003
""",
        """
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
step = model.layers[0].forward
hidden = step(batch)  # expect: FSDP003
""",
    )
    requires = (("fully_shard",), ("forward",))
    signature = RuntimeSignature(
        evidence="exception", exception=("RuntimeError",), message=r"mixed torch\.Tensor and DTensor"
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for call in trace.methods("forward"):
                if _is_self_call(call.node):
                    continue
                for module in refs(call.receiver):
                    shard = _bypasses_hooks(trace, call, module)
                    if shard and not _exempt(trace, call, module):
                        name = _receiver_text(facts, call, module)
                        at, related = facts.sharded_elsewhere(name, shard, call.node)
                        yield Finding(
                            call.node,
                            f"`{name}.forward(...)` bypasses FSDP's pre-forward hook: "
                            f"its sharded parameters are never all-gathered{sharded_note(name, at)}",
                            fix=_call_module_instead(call.node),
                            related=related,
                        )
                        break


def _receiver_text(facts: FileFacts, call: Event, module: Ref) -> str:
    """The module as the call names it (``model`` in ``model.forward(x)``), else its canonical path."""
    node = call.node
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return facts.code(node.func.value)
    return facts.name_as_written(module, node)


def _call_module_instead(node: cst.Call) -> Rewrite | None:
    """``X.forward(args)`` -> ``X(args)``: the same call, through the hooks."""
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "forward"):
        return None  # `step = X.forward; step(x)`: no mechanical rewrite of the alias
    return Rewrite("call the module instead of `.forward`", {node: node.with_changes(func=node.func.value)})


def _is_self_call(node: cst.CSTNode) -> bool:
    """``self.forward(...)``: a module calling its own forward from another of its methods."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and isinstance(node.func.value, cst.Name)
        and node.func.value.value == "self"
    )


def _bypasses_hooks(trace: Trace, call: Event, module) -> Event | bool:
    """The ``fully_shard`` whose hooks the call bypasses (True: one not seen), or False."""
    shard = trace.is_fsdp_module(module, call)
    if shard:
        return shard
    # A submodule that is not sharded itself belongs to its sharded ancestor's parameter group:
    # fine inside that ancestor's forward (already all-gathered), broken anywhere else.
    inside_ancestor = any(may_contain(outer, canonical(module)) for outer in call.ctx.forward_of)
    return not inside_ancestor and trace.is_managed(module, call)


def _exempt(trace: Trace, call: Event, module) -> bool:
    module = canonical(module)
    for registration in trace.calls(apis.REGISTER_FORWARD_METHOD):
        if registration.index < call.index and registration.arg(1, "method_name") == Const("forward"):
            if any(may_be_same(canonical(ref), module) for ref in refs(registration.arg(0, "module") or Const(None))):
                return True
    if call.ctx.no_grad:
        for unshard in trace.methods("unshard"):
            if unshard.index < call.index and any(
                may_be_same(canonical(ref), module) for ref in refs(unshard.receiver)
            ):
                return True
    return False
