"""Canonical qualified names of the APIs the analysis and the rules care about, and classifiers of
names (is this an optimizer class, a rank function, a rank-named variable?).

Names are resolved by the interpreter through the file's own imports (``import x as y``,
``from x import y as z``, function-local imports); this module only folds the many public and
private module paths of one API into one canonical name, so that
``torch.distributed._composable.fsdp.fully_shard`` and ``torch.distributed.fsdp.fully_shard``
are the same thing to every rule, and a different library's ``fully_shard`` is not.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the kinds' enums load with the first name classified: the rule index imports this module
    from fsdp2_lint.analysis.kinds import RankKind, UniformKind

FSDP = "torch.distributed.fsdp"
FULLY_SHARD = f"{FSDP}.fully_shard"
REGISTER_FORWARD_METHOD = f"{FSDP}.register_fsdp_forward_method"
FSDP1 = f"{FSDP}.FullyShardedDataParallel"
FSDP_MODULE = f"{FSDP}.FSDPModule"
DTENSOR = "torch.distributed.tensor.DTensor"
# Calls that make a tensor a DTensor, each rank keeping its shard.
DISTRIBUTE_TENSOR = ("torch.distributed.tensor.distribute_tensor", f"{DTENSOR}.from_local")
LOADERS = frozenset(
    {"torch.load", "safetensors.torch.load_file", "safetensors.torch.load", "torch.hub.load_state_dict_from_url"}
)
DDP = "torch.nn.parallel.DistributedDataParallel"
PARALLELIZE_MODULE = "torch.distributed.tensor.parallel.parallelize_module"
TORCH_SAVE = "torch.save"
DCP = "torch.distributed.checkpoint"
STATE_DICT = "torch.distributed.checkpoint.state_dict"
GET_MODEL_STATE_DICT = f"{STATE_DICT}.get_model_state_dict"
GET_OPTIMIZER_STATE_DICT = f"{STATE_DICT}.get_optimizer_state_dict"
GET_STATE_DICT = f"{STATE_DICT}.get_state_dict"
SET_MODEL_STATE_DICT = f"{STATE_DICT}.set_model_state_dict"
SET_OPTIMIZER_STATE_DICT = f"{STATE_DICT}.set_optimizer_state_dict"
STATE_DICT_OPTIONS = f"{STATE_DICT}.StateDictOptions"
# FSDP1's enums: `ShardingStrategy[name]` is the member `name` names, as `ShardingStrategy.FULL_SHARD` is.
ENUMS = frozenset({f"{FSDP}.ShardingStrategy", f"{FSDP}.StateDictType", f"{FSDP}.BackwardPrefetch"})
# Types every module passes, the root included (a sharded root is an FSDPModule).
ROOT_ADMITTING_TYPES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", FSDP_MODULE})
# Attributes only DDP and FSDP1 wrappers have: `hasattr(model, "no_sync")` rules out FSDP2.
WRAPPER_ONLY = frozenset({"no_sync", "module"})
# Attributes only DTensors have among tensors: `hasattr(v, "full_tensor")` tells a shard from a plain tensor.
DTENSOR_ONLY = frozenset({"full_tensor", "to_local", "placements", "device_mesh", "redistribute"})

# Exact renames first (a module path that is also a function name), then module prefixes.
_EXACT = {
    "torch.distributed._composable.fsdp.fully_shard": FULLY_SHARD,
    "torch.distributed.fsdp.fully_shard.fully_shard": FULLY_SHARD,
}
_PREFIXES = {
    "torch.distributed._composable.fsdp": FSDP,
    "torch.distributed.fsdp._fully_shard._fully_shard": FSDP,
    "torch.distributed.fsdp._fully_shard._fsdp_api": FSDP,
    "torch.distributed.fsdp._fully_shard": FSDP,
    "torch.distributed.fsdp.fully_shard": FSDP,
    "torch.distributed.fsdp.fully_sharded_data_parallel": FSDP,
    "torch.distributed.fsdp.api": FSDP,
    "torch.distributed.checkpoint.state_dict_saver": DCP,
    "torch.distributed.checkpoint.state_dict_loader": DCP,
    "torch.distributed.distributed_c10d": "torch.distributed",
    "torch.distributed.device_mesh": "torch.distributed",
    "torch.distributed._tensor": "torch.distributed.tensor",
    "torch.distributed.tensor._api": "torch.distributed.tensor",
    "torch.distributed.tensor.parallel.api": "torch.distributed.tensor.parallel",
    "torch.nn.parallel.distributed": "torch.nn.parallel",
    "torch.nn.modules.container": "torch.nn",
    "torch.serialization": "torch",
    "torch.utils.model_zoo": "torch.hub",
    "torch.autograd.grad_mode": "torch",
    "torch.autograd": "torch",
}
_PREFIX_ORDER = sorted(_PREFIXES, key=len, reverse=True)


def canonical(qname: str) -> str:
    if qname in _EXACT:
        return _EXACT[qname]
    for prefix in _PREFIX_ORDER:
        if qname.startswith(prefix + "."):
            return canonical(_PREFIXES[prefix] + qname[len(prefix) :])
    return qname


def vendored_torch(qname: str) -> str | None:
    """``torch.distributed.x.f`` for ``pkg.third_party.torch.distributed.x.f``: a project's copy of a
    torch.distributed module (verl ships torch 2.7's ``checkpoint/state_dict.py``) is that module.
    Asked of every name the analysis resolves, so most names are turned away without splitting."""
    if ".torch.distributed." not in qname and not qname.endswith(".torch.distributed"):
        return None
    parts = qname.split(".")
    for index in range(1, len(parts) - 1):
        if parts[index] == "torch" and parts[index + 1] == "distributed":
            return canonical(".".join(parts[index:]))
    return None


# Names a star import from these modules may bring into scope (only what rules resolve).
STAR_EXPORTS = {
    FSDP: {
        "fully_shard",
        "register_fsdp_forward_method",
        "FullyShardedDataParallel",
        "FSDPModule",
        "MixedPrecisionPolicy",
        "CPUOffloadPolicy",
        "OffloadPolicy",
        "ShardingStrategy",
        "StateDictType",
        "FullStateDictConfig",
        "ShardedStateDictConfig",
        "CPUOffload",
        "MixedPrecision",
        "BackwardPrefetch",
    },
    STATE_DICT: {
        "get_model_state_dict",
        "get_optimizer_state_dict",
        "get_state_dict",
        "set_model_state_dict",
        "set_optimizer_state_dict",
        "set_state_dict",
        "StateDictOptions",
    },
}

_OPTIMIZER_CLASSES = {
    "Adam",
    "AdamW",
    "SGD",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Rprop",
    "LBFGS",
    "SparseAdam",
    "ASGD",
    "Adafactor",
    "Lion",
    "LAMB",
    "Lamb",
    "LARS",
    "Muon",
    "Shampoo",
    "DistributedShampoo",
    "SOAP",
    "Sophia",
    "Prodigy",
    "AdamW8bit",
    "Adam8bit",
    "PagedAdamW",
    "PagedAdamW8bit",
    "PagedAdamW32bit",
    "FusedAdam",
    "FusedLAMB",
    "FusedSGD",
    "AdamWScheduleFree",
    "SGDScheduleFree",
    "AnyPrecisionAdamW",
    "AdamWFp8",
}
# The classifiers' patterns are strings: `re` compiles each on first use and keeps it, so importing
# this module (the rule index does, for every run) compiles none.
_NOT_OPTIMIZER = r"\.(lr_scheduler|swa_utils)\.|Scheduler|Warmup|Averaged"


def is_optimizer(qname: str) -> bool:
    """A constructor of an optimizer: ``torch.optim.*`` classes and the common third-party ones."""
    module, _, last = qname.rpartition(".")
    if last == "*":  # getattr(torch.optim, name)
        return module == "torch.optim"
    if not last[:1].isupper() or re.search(_NOT_OPTIMIZER, qname):
        return False
    return last in _OPTIMIZER_CLASSES or qname.startswith("torch.optim.") or "optim" in module


_OPTIMIZER_FACTORY = r"^_?(build|create|get|make|init|setup|configure)_optim(izer)?s?$"


def is_optimizer_factory(name: str) -> bool:
    """A function or method, defined outside the file, named for building the optimizer
    (``build_optimizer(model, cfg)``, ``model.configure_optimizers(...)``)."""
    return bool(re.match(_OPTIMIZER_FACTORY, name.rpartition(".")[2]))


_SHARDING_HELPER = r"(?i)shard|fsdp|parallel|wrap|distribut"


def is_sharding_helper(qname: str) -> bool:
    """A function from outside torch whose name says it may apply ``fully_shard`` to the modules
    it is given (``apply_fsdp``, ``parallelize_model``, ``prepare_fully_shard``). torch's own
    ``parallelize_module`` (tensor parallelism) is not one."""
    return not qname.startswith("torch.") and bool(re.search(_SHARDING_HELPER, qname.rpartition(".")[2]))


GRAD_DISABLING = {"torch.no_grad", "torch.inference_mode"}

_RANK_NAME = (
    r"^_?(global_|local_|ddp_|ddp_local_|dp_|world_|process_|node_local_|my_)?rank(_id|_idx)?$"
    r"|^(local_)?process_index$"
)
_RANK_ZERO_NAME = (
    r"^_?(is_)?(local_|global_)?(main|master|chief|primary)(_process|_rank)?$"
    r"|^_?(is_)?(global_|local_)?(rank_?0|rank_zero|global_zero|local_zero)$"
    r"|^_?(is_)?(world_|local_)?process_zero$"
)
_RANK_FUNCTION = r"(^|\.)(get_(global_|local_|node_local_)?rank|get_process_index)$"
_RANK_ZERO_FUNCTION = r"(^|\.)(is_(local_|global_)?(main_process|master|rank_zero|rank0|primary))$"
_DISTRIBUTED_CHECK = r"^torch\.distributed\.(is_initialized|is_available)$"
# is_distributed(), is_dist_avail_and_initialized(), is_ddp(): helpers defined outside the file.
_DISTRIBUTED_FUNCTION = r"^_?is_(torch_)?(dist|distributed|ddp)(_avail(able)?)?(_and)?(_initiali[sz]ed|_enabled)?$"
# Flags of a distributed run: nanoGPT's `ddp`, `is_distributed`, `use_ddp`.
_DISTRIBUTED_NAME = r"^_?((is|use)_(ddp|dist|distributed)|ddp|distributed)(_run|_training|_enabled)?$"
_WORLD_SIZE_FUNCTION = r"(^|\.)get_world_size$"
_WORLD_SIZE_NAME = r"^_?(world_size|num_processes|num_ranks)$"
WORLD_SIZE_ENV_VARS = frozenset({"WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS"})
# Decorators that run a function on rank 0 only (Lightning, Accelerate, and home-grown ones).
RANK_ZERO_DECORATORS = frozenset({"rank_zero_only", "main_process_only", "on_main_process", "on_rank0", "rank0_only"})
RANK_ENV_VARS = frozenset({"RANK", "LOCAL_RANK", "GLOBAL_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_LOCALID"})


@cache  # the same few names are classified over and over
def rank_kind_of_name(name: str) -> RankKind | None:
    """``RANK`` for names that hold a process rank, ``ZERO`` for rank-0 flags, else None."""
    from fsdp2_lint.analysis.kinds import RankKind

    if re.match(_RANK_NAME, name):
        return RankKind.RANK
    if re.match(_RANK_ZERO_NAME, name):
        return RankKind.ZERO
    return None


@cache
def rank_kind_of_call(qname: str) -> RankKind | None:
    """``RANK`` for functions that return a process rank, ``ZERO`` for rank-0 tests, else None."""
    from fsdp2_lint.analysis.kinds import RankKind

    if re.search(_RANK_FUNCTION, qname):
        return RankKind.RANK
    if re.search(_RANK_ZERO_FUNCTION, qname):
        return RankKind.ZERO
    last = qname.rpartition(".")[2]
    if last.startswith("is_"):  # is_main(), is_rank_0(), trainer.is_world_process_zero()
        return rank_kind_of_name(last)
    return None


@cache
def uniform_kind_of_call(qname: str) -> UniformKind | None:
    """``DIST`` for checks that the job is distributed, ``SIZE`` for the world size."""
    from fsdp2_lint.analysis.kinds import UniformKind

    if re.match(_DISTRIBUTED_CHECK, qname) or re.match(_DISTRIBUTED_FUNCTION, qname.rpartition(".")[2]):
        return UniformKind.DIST
    if re.search(_WORLD_SIZE_FUNCTION, qname):
        return UniformKind.SIZE
    return None


@cache
def uniform_kind_of_name(name: str) -> UniformKind | None:
    """``SIZE`` for a variable holding the world size, ``DIST`` for a distributed-run flag."""
    from fsdp2_lint.analysis.kinds import UniformKind

    if re.match(_WORLD_SIZE_NAME, name):
        return UniformKind.SIZE
    return UniformKind.DIST if re.match(_DISTRIBUTED_NAME, name) else None


def names_a_rank(word: str) -> bool:
    """Can the interpreter take this identifier for a rank, a rank-0 flag or test, or a rank-0
    decorator (as `torch_api.decorated` knows them)? FSDP007's prefilter asks it of a file's words."""
    return bool(rank_kind_of_name(word) or rank_kind_of_call(word)) or word in RANK_ZERO_DECORATORS


# What a device-mesh dimension's name says it is for: split on "_" / "-", one word of a set is
# enough. FSDP040's check reads names in the code; its runtime evidence reads them from the mesh.
MESH_REPLICATE_WORDS = frozenset({"replicate", "replica", "replicas", "ddp", "rep"})
MESH_SHARD_WORDS = frozenset({"shard", "sharded", "fsdp", "zero"})
# Words that name a data-parallel dim (of either kind, or unspecified: `dp`).
MESH_DATA_WORDS = MESH_REPLICATE_WORDS | MESH_SHARD_WORDS | {"dp", "data"}
# Words that name a dim of another parallelism, which fully_shard must not shard or replicate over.
MESH_MODEL_WORDS = frozenset(
    "tp sp cp ep pp etp tensor sequence seq context expert experts pipeline ulysses ring".split()
)


def mesh_dim_role(name: str) -> str:
    """``replicate``, ``shard``, ``model`` (another parallelism) or ``""`` (says nothing: ``dp``)."""
    words = set(name.lower().replace("-", "_").split("_"))
    if words & MESH_MODEL_WORDS and not words & MESH_DATA_WORDS:
        return "model"
    if words & MESH_REPLICATE_WORDS and not words & MESH_SHARD_WORDS:
        return "replicate"
    if words & MESH_SHARD_WORDS and not words & MESH_REPLICATE_WORDS:
        return "shard"
    return ""
