from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, Symbol, Value, options
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature

# FSDP1 keyword -> what to write with fully_shard instead.
REPLACEMENTS = {
    "auto_wrap_policy": "an explicit bottom-up loop: `for block in model.layers: fully_shard(block)`, then the root",
    "sharding_strategy": "`reshard_after_forward=True` (FULL_SHARD) or `False` (SHARD_GRAD_OP); HYBRID_SHARD is a 2-D `mesh`",
    "cpu_offload": "`offload_policy=CPUOffloadPolicy()`",
    "mixed_precision": "`mp_policy=MixedPrecisionPolicy(param_dtype=..., reduce_dtype=...)`",
    "use_orig_params": "nothing: FSDP2 always exposes the original parameters (drop it)",
    "device_id": "nothing: the device comes from `mesh` (drop it)",
    "sync_module_states": "nothing: FSDP2 has none; load on every rank or broadcast with "
    "`set_model_state_dict(..., broadcast_from_rank0=True)`",
    "param_init_fn": "`model.to_empty(device=...)` after sharding, then initialise the parameters",
    "limit_all_gathers": "nothing: FSDP2 does not need it (drop it)",
    "backward_prefetch": "nothing, or explicit prefetching with `set_modules_to_backward_prefetch`",
    "forward_prefetch": "explicit prefetching with `set_modules_to_forward_prefetch`",
    "process_group": "`mesh=` (a DeviceMesh)",
    "device_mesh": "`mesh=` (the same DeviceMesh, under FSDP2's name)",
    "ignored_modules": "`ignored_params=`",
}
SHARDING_STRATEGY = f"{apis.FSDP}.ShardingStrategy."
# The strategies `reshard_after_forward` expresses: FULL_SHARD frees the parameters after forward.
RESHARD_AFTER_FORWARD = {"FULL_SHARD": "True", "SHARD_GRAD_OP": "False"}
# FSDP1 keywords the fix drops: (the value that makes dropping a no-op, or None when dropping
# never changes anything; what dropping any other value changes).
DROPPED = {
    "limit_all_gathers": (None, ""),
    "use_orig_params": (True, "FSDP2 always uses the original parameters, which `use_orig_params=False` did not"),
    "device_id": (
        (),  # never a no-op: FSDP2 takes the device from the mesh and the current CUDA device
        "FSDP2 puts the parameters on the mesh's device type at the *current* device: select the rank's device "
        "(`torch.cuda.set_device`) first",
    ),
    "sync_module_states": (
        False,
        "FSDP2 does not broadcast rank 0's weights: load them on every rank, or use "
        "`set_model_state_dict(..., broadcast_from_rank0=True)`",
    ),
}


