from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint import names
from fsdp2_lint.facts import Event, FileFacts
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature
from fsdp2_lint.values import Symbol, options

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
    "ignored_modules": "`ignored_params=`",
}
SHARDING_STRATEGY = f"{names.FSDP}.ShardingStrategy."


class Fsdp1Arguments(Rule):
    code = "FSDP022"
    name = "fsdp1-arguments"
    summary = "FSDP1 arguments passed to `fully_shard`"
    hint = (
        "use FSDP2's arguments: `mesh=`, `reshard_after_forward=`, `mp_policy=MixedPrecisionPolicy(...)`, "
        "`offload_policy=CPUOffloadPolicy()`, and a bottom-up loop instead of `auto_wrap_policy`"
    )
    failure = "`TypeError: fully_shard() got an unexpected keyword argument ...` (or a ValueError) at the call"
    docs = """
## What it does
Flags `fully_shard(...)` calls that use FSDP1 (`FullyShardedDataParallel`) arguments:
`auto_wrap_policy`, `sharding_strategy`, `cpu_offload`, `mixed_precision`, `use_orig_params`,
`device_id`, `sync_module_states`, `param_init_fn`, `limit_all_gathers`, `backward_prefetch`, ...,
a mesh passed positionally, or a `ShardingStrategy` as `reshard_after_forward`. Only
`torch.distributed.fsdp.fully_shard` is checked, not another library's `fully_shard`.

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
                    yield Finding(shard.node, "FSDP1 arguments to `fully_shard`: " + "; ".join(problems))


def _problems(shard: Event) -> list[str]:
    problems = [f"`{name}` -> {REPLACEMENTS[name]}" for name in shard.kwargs if name in REPLACEMENTS]
    if len(shard.args) > 1:
        problems.append("a positional mesh -> `mesh=...` (keyword only)")
    strategy = shard.kwargs.get("reshard_after_forward")
    if strategy is not None and any(
        isinstance(option, Symbol) and option.qname.startswith(SHARDING_STRATEGY) for option in options(strategy)
    ):
        problems.append("a `ShardingStrategy` as `reshard_after_forward` -> `True` or `False`")
    return problems
