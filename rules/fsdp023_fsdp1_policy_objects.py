from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, EventKind, Obj, refs
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

# FSDP2 argument -> (FSDP1 class given to it, the FSDP2 class to use)
POLICIES = {
    "offload_policy": (f"{apis.FSDP}.CPUOffload", "CPUOffloadPolicy()"),
    "mp_policy": (f"{apis.FSDP}.MixedPrecision", "MixedPrecisionPolicy(param_dtype=..., reduce_dtype=...)"),
}
# FSDP2 argument -> its own policy classes
FSDP2_POLICIES = {
    "offload_policy": {f"{apis.FSDP}.CPUOffloadPolicy", f"{apis.FSDP}.OffloadPolicy"},
    "mp_policy": {f"{apis.FSDP}.MixedPrecisionPolicy"},
}


class Fsdp1PolicyObjects(Rule):
    code = "FSDP023"
    name = "fsdp1-policy-objects"
    summary = "an FSDP1 policy object given to an FSDP2 argument"
    hint = "use `offload_policy=CPUOffloadPolicy()` and `mp_policy=MixedPrecisionPolicy(param_dtype=..., reduce_dtype=...)`"
    failure = (
        "`CPUOffload` is silently ignored (no offloading); `MixedPrecision` fails at the first forward "
        "(`AttributeError: ... no attribute 'output_dtype'`, or a dtype mismatch)"
    )
    fix_offer = FixOffer(
        summary=(
            "`MixedPrecision(param_dtype=a, reduce_dtype=b)` → `MixedPrecisionPolicy(param_dtype=a, "
            "reduce_dtype=b)` (safe; none with FSDP1-only fields such as `buffer_dtype`); "
            "`CPUOffload(offload_params=True)` → `CPUOffloadPolicy()` (unsafe: offloading starts, into "
            "pinned memory that needs an accelerator); none for a policy object an FSDP1 wrapper also "
            "uses"
        ),
        applicabilities=(Applicability.SAFE, Applicability.UNSAFE),
        safety=(
            "`MixedPrecision` -> `MixedPrecisionPolicy` keeps the same dtypes (safe); "
            "`CPUOffload(offload_params=True)` -> `CPUOffloadPolicy()` starts offloading, into pinned "
            "memory that needs an accelerator (unsafe)."
        ),
    )
    docs = """
## What it does
Flags FSDP1's `CPUOffload(...)` given as `offload_policy=` and FSDP1's `MixedPrecision(...)` given
as `mp_policy=` to `fully_shard` (directly or through a variable, an attribute, a dataclass field's
`default_factory`, or a table keyed by FSDP version read at FSDP1's key). Reported at the policy
object.

## Why is this bad?
FSDP2 only acts on `isinstance(offload_policy, CPUOffloadPolicy)`: an FSDP1 `CPUOffload` is
accepted and silently ignored, so nothing is offloaded and the memory you budgeted for is not
saved (observed with torch 2.13: the parameter group keeps the `CPUOffload` object and none of
its parameters is offloaded). `MixedPrecision` is accepted by `fully_shard`, which casts the
parameters to its `param_dtype` but not the inputs (FSDP1's `cast_forward_inputs` defaults to
False), and the first forward fails: a block that receives bf16 activations (after an embedding)
runs and then FSDP2's post-forward hook raises `AttributeError: 'MixedPrecision' object has no
attribute 'output_dtype'`; a block that receives the float32 input fails in its first matmul
(`RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16`).
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
fully_shard(model, mp_policy=policy, offload_policy=CPUOffloadPolicy())
""",
        """
from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy, OffloadPolicy, fully_shard


class Plugin:
    def __init__(self, fsdp_version, offload):
        if fsdp_version == 2:
            self.cpu_offload = CPUOffloadPolicy() if offload else OffloadPolicy()
        else:
            self.cpu_offload = CPUOffload(offload_params=offload)  # for the FSDP1 wrapper


plugin = Plugin(version, offload)
if plugin_version == 2:
    fully_shard(model, offload_policy=plugin.cpu_offload)
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import CPUOffload, MixedPrecision, fully_shard

mixed = MixedPrecision(param_dtype=torch.bfloat16)  # expect: FSDP023
fully_shard(model, offload_policy=CPUOffload(offload_params=True), mp_policy=mixed)  # expect: FSDP023
""",
        """
from torch.distributed.fsdp import CPUOffload, fully_shard

offload = CPUOffload(offload_params=True) if offload_params else None  # expect: FSDP023
fully_shard(model, offload_policy=offload)
""",
    )
    requires = (("fully_shard",), ("CPUOffload", "MixedPrecision"))
    signature = RuntimeSignature(
        evidence="offload_policy_ignored",
        exception=("AttributeError", "RuntimeError"),
        message=r"has no attribute 'output_dtype'|must have the same dtype",
        note="CPUOffload: the group keeps it and offloads nothing; MixedPrecision: the first forward fails",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for shard in trace.shards:
                for argument, (fsdp1_class, replacement) in POLICIES.items():
                    policies = list(refs(shard.kwargs[argument])) if argument in shard.kwargs else []
                    if any(policy.root.qname in FSDP2_POLICIES[argument] for policy in policies):
                        continue  # a version or config test picks the FSDP1 or the FSDP2 object
                    for policy in policies:
                        creation = policy.root.event
                        if policy.root.qname == fsdp1_class and creation is not None:
                            yield Finding(
                                creation.node,
                                f"`{fsdp1_class.rpartition('.')[2]}` is FSDP1's policy; `{argument}=` needs "
                                f"`{replacement}`",
                                fix=_fsdp2_policy(facts, trace, policy.root),
                            )


# Why the CPUOffload fix is unsafe: FSDP2 ignored the FSDP1 object, so nothing was offloaded until now.
OFFLOADING_STARTS = (
    ": offloading starts (FSDP2 ignored `CPUOffload`): parameters, gradients and optimizer states move to "
    "pinned CPU memory, which needs an accelerator, and the optimizer step runs on the CPU"
)
# FSDP1 MixedPrecision fields that mean the same in MixedPrecisionPolicy, in positional order.
SHARED_PRECISION_FIELDS = ("param_dtype", "reduce_dtype")


def _fsdp2_policy(facts: FileFacts, trace: Trace, policy: Obj) -> Rewrite | None:
    """``CPUOffload(offload_params=True)`` -> ``CPUOffloadPolicy()`` (unsafe: it starts offloading, which
    the ignored FSDP1 object never did); ``MixedPrecision(param_dtype=a,
    reduce_dtype=b)`` -> ``MixedPrecisionPolicy(param_dtype=a, reduce_dtype=b)``. Only for a policy
    that nothing but `fully_shard` uses (an FSDP1 wrapper given the same object needs it as it is),
    and, for MixedPrecision, without the FSDP1-only fields (`buffer_dtype`, `keep_low_precision_grads`,
    ...), which have no FSDP2 equivalent."""
    creation, call = policy.event, policy.event.node if policy.event is not None else None
    if creation is None or not isinstance(call, cst.Call) or any(arg.star for arg in call.args):
        return None
    if any(not (use.kind is EventKind.CALL and use.qname == apis.FULLY_SHARD) for use in trace.mentions(policy)):
        return None
    if policy.qname == f"{apis.FSDP}.CPUOffload":
        if len(call.args) != 1 or creation.arg(0, "offload_params") != Const(True):
            return None  # no offloading asked for: nothing to translate
        new_class, args, change = "CPUOffloadPolicy", [], OFFLOADING_STARTS
    elif _shared_precision_fields_only(call):
        new_class, args, change = "MixedPrecisionPolicy", list(call.args), ""
    else:
        return None
    expression, needed = builders.reference(facts.module, f"{apis.FSDP}.{new_class}")
    return Rewrite(
        f"use FSDP2's `{new_class}`{change}",
        {call: call.with_changes(func=expression, args=args)},
        applicability=Applicability.UNSAFE if change else Applicability.SAFE,
        imports=(needed,) if needed else (),
    )


def _shared_precision_fields_only(call: cst.Call) -> bool:
    return all(
        arg.keyword.value in SHARED_PRECISION_FIELDS
        if arg.keyword is not None
        else index < len(SHARED_PRECISION_FIELDS)
        for index, arg in enumerate(call.args)
    )
