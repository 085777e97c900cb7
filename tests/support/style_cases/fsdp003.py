"""Style cases for FSDP003: code written in styles the fixtures do not use."""

CASES = {
    "fsdp003-kwargs-batch": """
        from torch.distributed.fsdp import fully_shard
        model = fully_shard(model)
        outputs = model.forward(**batch)  # expect: FSDP003
    """,
    "fsdp003-unshard-with-autograd": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        model.unshard()
        loss = model.forward(x).sum()  # expect: FSDP003
        loss.backward()
    """,
    "fsdp003-child-outside-root-forward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        hidden = model.encoder.forward(x)  # expect: FSDP003
    """,
    "fsdp003-good-inference-mode-after-unshard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        model.unshard()
        with torch.inference_mode():
            logits = model.forward(x)
        model.reshard()
    """,
    "fsdp003-good-child-forward-inside-root-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.head = nn.Linear(4, 4)
            def forward(self, x):
                return self.head.forward(self.encoder.forward(x))
        model = Net()
        fully_shard(model)
        y = model(x)
    """,
    "fsdp003-sharded-child-forward-inside-root-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
            def forward(self, x):
                for layer in self.layers:
                    x = layer.forward(x)  # expect: FSDP003
                return x
        model = Net()
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        y = model(x)
    """,
    "fsdp003-good-own-child-in-forward-of-sharded-lightning-module": """
        import lightning as L
        from torch.distributed.fsdp import fully_shard
        class Lit(L.LightningModule):
            def configure_model(self):
                for layer in self.model.layers:
                    fully_shard(layer)
                fully_shard(self)
            def forward(self, x):
                return self.model.forward(x)
            def training_step(self, batch):
                return self(batch).sum()
    """,
    "fsdp003-sharded-child-in-forward-of-lightning-module": """
        import lightning as L
        from torch.distributed.fsdp import fully_shard
        class Lit(L.LightningModule):
            def configure_model(self):
                fully_shard(self.model)
            def forward(self, x):
                return self.model.forward(x)  # expect: FSDP003
    """,
    "fsdp003-good-before-sharding": """
        from torch.distributed.fsdp import fully_shard
        reference = model.forward(x)
        fully_shard(model)
        y = model(x)
    """,
    "fsdp003-test-expects-forward-to-fail": """
        import pytest
        from torch.distributed.fsdp import fully_shard
        def test_forward_without_hooks_fails():
            model = Net()
            fully_shard(model)
            with pytest.raises(RuntimeError, match="size mismatch"):
                model.forward(torch.randn(2, 8))
            with open("log.txt") as log:
                model.forward(torch.randn(2, 8))  # expect: FSDP003
    """,
}
