from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Derived,
    Event,
    EventKind,
    GradTag,
    Params,
    ParamSource,
    canonical,
    may_overlap,
    report_node,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

CLIPPING = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grads_with_norm_",
    }
)
NORM_CALLS = frozenset(
    {
        "torch.norm",
        "torch.linalg.norm",
        "torch.linalg.vector_norm",
        "torch.sqrt",
        "torch.sum",
        "builtins.sum",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grad.get_total_norm",
    }
)
NORM_METHODS = frozenset({"norm", "sqrt"})
REDUCTIONS = frozenset(
    {
        "torch.distributed.all_reduce",
        "torch.distributed.reduce",
        "torch.distributed.all_gather",
        "torch.distributed.all_gather_into_tensor",
        "torch.distributed.nn.functional.all_reduce",
    }
)


class StaleOrLocalGradNorm(Rule):
    code = "FSDP015"
    name = "stale-or-local-grad-norm"
    summary = "gradient norm/clipping over parameters captured before sharding, or over local shards only"
    hint = (
        "clip `model.parameters()` after sharding: `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` "
        "returns the global norm; a hand-written norm must all-reduce the squared local sums"
    )
    failure = "silent: the norm is 0 (stale list: nothing is clipped) or this rank's local value, not the global one"
    fix_offer = FixOffer(
        summary=(
            "`clip_grad_norm_(params, ...)`, `params = list(m.parameters())` captured before sharding → "
            "`clip_grad_norm_(m.parameters(), ...)`"
        ),
        applicabilities=(Applicability.SAFE,),
        safety=(
            "the norm is computed over the same module's parameters: the current, sharded ones that the "
            "optimizer updates."
        ),
    )
    docs = """
## What it does
Flags gradient clipping or a gradient norm that does not see the sharded gradients:
- `clip_grad_norm_(params, ...)` (also `clip_grad_value_`, `get_total_norm`) where `params` was
  captured (`list(model.parameters())`) before the module was sharded;
- a norm built from `p.grad.to_local()` (this rank's shard) and never all-reduced across ranks
  (one computed inside an assertion, where a test checks each shard, is left alone).

## Where it is reported
A stale list is an order that is wrong (captured, then sharded, then clipped): at the clipping call,
or at the call of the helper that clips, in the innermost function that also runs the
`fully_shard`. A local norm lacks a step: at the norm itself.

## Why is this bad?
`fully_shard` replaces the parameters: a list captured before holds old tensors that never get a
gradient. Observed with torch 2.13: 0 of 10 of them have grads, the returned norm is 0.000000 (true
norm 0.654236) and nothing is ever clipped. `to_local()` drops the other ranks' shards: the "global"
norm was 0.502250 instead of 0.654236, and differs across ranks, so clipping is wrong and
inconsistent. (`clip_grad_norm_(model.parameters())` after sharding returns the correct global
norm as a replicated DTensor.)
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

fully_shard(model)
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""",
        """
import torch
import torch.distributed as dist

squares = sum(p.grad.to_local().pow(2).sum() for p in model.parameters())
dist.all_reduce(squares)
norm = squares.sqrt()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

params = list(model.parameters())
fully_shard(model)
torch.nn.utils.clip_grad_norm_(params, 1.0)  # expect: FSDP015
""",
        """
import torch

grad_norm = torch.sqrt(sum(p.grad.to_local().pow(2).sum() for p in model.parameters()))  # expect: FSDP015
""",
    )
    # clipping over a list captured before a `fully_shard`, or a norm of `to_local()` shards
    requires = (("clip_grad", "get_total_norm", "to_local"), ("fully_shard", "to_local"))
    signature = RuntimeSignature(
        evidence="wrong_grad_norm",
        note="the norm the script computes differs from the true global gradient norm",
        min_ranks=2,  # with one rank a local norm is the global one (a stale norm shows at one)
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for clip in trace.calls(*CLIPPING):
                found = _stale_shard(trace, clip)
                if found is not None:
                    stale, source = found
                    reported = report_node(clip, _obtained(trace, clip, source))
                    yield Finding(
                        reported,
                        f"clips parameters captured before `fully_shard` ({facts.where(stale.node, reported)}): "
                        "they never receive gradients, so the norm is 0 and nothing is clipped",
                        fix=_current_parameters(facts, trace, clip) if reported is clip.node else None,
                        related=((stale.node, "the model is sharded here"),),
                    )
            yield from _local_norms(facts, trace)


def _current_parameters(facts: FileFacts, trace: Trace, clip: Event) -> Rewrite | None:
    """``clip_grad_norm_(params, ...)`` where ``params = list(E.parameters())`` was captured before
    sharding -> ``clip_grad_norm_(E.parameters(), ...)``: the same module's parameters, read when
    clipping. Only when ``E`` names the same module at the clip: ``self.<...>`` in two methods of
    one class, or a name bound once, before the capture, in the function (or module) holding both."""
    call = clip.node
    params = clip.arg(0, "parameters")
    stale = [option for option in walk_contents(params) if isinstance(option, Params)] if params is not None else []
    if not isinstance(call, cst.Call) or len(stale) != 1 or stale[0].named or len(stale[0].sources) != 1:
        return None
    (source,) = stale[0].sources
    capture = trace.events[source.captured_at] if source.captured_at is not None else None
    if capture is None or capture.kind is not EventKind.METHOD or capture.name != "parameters" or capture.node.args:
        return None
    listed = facts.enclosing(capture.node, cst.Call)
    if not (
        isinstance(listed, cst.Call)
        and dotted(listed.func) in ("list", "tuple")
        and _only_argument(listed, capture.node)
    ):
        return None  # `list(E.parameters())` holds them all; a comprehension may filter them
    module = capture.node.func.value
    if not dotted(module) or not _same_module_at(facts, module, capture.node, call):
        return None
    argument = next((arg for arg in call.args if arg.keyword is None or arg.keyword.value == "parameters"), None)
    if argument is None or argument.star:
        return None
    current = cst.Call(cst.Attribute(module, cst.Name("parameters")))
    return Rewrite(
        "clip the module's current (sharded) parameters",
        {argument.value: current},
    )


def _same_module_at(facts: FileFacts, module: cst.BaseExpression, capture: cst.CSTNode, clip: cst.CSTNode) -> bool:
    root = dotted(module).split(".")[0]
    if root == "self":
        cls = facts.enclosing(capture, cst.ClassDef)
        return (
            cls is not None
            and cls is facts.enclosing(clip, cst.ClassDef)
            and all(_first_parameter(facts.enclosing(node, cst.FunctionDef)) == "self" for node in (capture, clip))
        )
    scope = facts.enclosing(capture, cst.FunctionDef) or facts.module
    if scope is not (facts.enclosing(clip, cst.FunctionDef) or facts.module):
        return False
    bound = [node for node in builders.bindings(scope, root) if not _wraps_itself(node, root)]
    return len(bound) <= 1 and all(_start(facts, node) < _start(facts, capture) for node in bound)


def _start(facts: FileFacts, node: cst.CSTNode) -> tuple[int, int]:
    where = facts.position(node).start
    return where.line, where.column


def _only_argument(call: cst.Call, node: cst.CSTNode) -> bool:
    return len(call.args) == 1 and call.args[0].value is node and not call.args[0].star


def _wraps_itself(node: cst.CSTNode, name: str) -> bool:
    """``model = wrap(model, ...)``: the same parameters under the same name."""
    if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and node.value.args):
        return False
    first = node.value.args[0]
    return first.keyword is None and isinstance(first.value, cst.Name) and first.value.value == name


