"""Style cases for FSDP032: code written in styles the fixtures do not use."""

CASES = {
    "fsdp032-layer-scale-in-generator-built-blocks": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.gamma = nn.Parameter(torch.tensor(1.0))
            def forward(self, x):
                return x + self.gamma * self.lin(x)
        class Model(nn.Module):
            def __init__(self, d=8, n=2):
                super().__init__()
                self.layers = nn.ModuleList(Block(d) for _ in range(n))
        model = Model()
        for block in model.layers:
            fully_shard(block)  # expect: FSDP032
        fully_shard(model)
    """,
    "fsdp032-layer-scale-in-list-comprehension-blocks": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.gamma = nn.Parameter(torch.zeros(()))
            def forward(self, x):
                return x + self.gamma * self.lin(x)
        class Model(nn.Module):
            def __init__(self, d=8, n=2):
                super().__init__()
                self.layers = nn.ModuleList([Block(d) for _ in range(n)])
        model = Model()
        for i, block in enumerate(model.layers):
            fully_shard(block, reshard_after_forward=i < n - 1)  # expect: FSDP032
        fully_shard(model)
    """,
    "fsdp032-near-miss-one-element-scale-in-comprehension-blocks": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.gamma = nn.Parameter(torch.ones(1))
            def forward(self, x):
                return x + self.gamma * self.lin(x)
        class Model(nn.Module):
            def __init__(self, d=8, n=2):
                super().__init__()
                self.layers = nn.ModuleList(Block(d) for _ in range(n))
        model = Model()
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
    """,
    "fsdp032-spellings-of-a-scalar": """
        import torch
        from torch import nn
        import torch.distributed.fsdp as fsdp
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.bias = nn.Parameter(torch.zeros(()))
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head()
                self.alpha = nn.Parameter(torch.full((), 0.5))
        net = Net()
        fsdp.fully_shard(net.head)  # expect: FSDP032
        fsdp.fully_shard(net)  # expect: FSDP032
    """,
    "fsdp032-trainer-shards-a-model-with-a-scalar": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Gate(nn.Module):
            def __init__(self, init=0.0):
                super().__init__()
                self.weight = nn.Parameter(torch.tensor(init))
        class Trainer:
            def __init__(self):
                self.gate = Gate()
                fully_shard(self.gate)  # expect: FSDP032
    """,
    "fsdp032-good-one-element-buffers-and-unknown-shapes": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Head(nn.Module):
            def __init__(self, shape):
                super().__init__()
                self.a = nn.Parameter(torch.ones(1))
                self.b = nn.Parameter(torch.tensor([0.5]))
                self.c = nn.Parameter(torch.zeros(shape))
                self.register_buffer("count", torch.tensor(0))
                self.d = torch.tensor(1.0)
        fully_shard(Head(config.shape))
    """,
    "fsdp032-good-scalar-in-a-module-never-sharded": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Loss(nn.Module):
            def __init__(self):
                super().__init__()
                self.temperature = nn.Parameter(torch.tensor(0.07))
        loss_fn = Loss()
        fully_shard(model)
    """,
}
