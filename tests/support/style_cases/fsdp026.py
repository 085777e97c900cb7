"""Style cases for FSDP026: code written in styles the fixtures do not use."""

_MODEL = """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.Linear(8, 8)
                self.router = nn.Linear(8, 4)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(16, 8)
                self.blocks = nn.ModuleList([Block(), Block()])
                self.final_norm = nn.RMSNorm(8)
                self.scale = nn.Parameter(torch.ones(8))
"""

CASES = {
    "fsdp026-to-dtype-keyword-island": _MODEL
    + """
        model = Net().to(dtype=torch.bfloat16)
        model.final_norm.to(dtype=torch.float32)  # expect: FSDP026
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    """,
    "fsdp026-bf16-island-in-fp32-model": _MODEL
    + """
        model = Net().float()
        model.final_norm.bfloat16()  # expect: FSDP026
        fully_shard(model)
    """,
    "fsdp026-router-island-in-one-block-group": _MODEL
    + """
        model = Net().half()
        model.blocks[0].router.float()  # expect: FSDP026
        fully_shard(model.blocks[0])
        fully_shard(model.blocks[1])
        fully_shard(model)
    """,
    "fsdp026-mixed-precision-policy-does-not-help": _MODEL
    + """
        def main():
            model = Net()
            model = model.bfloat16()
            model.final_norm.float()  # expect: FSDP026
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for block in model.blocks:
                fully_shard(block, mp_policy=mp)
            fully_shard(model, mp_policy=mp)
    """,
    "fsdp026-from-pretrained-dtype-string": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(path, dtype="bfloat16")
        model.lm_head.float()  # expect: FSDP026
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    """,
    "fsdp026-good-island-sharded-alone-with-fp32-policy": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        model.final_norm.float()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model.final_norm, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32))
        fully_shard(model)
    """,
    "fsdp026-good-frozen-by-parameter-loop": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        model.final_norm.float()
        for p in model.final_norm.parameters():
            p.requires_grad = False
        fully_shard(model)
    """,
    "fsdp026-good-frozen-after-sharding-before-the-first-forward": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        model.final_norm.float()
        fully_shard(model)
        for p in model.final_norm.parameters():
            p.requires_grad = False
        model(batch)
    """,
    "fsdp026-good-rest-of-group-frozen": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        model.requires_grad_(False)
        model.final_norm.float().requires_grad_(True)
        fully_shard(model)
    """,
    "fsdp026-good-router-block-is-its-own-group": _MODEL
    + """
        model = Net().half()
        model.blocks[0].router.float()
        fully_shard(model.blocks[0].router)
        fully_shard(model)
    """,
    "fsdp026-good-island-in-a-loop-sharded-block": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
        model.model.layers[0].mlp.gate.float()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    """,
    "fsdp026-good-rotary-buffers-only": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
        model.model.rotary_emb.float()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    """,
    "fsdp026-good-dtype-unknown": _MODEL
    + """
        model = Net().to(cfg.dtype)
        model.final_norm.float()
        fully_shard(model)
    """,
    "fsdp026-good-tensor-casts-only": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        fully_shard(model)
        logits = model(batch).float()
        w = model.final_norm.weight.float()
    """,
    "fsdp026-good-parameter-float-is-a-new-tensor": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        scale = model.scale.float()
        fully_shard(model)
    """,
    "fsdp026-parameter-data-upcast": _MODEL
    + """
        model = Net().to(torch.bfloat16)
        model.scale.data = model.scale.data.float()  # expect: FSDP026
        fully_shard(model)
    """,
    "fsdp026-good-only-tied-or-sharded-rest": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
        model.lm_head.float()
        fully_shard(model.model)
        fully_shard(model)
    """,
}
