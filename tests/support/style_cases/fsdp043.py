"""Style cases for FSDP043: code written in styles the fixtures do not use."""

CASES = {
    "fsdp043-aliases-and-device-objects": """
        import torch
        from torch.distributed import fsdp
        from torch.distributed._composable.fsdp import CPUOffloadPolicy as Offload
        def build(model, rank):
            fsdp.fully_shard(model, offload_policy=Offload())
            model.to(torch.device("cuda", rank))  # expect: FSDP043
            return model
        build(Model(), 0)
    """,
    "fsdp043-policy-in-a-variable-and-a-submodule-moved": """
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        policy = CPUOffloadPolicy(pin_memory=False)
        for layer in model.layers:
            fully_shard(layer, offload_policy=policy)
        fully_shard(model, offload_policy=policy)
        model.lm_head.to(device="cuda:0")  # expect: FSDP043
    """,
    "fsdp043-to-empty-in-a-method": """
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        class Trainer:
            def __init__(self, model):
                fully_shard(model, offload_policy=CPUOffloadPolicy())
                model.to_empty(device="cuda")  # expect: FSDP043
                self.model = model
        Trainer(Model())
    """,
    "fsdp043-good-before-shard-cpu-and-dtype": """
        import torch
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        model = Model().cuda()
        fully_shard(model, offload_policy=CPUOffloadPolicy())
        model.to_empty(device="cpu")
        model.to(torch.bfloat16)
        model.to("cpu")
        loss_fn = Loss().cuda()
    """,
    "fsdp043-good-unknown-device-runtime-policy-and-no-offload": """
        from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
        fully_shard(model, offload_policy=CPUOffloadPolicy())
        model.to(device)
        other = Model()
        fully_shard(other, offload_policy=CPUOffloadPolicy() if offload else OffloadPolicy())
        other.cuda()
        plain = Model()
        fully_shard(plain)
        plain.cuda()
    """,
    "fsdp043-good-exclusive-arms": """
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        if cpu_offload:
            fully_shard(model, offload_policy=CPUOffloadPolicy())
        else:
            fully_shard(model)
            model.cuda()
    """,
}
