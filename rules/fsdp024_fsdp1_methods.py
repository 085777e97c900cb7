from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts, sharded_note
from fsdp2_lint.analysis.model import Event, EventKind, Value, canonical, may_be_same, may_be_wrapper, refs
from fsdp2_lint.analysis.trace import Trace, fsdp2_model
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

# FSDP1-only attributes and methods of a wrapped module, and what FSDP2 offers instead.
MODULE_ATTRIBUTES = {
    "module": "the model itself: `fully_shard` does not wrap it",
    "_fsdp_wrapped_module": "the model itself: `fully_shard` does not wrap it",
    "_handle": "the `FSDPModule` API (`unshard()`, `reshard()`, ...)",
}
MODULE_METHODS = {"clip_grad_norm_": "`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`"}
# FSDP1 static methods that take the model (called on the class, `FSDP.name(...)`).
CLASS_METHODS = {
    "optim_state_dict": "`get_optimizer_state_dict(model, optimizer)`",
    "sharded_optim_state_dict": "`get_optimizer_state_dict(model, optimizer)`",
    "full_optim_state_dict": "`get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))`",
    "shard_full_optim_state_dict": "`set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))`",
    "scatter_full_optim_state_dict": "`set_optimizer_state_dict(..., options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))`",
    "flatten_sharded_optim_state_dict": "`set_optimizer_state_dict(model, optimizer, state)`",
    "optim_state_dict_to_load": "`set_optimizer_state_dict(model, optimizer, state)`",
    "clip_grad_norm_": "`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`",
}
# The model is their first argument, except for these (they take the state dict first).
MODEL_POSITION = {
    "shard_full_optim_state_dict": 1,
    "scatter_full_optim_state_dict": 1,
    "flatten_sharded_optim_state_dict": 1,
}
# Tests that code accepting both wrappers and FSDP2 modules puts before the access.
CHECKS = ("builtins.hasattr", "builtins.isinstance")


