"""Style cases for FSDP025: code written in styles the fixtures do not use."""

CASES = {
    "fsdp025-aliases-and-keyword": """
        from torch import nn
        import torch.distributed.fsdp as fsdp
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        net = Net()
        fsdp.fully_shard(module=net.blocks)  # expect: FSDP025
    """,
    "fsdp025-method-entry-self-attribute": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.experts = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})
            def shard(self, mesh):
                fully_shard(self.experts, mesh=mesh)  # expect: FSDP025
                fully_shard(self, mesh=mesh)
    """,
    "fsdp025-container-in-a-variable": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def build(dim):
            return nn.ModuleList(nn.Linear(dim, dim) for _ in range(4))
        layers = build(16)
        fully_shard(layers)  # expect: FSDP025
    """,
    "fsdp025-good-subclass-with-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Stack(nn.ModuleList):
            def forward(self, x):
                for layer in self:
                    x = layer(x)
                return x
        stack = Stack([nn.Linear(4, 4)])
        fully_shard(stack)
    """,
    "fsdp025-good-values-and-items": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        heads = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})
        for head in heads.values():
            fully_shard(head)
        for name, head in heads.items():
            fully_shard(head)
        fully_shard([heads["a"], heads["b"]])
    """,
    "fsdp025-good-unknown-or-mixed": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from mylib import make_trunk
        trunk = make_trunk()
        fully_shard(trunk)
        part = nn.ModuleList([nn.Linear(4, 4)]) if flag else nn.Sequential(nn.Linear(4, 4))
        fully_shard(part)
    """,
    "fsdp025-good-helper-that-unpacks-containers": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def shard(module, mesh):
            if isinstance(module, nn.ModuleList):
                for layer in module:
                    shard(layer, mesh)
            else:
                fully_shard(module, mesh=mesh)
        def shard_each(module, mesh):
            if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
                return
            fully_shard(module, mesh=mesh)
        class Trainer:
            def setup(self, mesh):
                blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
                heads = nn.ModuleDict({"a": nn.Linear(4, 4)})
                shard(blocks, mesh)
                shard_each(heads, mesh)
                if not isinstance(blocks, nn.ModuleList):
                    fully_shard(blocks, mesh=mesh)
    """,
    "fsdp025-guard-on-the-other-container": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def shard(module, mesh):
            if isinstance(module, nn.ModuleDict):
                for layer in module.values():
                    fully_shard(layer, mesh=mesh)
            else:
                fully_shard(module, mesh=mesh)  # expect: FSDP025
        def main():
            shard(nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)]), None)
    """,
}
