"""Style cases for FSDP010: code written in styles the fixtures do not use."""

CASES = {
    "fsdp010-main-process-from-pretrained": """
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        if accelerator.is_main_process:
            model = AutoModelForCausalLM.from_pretrained(name)  # expect: FSDP010
        else:
            model = AutoModelForCausalLM.from_config(config)
        fully_shard(model)
    """,
    "fsdp010-trainer-rank-attribute": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model, rank):
                self.rank = rank
                self.model = model
                if self.rank == 0:
                    self.model.load_state_dict(torch.load("init.pt"))  # expect: FSDP010
                fully_shard(self.model)
    """,
    "fsdp010-good-broadcast-after": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        if rank == 0:
            model.load_state_dict(torch.load("init.pt"))
        for param in model.parameters():
            dist.broadcast(param.data, src=0)
        fully_shard(model)
    """,
    "fsdp010-good-all-ranks-load": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model.load_state_dict(torch.load("init.pt", map_location="cpu"))
        fully_shard(model)
    """,
    "fsdp010-loading-helper-called-on-rank-0-reported-at-the-call": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        def load_pretrained(model, path):
            model.load_state_dict(torch.load(path))
        def main(model):
            if dist.get_rank() == 0:
                load_pretrained(model, "init.pt")  # expect: FSDP010
            fully_shard(model)
    """,
    "fsdp010-helper-that-loads-on-rank-0-reported-inside": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def load_pretrained(self, path):
                if dist.get_rank() == 0:
                    self.model.load_state_dict(torch.load(path))  # expect: FSDP010
            def setup(self):
                self.load_pretrained("init.pt")
                fully_shard(self.model)
    """,
    "fsdp010-good-loading-helper-called-on-every-rank": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        def load_pretrained(model, path):
            model.load_state_dict(torch.load(path, map_location="cpu"))
        def main(model):
            load_pretrained(model, "init.pt")
            fully_shard(model)
            if dist.get_rank() == 0:
                print("loaded")
    """,
}
