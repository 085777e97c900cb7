"""Style cases for FSDP008: code written in styles the fixtures do not use."""

CASES = {
    "fsdp008-eval-helper-before-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        @torch.no_grad()
        def evaluate(model, batches):
            return sum(model(b).mean() for b in batches)
        def main():
            model = Net()
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            baseline = evaluate(model, val_batches)
            optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
            optimizer.step()
    """,
    "fsdp008-generate-before-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        sample = model.generate(prompt)
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
    """,
    "fsdp008-good-reshard-after-forward-true": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, reshard_after_forward=True)
        model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-forward-before-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model(sample)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-reshard-every-fsdp-module": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-only-resharded-blocks-after-forward": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        block_optimizer = torch.optim.SGD(model.blocks.parameters(), lr=1e-2)
    """,
    "fsdp008-head-is-in-the-root-group": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        head_optimizer = torch.optim.SGD(model.head.parameters(), lr=1e-3)  # expect: FSDP008
    """,
    "fsdp008-good-root-reshard-after-forward-from-config": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def apply_fsdp(model, mesh, policy: str):
            for block in model.layers:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh, reshard_after_forward=policy != "never")
        apply_fsdp(model, mesh, cfg.policy)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-root-keywords-from-config": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block, **cfg.fsdp_kwargs)
        fully_shard(model, **cfg.fsdp_kwargs)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-root-kept-unsharded-explicitly": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fsdp_kwargs = {"mesh": mesh}
        for block in model.layers:
            fully_shard(block, **fsdp_kwargs)
        fully_shard(model, **fsdp_kwargs, reshard_after_forward=False)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
    """,
    "fsdp008-good-sequential-root-owns-no-parameters": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        model = nn.Sequential(*[nn.Linear(4, 4, bias=False) for _ in range(2)])
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        loss = model(inp).sum()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        loss.backward()
        opt.step()
    """,
    "fsdp008-good-roots-sharded-in-a-loop-over-settings": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for norm_type in (2, 1, float("inf")):
            model = Net()
            for module in model.modules():
                if isinstance(module, Block):
                    fully_shard(module)
            fully_shard(model)
            optim = torch.optim.Adam(model.parameters(), lr=1e-2)
            model(inp).sum().backward()
            optim.step()
    """,
    "fsdp008-children-loop-leaves-the-roots-own-parameters": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = GPT()
        for child in model.children():
            fully_shard(child)
        fully_shard(model)
        loss = model(inp).sum()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)  # expect: FSDP008
        loss.backward()
        opt.step()
    """,
}
