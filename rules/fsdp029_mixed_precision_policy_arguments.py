from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import UNKNOWN_KEYWORDS, Const, Event, Value, options
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

POLICY = f"{apis.FSDP}.MixedPrecisionPolicy"
# MixedPrecisionPolicy's fields on torch 2.13, in order.
FIELDS = ("param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs")
DTYPE_FIELDS = FIELDS[:3]
# FSDP1 MixedPrecision fields people carry over, and what FSDP2 does instead.
FSDP1_FIELDS = {
    "buffer_dtype": "FSDP2 does not cast buffers: give them the dtype you want before sharding",
    "keep_low_precision_grads": "FSDP2 reduces gradients in `reduce_dtype`, then gives them the parameters' original dtype",
    "cast_root_forward_inputs": "`cast_forward_inputs` is FSDP2's name",
    "_module_classes_to_ignore": "FSDP2 has no such field",
}
# Strings that name a torch dtype (`torch.<name>`), the fix's domain.
DTYPE_NAMES = frozenset(
    {"float32", "float", "float16", "half", "bfloat16", "float64", "double", "float8_e4m3fn", "float8_e5m2"}
)


class MixedPrecisionPolicyArguments(Rule):
    code = "FSDP029"
    name = "mixed-precision-policy-arguments"
    summary = "`MixedPrecisionPolicy` given an argument it does not take, or a dtype as a string"
    hint = (
        "`MixedPrecisionPolicy` takes `param_dtype`, `reduce_dtype`, `output_dtype` (torch dtypes, e.g. "
        "`torch.bfloat16`) and `cast_forward_inputs`; FSDP1's `buffer_dtype` and `keep_low_precision_grads` "
        "have no FSDP2 field"
    )
    failure = (
        "`TypeError: MixedPrecisionPolicy.__init__() got an unexpected keyword argument 'buffer_dtype'` at the "
        "construction; a string dtype: `RuntimeError: Invalid device string: 'bfloat16'` at the first forward "
        "(`TypeError: empty(): argument 'dtype' must be torch.dtype, not str` in backward for `reduce_dtype`)"
    )
    docs = """
## What it does
Flags a `MixedPrecisionPolicy(...)` construction given a keyword it does not have (FSDP1's
`buffer_dtype`, `keep_low_precision_grads`, `cast_root_forward_inputs`, or any other), more
than its four positional arguments, or a string where it takes a dtype
(`param_dtype="bfloat16"`). Not flagged: `torch.bfloat16` and other dtype expressions, a dtype
held in a variable or a config, `**kwargs` whose keys are not known, and a call whose callee may
also be FSDP1's `MixedPrecision` (`from ... import MixedPrecisionPolicy as MixedPrecision` on one
path, `MixedPrecision` on another: code written for both).

## Why is this bad?
`MixedPrecisionPolicy` is a frozen dataclass with exactly `param_dtype`, `reduce_dtype`,
`output_dtype` and `cast_forward_inputs`. Observed with torch 2.13 (CPU/gloo):
`MixedPrecisionPolicy(param_dtype=torch.bfloat16, buffer_dtype=torch.float32)` raises
`TypeError: MixedPrecisionPolicy.__init__() got an unexpected keyword argument 'buffer_dtype'`
(the same for `keep_low_precision_grads`; a fifth positional argument: `takes from 1 to 5
positional arguments but 6 were given`). The dataclass does not check its field types, so a
string is accepted at construction and at `fully_shard`, then fails inside FSDP:
`param_dtype="bfloat16"` alone and `output_dtype="float32"` raise `RuntimeError: Invalid device
string: 'bfloat16'` at the first forward; `reduce_dtype="float32"` raises `TypeError: empty():
argument 'dtype' must be torch.dtype, not str` (in the first backward alone, at the first
forward together with a string `param_dtype`), minutes into a job that had to start up, load
and shard first.

Use instead:

```python
mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
```

## Fix safety
A string naming a torch dtype becomes that dtype (`"bfloat16"` → `torch.bfloat16`): safe, it is
what the string meant and the only value the field accepts. FSDP1 fields are not removed (what
they asked for has no FSDP2 equivalent; the message says what FSDP2 does instead).
"""
    valid = (
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

dtype = getattr(torch, config.param_dtype)
policy = MixedPrecisionPolicy(dtype, torch.float32, None, True)
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)  # expect: FSDP029
""",
        """
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