def _first_parameter(function: cst.CSTNode | None) -> str | None:
    if not isinstance(function, cst.FunctionDef) or not function.params.params:
        return None
    return function.params.params[0].name.value


def _stale_shard(trace: Trace, clip: Event) -> tuple[Event, ParamSource] | None:
    """The shard that makes the clipped parameters stale, and the capture it makes stale."""
    params = clip.arg(0, "parameters")
    for option in walk_contents(params) if params is not None else ():
        if not isinstance(option, Params):
            continue
        for source in option.sources:
            if source.captured_at is None:
                continue  # a generator read now: current parameters
            for shard, target in trace.shards_between(source.captured_at, clip.index, clip):
                if may_overlap(target, canonical(source.ref)):
                    return shard, source
    return None


def _obtained(trace: Trace, clip: Event, source: ParamSource) -> Event:
    """Where the clipping code got the stale list: the last read of an attribute that holds it
    (``self.params``), else the capture itself. The finding goes in the innermost function that
    runs both: a clipping helper handed the list by its caller is right on its own."""
    for event in reversed(trace.events[source.captured_at + 1 : clip.index]):  # type: ignore[operator]
        if (
            event.kind is EventKind.ATTR
            and event.result is not None
            and any(isinstance(option, Params) and source in option.sources for option in walk_contents(event.result))
        ):
            return event
    return trace.events[source.captured_at]  # type: ignore[index]


def _local_norms(facts: FileFacts, trace: Trace) -> Iterator[Finding]:
    """Norms over local gradient shards that are never reduced across ranks (an all-reduce of
    the norm, or of what it is computed from, makes it global). Only the final norm is reported:
    a per-parameter ``.norm()`` that a later norm consumes is part of the same total."""
    norms = [event for event in trace.events if _is_norm(event) and _local(event)]
    if not norms:
        return
    consumed = set().union(*(step for event in norms for step in _input_steps(event)))
    reductions = [event for event in trace.events if event.kind is EventKind.CALL and event.qname in REDUCTIONS]
    reduced = set().union(*(step for event in reductions for step in _input_steps(event)))
    for event in norms:
        lineage = set().union({event.index}, *_input_steps(event))
        if event.index not in consumed and not lineage & reduced and not event.ctx.asserted:
            yield Finding(
                event.node,
                "gradient norm over `to_local()` shards only: this is this rank's partial norm, not the global one",
            )


def _input_steps(event: Event) -> Iterator[frozenset[int]]:
    values = (event.receiver, *event.args) if event.receiver is not None else event.args
    for value in values:
        for option in walk_contents(value):
            if isinstance(option, Derived):
                yield option.steps


def _is_norm(event: Event) -> bool:
    if event.kind is EventKind.CALL:
        return event.qname in NORM_CALLS
    return event.kind is EventKind.METHOD and event.name in NORM_METHODS


def _local(event: Event) -> bool:
    values = (event.receiver, *event.args) if event.receiver is not None else event.args
    return any(isinstance(v, Derived) and GradTag.LOCAL in v.tags for value in values for v in walk_contents(value))