class Fsdp1Methods(Rule):
    code = "FSDP024"
    name = "fsdp1-methods"
    summary = "an FSDP1-only method or attribute used on an FSDP2 module"
    hint = (
        "use the FSDP2 equivalent: the model itself for `.module`, `torch.nn.utils.clip_grad_norm_(model.parameters(), "
        "...)`, and `get_/set_optimizer_state_dict` from `torch.distributed.checkpoint.state_dict`"
    )
    failure = (
        "`AttributeError: 'FSDPModel' object has no attribute 'module'` (or `clip_grad_norm_`, ...) at the access; "
        "`IndexError: list index out of range` from `FSDP.full_optim_state_dict` and the other full/sharded ones"
    )
    fix_offer = FixOffer(
        summary=(
            "`X.clip_grad_norm_(a, ...)` → `torch.nn.utils.clip_grad_norm_(X.parameters(), a, ...)`; `X.module` → `X`"
        ),
        applicabilities=(Applicability.SAFE,),
        safety="the replacement computes the same thing over the module's own, sharded, parameters.",
    )
    docs = """
## What it does
Flags FSDP1 (`FullyShardedDataParallel`) API used on a module sharded with `fully_shard`:
`model.module`, `model._fsdp_wrapped_module`, `model._handle`, `model.clip_grad_norm_(...)`, and
`FSDP.optim_state_dict(model, ...)`, `FSDP.full_optim_state_dict`, `FSDP.sharded_optim_state_dict`,
`FSDP.shard_full_optim_state_dict(state, model)`, `FSDP.scatter_full_optim_state_dict(state, model)`,
`FSDP.flatten_sharded_optim_state_dict`, `FSDP.optim_state_dict_to_load`, `FSDP.clip_grad_norm_(model, ...)`.
Not flagged on modules wrapped by `DistributedDataParallel` or `FullyShardedDataParallel`, which
have them, nor where code checks the object first (`m.module if hasattr(m, "module") else m`,
`if isinstance(m, FSDP): m.clip_grad_norm_(...)`, a guard clause such as `if not isinstance(m,
MegatronFSDP): return` before the access, or such a test in the caller's arm that calls the
helper, `getattr(m, "module", m)`, `if type(m) in WRAPPERS:` with a dict, set or tuple of the
wrapper classes), nor where the
module gives the name itself: its class (or a base class in the project) defines the method,
property or class attribute (`fully_shard` keeps the model's class as a base of the new one), or the code stores the
attribute on it (`self.module = inner`).

## Why is this bad?
`fully_shard` does not wrap the module (it changes its class in place to `FSDP<Class>`), so there
is no `.module` and none of FSDP1's methods. Observed with torch 2.13:
`AttributeError: 'FSDPModel' object has no attribute 'module'`, the same for `clip_grad_norm_`,
`_fsdp_wrapped_module` and `_handle`; `AttributeError: 'NoneType' object has no attribute
'optim_state_dict_config'` from `FSDP.optim_state_dict(model, optimizer)` (`... 'state_dict_type'`
from `optim_state_dict_to_load`); `IndexError: list index out of range` from
`full_optim_state_dict`, `sharded_optim_state_dict`, `shard_full_optim_state_dict`,
`scatter_full_optim_state_dict` and `flatten_sharded_optim_state_dict`, which find no FSDP1 module.

## Known problems
A method or attribute a model class gets from a base class outside the project is not seen (the
analysis does not read third-party packages): its use is still reported.

An arm that only a caller in another module rules out is taken: a method no code of its own
module calls is analysed as its own entry point, knowing nothing of its receiver's settings, so
an FSDP1 call under a setting its one caller excludes is reported (composer's
`State._legacy_load_optim_state` takes its `load_monolith_rank0_only` arm, which needs
`state_dict_type == "full"`, though its one caller, in `checkpoint.py`, loads only sharded
checkpoints). Ruling it out would take every caller of the method, and a public method's callers
may be outside the project: the project alone does not decide it. Tests of one setting within
one analysis are carried (through a helper's parameter, a property that implies it, an attribute
of a config object).

A file that follows a framework's state object through many entry points (composer's
`trainer.py`) may spend its budget of statements in other modules before the last of them: a
property read past the budget is unknown, and an arm it would rule out is taken (composer's
`state.py:134`, reported from `trainer.py`'s analysis, not from `state.py`'s).
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

fully_shard(model)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
other = DDP(other_model)
inner = other.module
""",
        """
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard

class Trainer:
    def __init__(self, model):
        self.model = model
        fully_shard(self.model)

    def clip(self):
        if isinstance(self.model, FSDP):
            return self.model.clip_grad_norm_(1.0)
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

fully_shard(model)
raw = model.module if hasattr(model, "module") else model
base = getattr(model, "module", model)
Trainer(other).clip()
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard

fully_shard(model)
model.clip_grad_norm_(1.0)  # expect: FSDP024
state = model.module.state_dict()  # expect: FSDP024
optim_state = FSDP.optim_state_dict(model, optimizer)  # expect: FSDP024
""",
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
inner = [block._fsdp_wrapped_module for block in model.layers]  # expect: FSDP024
state = FSDP.scatter_full_optim_state_dict(full_state, model)  # expect: FSDP024
""",
    )
    requires = (("fully_shard",), ("module", "_handle", "clip_grad_norm_", "optim_state_dict"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("AttributeError", "IndexError"),
        message=r"has no attribute|list index out of range",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for name, replacement in MODULE_ATTRIBUTES.items():
                for access in trace.methods(name, EventKind.ATTR):
                    sharded = _fsdp2_module(facts, trace, access, name)
                    if sharded is not None:
                        module, shard = sharded
                        at, related = facts.sharded_elsewhere(module, shard, access.node)
                        yield Finding(
                            access.node,
                            f"`{module}.{name}` does not exist with FSDP2{sharded_note(module, at)}: use {replacement}",
                            fix=_the_module_itself(access.node) if name in UNWRAPPED else None,
                            related=related,
                        )
            for name, replacement in MODULE_METHODS.items():
                for call in trace.methods(name):
                    sharded = _fsdp2_module(facts, trace, call, name)
                    if sharded is not None:
                        module, shard = sharded
                        at, related = facts.sharded_elsewhere(module, shard, call.node)
                        yield Finding(
                            call.node,
                            f"`{module}.{name}(...)` does not exist with FSDP2{sharded_note(module, at)}: use {replacement}",
                            fix=_clip_parameters(facts, call.node),
                            related=related,
                        )
            for name, replacement in CLASS_METHODS.items():
                for call in trace.calls(f"{apis.FSDP1}.{name}"):
                    model = call.arg(MODEL_POSITION.get(name, 0), "model")
                    if fsdp2_model(trace, call, model):
                        yield Finding(call.node, f"`FSDP.{name}` only works on FSDP1 models: use {replacement}")


# The wrapped module of an FSDP1 wrapper, which after `fully_shard` is the module itself.
UNWRAPPED = ("module", "_fsdp_wrapped_module")


def _the_module_itself(node: cst.CSTNode) -> Rewrite | None:
    """``X.module`` -> ``X``: `fully_shard` does not wrap the module."""
    if not isinstance(node, cst.Attribute):
        return None
    return Rewrite("use the module itself: `fully_shard` does not wrap it", {node: node.value})


def _clip_parameters(facts: FileFacts, node: cst.CSTNode) -> Rewrite | None:
    """``X.clip_grad_norm_(a, ...)`` -> ``torch.nn.utils.clip_grad_norm_(X.parameters(), a, ...)``:
    the same norm over the same parameters, computed across ranks on the DTensor gradients."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.args):
        return None
    clip, needed = builders.reference(facts.module, "torch.nn.utils.clip_grad_norm_")
    parameters = cst.Call(cst.Attribute(node.func.value, cst.Name("parameters")))
    first = cst.Arg(parameters, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return Rewrite(
        "use `torch.nn.utils.clip_grad_norm_` over the module's parameters",
        {node: node.with_changes(func=clip, args=[first, *node.args])},
        imports=(needed,) if needed else (),
    )


def _fsdp2_module(facts: FileFacts, trace: Trace, access: Event, name: str) -> tuple[str, Event | bool] | None:
    """The FSDP2 module ``access`` reads ``name`` from, and its ``fully_shard``, unless it is a
    DDP/FSDP1 wrapper or an object the file gives an attribute of that name itself."""
    if may_be_wrapper(access.receiver) or _has_default(access.node) or _checked_first(trace, access):
        return None
    for module in refs(access.receiver):
        shard = trace.is_fsdp_module(module, access)
        if shard and not facts.defines(module, name):
            return facts.name_as_written(module, access.node), shard
    return None


def _has_default(node: cst.CSTNode) -> bool:
    """``getattr(model, "module", model)`` never raises."""
    return isinstance(node, cst.Call) and len(node.args) > 2


def _checked_first(trace: Trace, access: Event) -> bool:
    """Does the access run in an arm of an `if` (or a conditional expression) whose test checks the
    object with `hasattr` / `isinstance`, directly or through a helper, as in `m.module if
    hasattr(m, "module") else m`, or past one whose other arm exits (`if not isinstance(m,
    Wrapper): return`)? Code that tells a wrapper from an FSDP2 module at runtime does not reach
    the access with the latter."""
    tests = {*access.ctx.if_nodes, *(node for node, _ in access.ctx.branches)}
    return bool(tests) and any(
        check.args and any(test in tests for test in check.ctx.testing) and _same(check.args[0], access.receiver)
        for check in trace.calls(*CHECKS)
    )


def _same(a: Value, b: Value | None) -> bool:
    return b is not None and any(may_be_same(canonical(x), canonical(y)) for x in refs(a) for y in refs(b))