policy = MixedPrecisionPolicy(param_dtype="bfloat16", reduce_dtype=torch.float32)  # expect: FSDP029
""",
    )
    fix_offer = FixOffer(
        summary='a string dtype → the torch dtype it names (`"bfloat16"` → `torch.bfloat16`) (safe)',
        applicabilities=(Applicability.SAFE,),
        safety="the dtype the string names is what it meant, and the only value the field accepts",
    )
    requires = (("MixedPrecisionPolicy",),)
    signature = RuntimeSignature(
        evidence="exception",
        exception=("TypeError", "RuntimeError"),
        # a string dtype: torch 2.13 says "must be torch.dtype", 2.11 fails in the `empty()` given it
        message=r"MixedPrecisionPolicy\.__init__\(\)|Invalid device string|must be torch\.dtype, not str"
        r"|received an invalid combination of arguments - got \(.*dtype=str",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for policy in trace.calls(POLICY):
                if trace.other_callees(policy):
                    continue  # the name may be FSDP1's `MixedPrecision`, whose fields these may be
                problems = _problems(policy)
                if problems:
                    yield Finding(
                        policy.node,
                        "`MixedPrecisionPolicy`: " + "; ".join(problems),
                        fix=_dtypes_from_strings(facts, policy),
                    )


def _problems(policy: Event) -> list[str]:
    problems = [
        f"has no field `{name}` ({FSDP1_FIELDS.get(name, 'not a MixedPrecisionPolicy field')}): `TypeError` at "
        "this call"
        for name in policy.kwargs
        if name not in FIELDS and name != UNKNOWN_KEYWORDS
    ]
    if len(policy.args) > len(FIELDS):
        problems.append(f"takes at most {len(FIELDS)} positional arguments, given {len(policy.args)}: `TypeError`")
    for field in DTYPE_FIELDS:
        value = policy.arg(FIELDS.index(field), field)
        if value is not None and _certainly_string(value):
            problems.append(f"`{field}` given a string: FSDP fails with it at the first forward or backward")
    return problems


def _certainly_string(value: Value) -> bool:
    """Is the value a string on every path (not a string on one and a dtype on another)?"""
    return all(isinstance(option, Const) and isinstance(option.value, str) for option in options(value))


def _dtypes_from_strings(facts: FileFacts, policy: Event) -> Rewrite | None:
    """Each dtype given as a string literal naming a torch dtype, as that dtype; none when another
    problem remains (an unknown field, a string held in a variable or naming no dtype)."""
    call = policy.node
    if not isinstance(call, cst.Call) or any(name not in FIELDS for name in policy.kwargs):
        return None
    if len(policy.args) > len(FIELDS):
        return None
    module = facts.text_of(call).module  # the call may be in another module of the project
    replacements, imports = {}, set()
    for field in DTYPE_FIELDS:
        value = policy.arg(FIELDS.index(field), field)
        if value is None or not _certainly_string(value):
            continue
        arg = _argument(call, field)
        literal = arg.value if arg is not None else None
        if not isinstance(literal, cst.SimpleString) or literal.evaluated_value not in DTYPE_NAMES:
            return None
        expression, needed = builders.reference(module, f"torch.{literal.evaluated_value}")
        replacements[literal] = expression
        imports |= {needed} if needed else set()
    if not replacements:
        return None
    return Rewrite("use torch dtypes, not strings", replacements, imports=tuple(sorted(imports, key=str)))


def _argument(call: cst.Call, field: str) -> cst.Arg | None:
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    index = FIELDS.index(field)
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == field:
            return arg
    return positional[index] if index < len(positional) else None
