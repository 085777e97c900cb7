from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import UNKNOWN_KEYWORDS, Event, ObjKind, Ref, const, container_items, options
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

INIT_DEVICE_MESH = "torch.distributed.init_device_mesh"


class WrongMesh(Rule):
    code = "FSDP040"
    name = "wrong-mesh"
    summary = "`fully_shard` given a whole 2-D mesh that is not a (replicate, shard) HSDP mesh"
    hint = (
        'pass the data-parallel slice (`mesh=world_mesh["dp"]`); for HSDP build the mesh in (replicate, '
        'shard) order, `init_device_mesh(dev, (nodes, gpus_per_node), mesh_dim_names=("replicate", "shard"))`'
    )
    failure = (
        "silent: a 2-D mesh is HSDP, parameters replicated over its first dim and sharded over its second "
        "(over `tp`, or across nodes), whatever the dims are named"
    )
    severity = Severity.WARNING
    docs = """
## What it does
Flags `fully_shard(module, mesh=m)` where `m` is the whole mesh an `init_device_mesh(...)` call
built with two named dimensions, and the names say it is not a (replicate, shard) HSDP mesh:
- one dimension names another parallelism (`("dp", "tp")`, `("dp", "sp")`, `("fsdp", "cp")`,
  `("pp", "dp")`): the mesh meant for tensor/sequence/context/pipeline parallelism as a whole,
  where its data-parallel slice `m["dp"]` was meant;
- the names are in (shard, replicate) order (`("dp_shard", "dp_replicate")`, `("shard",
  "replicate")`).

Not flagged: a slice (`m["dp"]`, `m["dp_replicate", "dp_shard"]`, a flattened `m["dp", "cp"]._flatten()`),
a 1-D mesh, a 2-D mesh whose names say (replicate, shard) (`("replicate", "shard")`,
`("dp_replicate", "dp_shard")`, `("ddp", "fsdp")`), names that say nothing about the role
(`("dp", "x")`, no names), a mesh not built in the code the analysis sees, a call given
`dp_mesh_dims=` (torch 2.13: the mesh is then the full SPMD mesh and the names pick the dims),
and a call with `**kwargs` whose keys are not known (they may hold `dp_mesh_dims`).

## Why is this bad?
`fully_shard` never reads dimension names: its docstring (torch 2.13) says "If 2D, then
parameters are sharded across the 1st dim and replicated across the 0th dim (HSDP) with
`(Replicate(), Shard(0))` placement". Observed with torch 2.13 (CPU/gloo, 4 ranks): given
`init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))` whole, every parameter becomes a
DTensor on that 2-D mesh with placements `(Replicate(), Shard(dim=0))`: replicated over `dp` and
sharded over `tp`, with no error and no warning; training runs. Each rank holds half of each
parameter where it was meant to hold a quarter's share of the `dp` group, gradients are
reduce-scattered across the tensor-parallel ranks, and a later `parallelize_module` over `tp` is
applied to parameters that are already sharded over it. A (shard, replicate)-ordered mesh
(`("dp_shard", "dp_replicate")`, shape `(gpus_per_node, nodes)`) likewise shards across nodes and
replicates within a node: the memory and bandwidth the user meant to save are not saved.
(torchtitan's `docs/fsdp.md` states the order the wrong way round.) A 3-D mesh given whole is
not silent: `ValueError: fully_shard expects a 1D or 2D DeviceMesh` at the call.

Use instead:

```python
world = init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))
fully_shard(block, mesh=world["dp"])
hsdp = init_device_mesh("cuda", (nodes, gpus_per_node), mesh_dim_names=("replicate", "shard"))
fully_shard(block, mesh=hsdp)
```

## Known problems
Only a mesh built by `init_device_mesh` with literal dimension names (or names the analysis can
follow to a literal) is judged; a mesh from a library helper, a `DeviceMesh(...)` built by hand, or
names read from a config is not (Lightning's `ModelParallelStrategy` hands its parallelize function
the whole `("data_parallel", "tensor_parallel")` mesh; a `fully_shard(m, mesh=device_mesh)` there
is this misuse, but the mesh is built inside the library). The role of a dimension is read from its name's words
(`replicate`/`ddp`, `shard`/`fsdp`, `tp`/`sp`/`cp`/`ep`/`pp`); a name of no known word (`dp`) says
nothing.
"""
    valid = (
        """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

world = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
fully_shard(model, mesh=world["dp"])
""",
        """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

mesh = init_device_mesh("cuda", (2, 8), mesh_dim_names=("dp_replicate", "dp_shard"))
fully_shard(model, mesh=mesh)
""",
    )
    invalid = (
        """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

world = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
fully_shard(model, mesh=world)  # expect: FSDP040
""",
        """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

mesh = init_device_mesh("cuda", (8, 2), mesh_dim_names=("shard", "replicate"))
fully_shard(model, mesh=mesh)  # expect: FSDP040
""",
    )
    requires = (("fully_shard",), ("mesh",))
    signature = RuntimeSignature(evidence="wrong_mesh")

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        seen: set[int] = set()
        for trace in facts.traces:
            for shard in trace.shards:
                if id(shard.node) in seen:
                    continue
                problem = _problem(shard)
                if problem:
                    seen.add(id(shard.node))
                    yield Finding(shard.node, problem)


def _problem(shard: Event) -> str | None:
    if "dp_mesh_dims" in shard.kwargs or UNKNOWN_KEYWORDS in shard.kwargs:
        return None  # the whole SPMD mesh with its data-parallel dims named (torch 2.13), or unknown keywords
    mesh = shard.kwargs.get("mesh")
    if mesh is None:
        return None
    for option in options(mesh):
        names = _whole_mesh_names(option)
        if names is None or len(names) != 2:
            continue
        roles = [apis.mesh_dim_role(name) for name in names]
        shown = f"({names[0]!r}, {names[1]!r})"
        if "model" in roles:
            other = names[roles.index("model")]
            data = [name for name, kind in zip(names, roles, strict=True) if kind != "model"]
            slice_ = f'`mesh["{data[0]}"]`' if data else "its data-parallel slice"
            return (
                f"`fully_shard` given the whole 2-D mesh {shown}: it treats any 2-D mesh as HSDP, replicating "
                f"over {names[0]!r} and sharding over {names[1]!r}, so it also spans the {other!r} dim; "
                f"pass {slice_}"
            )
        if roles == ["shard", "replicate"]:
            return (
                f"`fully_shard` given a 2-D mesh in (shard, replicate) order {shown}: it replicates over the "
                f"first dim ({names[0]!r}) and shards over the second ({names[1]!r}), whatever their names; "
                "build it as (replicate, shard)"
            )
    return None


def _whole_mesh_names(value: object) -> list[str] | None:
    """The dimension names of the mesh ``value`` is, when it is an ``init_device_mesh`` result
    itself (not a slice of one) built with names the analysis knows."""
    if not isinstance(value, Ref) or value.path:
        return None
    root = value.root
    if root.kind is not ObjKind.NEW or root.qname != INIT_DEVICE_MESH or root.event is None:
        return None
    given = root.event.kwargs.get("mesh_dim_names")
    if given is None:
        return None
    items = container_items(given)
    if items is None:
        return None
    names = [const(item) for _, item in items]
    return names if all(isinstance(name, str) for name in names) else None
