"""Style cases for FSDP021: code written in styles the fixtures do not use."""

CASES = {
    "fsdp021-good-plain-load-in-the-unsharded-arm": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict, StateDictOptions
        def resume(model, optimizer, path):
            state = torch.load(path)
            if isinstance(model, FSDPModule):
                set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
            else:
                optimizer.load_state_dict(state)
        def main(shard):
            model = Net()
            if shard:
                for block in model.blocks:
                    fully_shard(block)
                fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            resume(model, optimizer, "ckpt.pt")
    """,
    "fsdp021-plain-load-after-an-early-exit-for-wrappers-only": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        def resume(model, optimizer, path):
            if isinstance(model, FSDPModule):
                return
            optimizer.load_state_dict(torch.load(path))
        def resume_any(model, optimizer, path):
            if isinstance(model, DDP):
                return
            optimizer.load_state_dict(torch.load(path))  # expect: FSDP021
        model = Net()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        resume(model, optimizer, "ckpt.pt")
        resume_any(model, optimizer, "ckpt.pt")
    """,
    "fsdp021-optimizer-set-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def setup(self, model):
                self.model = model
                fully_shard(self.model)
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
                self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
            def resume(self, path):
                ckpt = torch.load(path, map_location="cpu")
                self.optimizer.load_state_dict(ckpt["optimizer"])  # expect: FSDP021
                self.scheduler.load_state_dict(ckpt["scheduler"])
    """,
    "fsdp021-optimizer-state-from-dict-get": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        checkpoint = {"model": torch.load("model.pt"), "optimizer": torch.load("optim.pt")}
        optimizer_state = checkpoint.get("optimizer")
        if optimizer_state:
            optimizer.load_state_dict(optimizer_state)  # expect: FSDP021
    """,
    "fsdp021-good-dict-get-of-a-missing-key": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        checkpoint = {"model": torch.load("model.pt")}
        optimizer_state = checkpoint.get("optimizer")
        if optimizer_state:
            optimizer.load_state_dict(optimizer_state)
    """,
    "fsdp021-generic-restore-helper-reported-at-the-call-that-hands-it-the-file": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def restore(optimizer, state):
            optimizer.load_state_dict(state)
        def main(model, path):
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            restore(optimizer, torch.load(path))  # expect: FSDP021
    """,
    "fsdp021-resume-helper-wrong-on-its-own-reported-inside": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def resume(optimizer, path):
            optimizer.load_state_dict(torch.load(path))  # expect: FSDP021
        def main(model):
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            resume(optimizer, "optim.pt")
    """,
}
