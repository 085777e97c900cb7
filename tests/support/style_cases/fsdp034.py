"""Style cases for FSDP034: code written in styles the fixtures do not use."""

CASES = {
    "fsdp034-root-only-main": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        def main():
            model = AutoModelForCausalLM.from_pretrained(name)
            model = fully_shard(model)  # expect: FSDP034
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-helper-shards-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard(module):
            fully_shard(module)
        for block in model.layers:
            shard(block)
        shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-recursive-bottom-up": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_recursively(module):
            for child in module.children():
                if sum(p.numel() for p in child.parameters()) > 1_000_000:
                    shard_recursively(child)
            fully_shard(module)
        model = Net()
        shard_recursively(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-lambda-shards-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        shard = lambda m: fully_shard(m, mesh=mesh)
        model = Net()
        for block in model.layers:
            shard(block)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-map-over-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        list(map(fully_shard, model.layers))
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-blocks-sharded-by-imported-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib.parallel import apply_fsdp_to_blocks
        model = Net()
        apply_fsdp_to_blocks(model, mesh)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-root-only-after-tensor-parallel": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import parallelize_module
        from mylib import count_parameters
        model = Net()
        print(count_parameters(model))
        model = parallelize_module(model, tp_mesh, plan)
        fully_shard(model, mesh=dp_mesh)  # expect: FSDP034
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-block-shards-itself": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def apply_fsdp(self, mesh):
                fully_shard(self, mesh=mesh)
    """,
    # --- module.apply(fn) and arms a constant decides ---------------------------------------------
    "fsdp034-good-blocks-sharded-through-apply-with-a-lambda": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(model):
            model.apply(lambda m: fully_shard(m) if isinstance(m, TransformerBlock) else None)
            fully_shard(model)
            return torch.optim.AdamW(model.parameters())
    """,
}