class Fsdp1Arguments(Rule):
    code = "FSDP022"
    name = "fsdp1-arguments"
    summary = "FSDP1 arguments passed to `fully_shard`"
    hint = (
        "use FSDP2's arguments: `mesh=`, `reshard_after_forward=`, `mp_policy=MixedPrecisionPolicy(...)`, "
        "`offload_policy=CPUOffloadPolicy()`, and a bottom-up loop instead of `auto_wrap_policy`"
    )
    failure = "`TypeError: fully_shard() got an unexpected keyword argument ...` (or a ValueError) at the call"
    fix_offer = FixOffer(
        summary=(
            "`sharding_strategy=ShardingStrategy.FULL_SHARD` / `SHARD_GRAD_OP` (or either given as "
            "`reshard_after_forward`) → `reshard_after_forward=True` / `False`; a positional mesh → "
            "`mesh=`; drops `limit_all_gathers`, `use_orig_params=True`, `sync_module_states=False`. "
            "Dropping `device_id`, `use_orig_params=False` or `sync_module_states=True` makes the fix "
            "unsafe. No fix when another FSDP1 argument (`auto_wrap_policy`, `cpu_offload`, `**kwargs`, "
            "...) has no mechanical form"
        ),
        applicabilities=(Applicability.SAFE, Applicability.UNSAFE),
        safety=(
            "renaming an FSDP1 argument to its FSDP2 form, or dropping one that FSDP2 does by default, is"
            " safe; dropping `device_id`, `use_orig_params=False` or `sync_module_states=True` changes "
            "what the run does, so that fix is unsafe and its description says what changes."
        ),
    )
    docs = """
## What it does
Flags `fully_shard(...)` calls that use FSDP1 (`FullyShardedDataParallel`) arguments:
`auto_wrap_policy`, `sharding_strategy`, `cpu_offload`, `mixed_precision`, `use_orig_params`,
`device_id`, `sync_module_states`, `param_init_fn`, `limit_all_gathers`, `backward_prefetch`, ...,
a mesh passed positionally, or a `ShardingStrategy` as `reshard_after_forward` (every member
fails there, so `ShardingStrategy[args.sharding]` with a name read at run time is reported too,
without a fix: the flag depends on the member). Only `torch.distributed.fsdp.fully_shard` is
checked, not another library's `fully_shard`.

## Why is this bad?
`fully_shard` has a different signature: `fully_shard(module, *, mesh, reshard_after_forward,
shard_placement_fn, mp_policy, offload_policy, ignored_params)`. Observed with torch 2.13:
`TypeError: fully_shard() got an unexpected keyword argument 'sharding_strategy'` (each of
the FSDP1 keywords), `TypeError: fully_shard() takes 1 positional argument but 2 were given`, and
`ValueError: reshard_after_forward should be a bool or an int ..., not ShardingStrategy.SHARD_GRAD_OP`.
The message names the FSDP2 replacement of every argument it finds.
"""
    valid = (
        """
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

for block in model.layers:
    fully_shard(block, mesh=mesh, reshard_after_forward=True, mp_policy=MixedPrecisionPolicy())
fully_shard(model, mesh=mesh)
""",
        """
from megatron_fsdp import fully_shard

fully_shard(model, sharding_strategy="optim_grads_params")
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import ShardingStrategy, fully_shard

fully_shard(model, sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=True)  # expect: FSDP022
""",
        """
from torch.distributed.fsdp import ShardingStrategy, fully_shard

fully_shard(model, mesh)  # expect: FSDP022
fully_shard(model.head, reshard_after_forward=ShardingStrategy.SHARD_GRAD_OP)  # expect: FSDP022
""",
        """
import torch.distributed.fsdp as fsdp

for block in model.blocks:
    fsdp.fully_shard(block, device_mesh=mesh)  # expect: FSDP022
""",
    )
    signature = RuntimeSignature(
        evidence="exception",
        exception=("TypeError", "ValueError"),
        message=r"unexpected keyword argument|positional argument|reshard_after_forward should be",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for shard in trace.shards:
                problems = _problems(shard)
                if problems:
                    yield Finding(
                        shard.node,
                        "FSDP1 arguments to `fully_shard`: " + "; ".join(problems),
                        fix=_fsdp2_arguments(shard),
                    )


def _problems(shard: Event) -> list[str]:
    problems = [f"`{name}` -> {REPLACEMENTS[name]}" for name in shard.kwargs if name in REPLACEMENTS]
    if len(shard.args) > 1:
        problems.append("a positional mesh -> `mesh=...` (keyword only)")
    strategy = shard.kwargs.get("reshard_after_forward")
    # every path: a setting that holds a strategy only where another path converts it to a bool
    # (a config object used for FSDP1 and FSDP2) is not certainly wrong
    if strategy is not None and all(
        isinstance(option, Symbol) and option.qname.startswith(SHARDING_STRATEGY) for option in options(strategy)
    ):
        problems.append("a `ShardingStrategy` as `reshard_after_forward` -> `True` or `False`")
    return problems


def _fsdp2_arguments(shard: Event) -> Rewrite | None:
    """Rewrite the call's FSDP1 arguments when each has a mechanical FSDP2 form: a strategy as
    `reshard_after_forward`, a positional mesh as `mesh=`, and the keywords FSDP2 does without
    dropped. Unsafe when dropping one changes behaviour (the description says how)."""
    call = shard.node
    if not isinstance(call, cst.Call):
        return None
    notes, unsafe_notes, args = [], [], []
    positional = [arg for arg in call.args if arg.keyword is None]
    for arg in call.args:
        name = arg.keyword.value if arg.keyword is not None else None
        value = shard.kwargs.get(name) if name else None
        if (
            name is None
            and len(positional) == 2
            and arg is positional[1]
            and not arg.star
            and "mesh" not in shard.kwargs
        ):
            no_space = cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            )
            args.append(arg.with_changes(keyword=cst.Name("mesh"), equal=no_space))
            notes.append("the mesh as `mesh=`")
        elif name == "device_mesh" and "mesh" not in shard.kwargs and len(positional) < 2:
            args.append(arg.with_changes(keyword=cst.Name("mesh")))
            notes.append("`device_mesh=` as `mesh=`")
        elif name in DROPPED:
            no_op, change = DROPPED[name]
            if no_op is None or value == Const(no_op):
                notes.append(f"drop `{name}`")
            else:
                unsafe_notes.append(f"drop `{name}`: {change}")
        elif name in ("sharding_strategy", "reshard_after_forward") and _strategy(value) is not None:
            if name == "sharding_strategy" and "reshard_after_forward" in shard.kwargs:
                return None
            flag = RESHARD_AFTER_FORWARD[_strategy(value)]  # type: ignore[index]
            args.append(arg.with_changes(keyword=cst.Name("reshard_after_forward"), value=cst.Name(flag)))
            notes.append(f"`{name}={_strategy(value)}` as `reshard_after_forward={flag}`")
        elif name in REPLACEMENTS or name == "sharding_strategy" or (name is None and arg is not call.args[0]):
            return None  # no mechanical FSDP2 form
        else:
            args.append(arg)
    if not notes and not unsafe_notes:
        return None
    return Rewrite(
        "FSDP2 arguments: " + "; ".join(notes + unsafe_notes),
        {call: call.with_changes(args=builders.without_arguments(call, args))},
        applicability=Applicability.UNSAFE if unsafe_notes else Applicability.SAFE,
    )


def _strategy(value: Value | None) -> str | None:
    """FULL_SHARD or SHARD_GRAD_OP, when the value is certainly that strategy."""
    if value is None:
        return None
    found = {
        option.qname.removeprefix(SHARDING_STRATEGY) if isinstance(option, Symbol) else None
        for option in options(value)
    }
    strategy = found.pop() if len(found) == 1 else None
    return strategy if strategy in RESHARD_AFTER_FORWARD else None
