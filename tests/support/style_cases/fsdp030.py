"""Style cases for FSDP030: code written in styles the fixtures do not use."""

CASES = {
    "fsdp030-one-in-a-trainer-method": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model, mesh):
                for block in model.blocks:
                    fully_shard(block, mesh=mesh, reshard_after_forward=1)  # expect: FSDP030
                fully_shard(model, mesh=mesh)
    """,
    "fsdp030-strings-floats-negatives": """
        import torch.distributed.fsdp as fsdp
        fsdp.fully_shard(model.a, reshard_after_forward="false")  # expect: FSDP030
        fsdp.fully_shard(model.b, reshard_after_forward=0.5)  # expect: FSDP030
        fsdp.fully_shard(model.c, reshard_after_forward=-1)  # expect: FSDP030
        fsdp.fully_shard(model.d, reshard_after_forward="full")  # expect: FSDP030
    """,
    "fsdp030-dict-config": """
        from torch.distributed.fsdp import fully_shard
        CONFIG = {"reshard": "True"}
        def shard(model):
            fully_shard(model, reshard_after_forward=CONFIG["reshard"])  # expect: FSDP030
    """,
    "fsdp030-good-readable-values": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model.a, reshard_after_forward=None)
        fully_shard(model.b, reshard_after_forward=8)
        fully_shard(model.c, reshard_after_forward=args.reshard)
        fully_shard(model.d, reshard_after_forward=not last)
        fully_shard(model, reshard_after_forward=str(flag) == "True")
    """,
    "fsdp030-good-converted-on-one-path-only": """
        import os
        from torch.distributed.fsdp import fully_shard
        def to_bool(text, strict=False):
            if text.lower() in ("1", "true"):
                return 1 if not strict else True
            return 0 if not strict else False
        class Plugin:
            def __init__(self):
                self.reshard = os.environ.get("RESHARD", True)
                if isinstance(self.reshard, str):
                    self.reshard = to_bool(self.reshard, strict=True)
        plugin = Plugin()
        fully_shard(model, reshard_after_forward=plugin.reshard)
    """,
}
