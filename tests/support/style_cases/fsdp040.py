"""Style cases for FSDP040: code written in styles the fixtures do not use."""

CASES = {
    "fsdp040-aliases-list-names-and-names-in-a-variable": """
        import torch.distributed as dist
        from torch.distributed import fsdp
        from torch.distributed._composable.fsdp import fully_shard as shard
        NAMES = ["dp", "cp"]
        world = dist.init_device_mesh("cuda", (4, 2), mesh_dim_names=NAMES)
        fsdp.fully_shard(model.encoder, mesh=world)  # expect: FSDP040
        shard(model, mesh=world)  # expect: FSDP040
    """,
    "fsdp040-model-parallel-dim-first-and-long-names": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("pipeline", "data"))
        fully_shard(model, mesh=mesh)  # expect: FSDP040
        mesh2 = init_device_mesh("cuda", (2, 4), mesh_dim_names=("data_parallel", "tensor_parallel"))
        fully_shard(model, mesh=mesh2)  # expect: FSDP040
    """,
    "fsdp040-shard-replicate-order-in-a-method": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        class Parallel:
            def __init__(self, gpus, nodes):
                self.mesh = init_device_mesh("cuda", (gpus, nodes), mesh_dim_names=("fsdp", "ddp"))
            def wrap(self, model):
                for block in model.blocks:
                    fully_shard(block, mesh=self.mesh)  # expect: FSDP040
                return fully_shard(model, mesh=self.mesh)  # expect: FSDP040
        Parallel(8, 2).wrap(model)
    """,
    "fsdp040-mesh-returned-by-a-helper-and-chosen-by-a-branch": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        def build(dp, tp):
            return init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))
        world = build(2, 4)
        mesh = world if use_world else world["dp"]
        fully_shard(model, mesh=mesh)  # expect: FSDP040
    """,
    "fsdp040-good-slices-flattened-and-hsdp": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        world = init_device_mesh("cuda", (2, 2, 2), mesh_dim_names=("dp_replicate", "dp_shard", "tp"))
        fully_shard(model.a, mesh=world["dp_shard"])
        fully_shard(model.b, mesh=world["dp_replicate", "dp_shard"])
        fully_shard(model.c, mesh=world[("dp_shard", "tp")]._flatten("dp_shard_tp"))
        hsdp = init_device_mesh("cuda", (2, 8), mesh_dim_names=("replicate", "shard"))
        fully_shard(model.d, mesh=hsdp)
        ddp_fsdp = init_device_mesh("cuda", (2, 8), mesh_dim_names=("ddp", "fsdp"))
        fully_shard(model, mesh=ddp_fsdp)
    """,
    "fsdp040-good-1d-unnamed-and-unknown-names": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        flat = init_device_mesh("cuda", (8,), mesh_dim_names=("tp",))
        fully_shard(model.a, mesh=flat)
        unnamed = init_device_mesh("cuda", (2, 4))
        fully_shard(model.b, mesh=unnamed)
        vague = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "x"))
        fully_shard(model.c, mesh=vague)
        configured = init_device_mesh("cuda", (2, 4), mesh_dim_names=cfg.mesh_names)
        fully_shard(model, mesh=configured)
    """,
    "fsdp040-good-dp-mesh-dims-and-unknown-keywords": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import DataParallelMeshDims, fully_shard
        world = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
        fully_shard(model.a, mesh=world, dp_mesh_dims=DataParallelMeshDims(shard="dp"))
        fully_shard(model, mesh=world, **fsdp_kwargs)
    """,
}
