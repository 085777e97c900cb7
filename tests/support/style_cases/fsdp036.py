"""Style cases for FSDP036: code written in styles the fixtures do not use."""

CASES = {
    "fsdp036-module-alias-default-reentrant": """
        import torch.nn as nn
        import torch.utils.checkpoint as ckpt
        import torch.distributed.fsdp as fsdp
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
            def forward(self, x):
                for blk in self.blocks:
                    x = ckpt.checkpoint(blk, x)  # expect: FSDP036
                return x
        net = Net()
        for blk in net.blocks:
            fsdp.fully_shard(blk)
        fsdp.fully_shard(net)
        a, b = net(x1), net(x2)
        (a - b).pow(2).mean().backward()
    """,
    "fsdp036-dotted-call-autograd-backward": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(8, 8)
            def forward(self, x):
                return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=True)  # expect: FSDP036
        def train(net, x1, x2):
            loss = net(x1).sum() + net(x2).sum()
            torch.autograd.backward(loss)
        net = Net()
        fully_shard(net.block)
        fully_shard(net)
        train(net, x1, x2)
    """,
    "fsdp036-shared-block-twice-in-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.utils.checkpoint import checkpoint as ac
        class Looped(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.Linear(8, 8)
            def forward(self, x):
                h = ac(self.cell, x, use_reentrant=True)  # expect: FSDP036
                return ac(self.cell, h, use_reentrant=True)
        model = Looped()
        fully_shard(model.cell)
        fully_shard(model)
        model(x).sum().backward()
    """,
    "fsdp036-good-non-reentrant-or-unknown": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self, reentrant):
                super().__init__()
                self.block = nn.Linear(8, 8)
                self.reentrant = reentrant
            def forward(self, x):
                x = checkpoint(self.block, x, use_reentrant=False)
                return checkpoint(self.block, x, use_reentrant=self.reentrant)
        net = Net(cfg.reentrant)
        fully_shard(net.block)
        fully_shard(net)
        (net(x1) + net(x2)).sum().backward()
    """,
    "fsdp036-good-unsharded-block-or-function": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(8, 8)
                self.head = nn.Linear(8, 8)
            def _mlp(self, x):
                return self.head(x).relu()
            def forward(self, x):
                x = checkpoint(self.block, x, use_reentrant=True)
                return checkpoint(self._mlp, x, use_reentrant=True)
        net = Net()
        fully_shard(net)
        (net(x1) + net(x2)).sum().backward()
    """,
    "fsdp036-good-checkpoint-before-shard": """
        import functools
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
        )
        model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
        apply_activation_checkpointing(
            model,
            checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT),
            check_fn=lambda m: isinstance(m, nn.Linear),
        )
        for block in model:
            fully_shard(block)
        fully_shard(model)
        (model(x1) - model(x2)).sum().backward()
    """,
    "fsdp036-good-backward-between-or-no-grad": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(8, 8)
            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)
        net = Net()
        fully_shard(net.block)
        fully_shard(net)
        net(x1).sum().backward()
        net(x2).sum().backward()
        with torch.no_grad():
            reference = net(x3)
        loss = (net(x4) - reference).pow(2).sum()
        loss.backward()
    """,
    "fsdp036-good-exclusive-forwards": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(8, 8)
            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)
        net = Net()
        fully_shard(net.block)
        fully_shard(net)
        if pairwise:
            out = net(x1)
        else:
            out = net(x2)
        out.sum().backward()
    """,
}
