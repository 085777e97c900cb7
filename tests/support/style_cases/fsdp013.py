"""Style cases for FSDP013: code written in styles the fixtures do not use."""

CASES = {
    "fsdp013-generic-restore-helper-reported-at-the-call-that-hands-it-the-file": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def restore(model, state):
            model.load_state_dict(state)
        def main(model, path):
            fully_shard(model)
            state = torch.load(path, map_location="cpu")
            restore(model, state)  # expect: FSDP013
    """,
    "fsdp013-loading-helper-wrong-on-its-own-reported-inside": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def load_pretrained(self, path):
                self.model.load_state_dict(torch.load(path))  # expect: FSDP013
            def setup(self):
                fully_shard(self.model)
                self.load_pretrained("init.pt")
    """,
    "fsdp013-good-generic-restore-helper-given-a-sharded-state-dict": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def restore(model, state):
            model.load_state_dict(state)
        def main(model):
            fully_shard(model)
            state = model.state_dict()
            restore(model, state)
    """,
}
