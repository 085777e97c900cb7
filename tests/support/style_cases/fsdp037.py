"""Style cases for FSDP037: code written in styles the fixtures do not use."""

CASES = {
    "fsdp037-keyword-backend-alias-and-clip-module": """
        import torch.distributed as dist
        from torch.nn.utils import clip_grad_norm_
        from torch.distributed._composable.fsdp import CPUOffloadPolicy, fully_shard as shard
        dist.init_process_group(backend="nccl")
        policy = CPUOffloadPolicy(pin_memory=False)
        for block in model.blocks:
            shard(block, offload_policy=policy)
        shard(model, offload_policy=policy)
        clip_grad_norm_(model.parameters(), max_norm=1.0)  # expect: FSDP037
    """,
    "fsdp037-group-in-setup-clip-in-a-method": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        def setup():
            dist.init_process_group("nccl")
        class Trainer:
            def __init__(self, model):
                fully_shard(model, offload_policy=CPUOffloadPolicy())
                self.model = model
            def clip(self):
                return torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # expect: FSDP037
        setup()
        Trainer(Model()).clip()
    """,
    "fsdp037-good-cpu-backend-default-backend-and-gloo": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        dist.init_process_group("cpu:gloo,cuda:nccl")
        dist.init_process_group()
        dist.init_process_group(backend=cfg.backend)
        fully_shard(model, offload_policy=CPUOffloadPolicy())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
    "fsdp037-good-no-offload-value-clipping-and-clip-before-shard": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        dist.init_process_group("nccl")
        torch.nn.utils.clip_grad_norm_(other.parameters(), 1.0)
        fully_shard(model, offload_policy=CPUOffloadPolicy())
        torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)
        fully_shard(other)
        torch.nn.utils.clip_grad_norm_(other.parameters(), 1.0)
    """,
    "fsdp037-good-backend-computed-with-the-offload-setting": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        def get_backend(device, offload):
            backend = "nccl"
            if device in dist.Backend.default_device_backend_map:
                backend = dist.Backend.default_device_backend_map[device]
            if offload:
                backend = f"{device}:{backend},cpu:gloo"
            return backend
        dist.init_process_group(get_backend("cuda", cfg.offload))
        kwargs = {"mesh": mesh}
        if cfg.offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        fully_shard(model, **kwargs)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
    "fsdp037-silent-where-another-path-has-a-cpu-backend": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        dist.init_process_group("cuda:nccl,cpu:gloo" if offload else "nccl")
        fully_shard(model, offload_policy=CPUOffloadPolicy())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """,
}
