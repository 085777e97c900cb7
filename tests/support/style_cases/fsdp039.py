"""Style cases for FSDP039: code written in styles the fixtures do not use."""

CASES = {
    "fsdp039-positional-persistent-and-device-kwarg": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class CausalMask(torch.nn.Module):
            def __init__(self, n, device=None):
                super().__init__()
                self.register_buffer("mask", torch.tril(torch.ones(n, n, device=device)), False)
        class Block(torch.nn.Module):
            def __init__(self, device=None):
                super().__init__()
                self.proj = torch.nn.Linear(8, 8, device=device)
                self.causal = CausalMask(8, device=device)
        with torch.device("meta"):
            block = Block()
        fully_shard(block)
        block.to_empty(device="cuda")  # expect: FSDP039
        block.proj.reset_parameters()
    """,
    "fsdp039-helper-materialises-and-loads-dcp": """
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.fsdp import fully_shard
        class Rotary(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rope = Rotary(16)
                self.out = torch.nn.Linear(16, 16)
        def build(path):
            with torch.device("meta"):
                net = Net()
            fully_shard(net)
            net.to_empty(device="cuda")  # expect: FSDP039
            state = {"model": net.state_dict()}
            dcp.load(state, checkpoint_id=path)
            return net
        model = build("ckpt")
    """,
    "fsdp039-good-init-weights-reregisters-in-base-class": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class RopeBase(torch.nn.Module):
            def _init_rope(self):
                inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
        class Rotary(RopeBase):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim
                self._init_rope()
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rope = Rotary(16)
                self.out = torch.nn.Linear(16, 16)
            def init_weights(self):
                self.out.reset_parameters()
                self.rope._init_rope()
        with torch.device("meta"):
            net = Net()
        fully_shard(net)
        net.to_empty(device="cuda")
        net.init_weights()
    """,
    "fsdp039-good-apply-init-fn": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Rotary(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("inv_freq", torch.ones(dim // 2), persistent=False)
        def init_fn(module):
            if isinstance(module, Rotary):
                module.inv_freq = torch.ones_like(module.inv_freq)
        with torch.device("meta"):
            rope = Rotary(16)
        fully_shard(rope)
        rope.to_empty(device="cuda")
        rope.apply(init_fn)
    """,
    "fsdp039-good-not-built-on-meta": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Rotary(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("inv_freq", torch.ones(dim // 2), persistent=False)
        rope = Rotary(16)
        fully_shard(rope)
        rope.to_empty(device="cuda")
        rope.load_state_dict(torch.load("ckpt.pt"))
    """,
    "fsdp039-good-registered-lazily-in-forward": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Rotary(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim
                self.inv_freq = None
            def forward(self, x):
                if self.inv_freq is None:
                    inv = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=x.device).float() / self.dim))
                    self.register_buffer("inv_freq", inv, persistent=False)
                return x
        with torch.device("meta"):
            rope = Rotary(16)
        fully_shard(rope)
        rope.to_empty(device="cuda")
        rope.load_state_dict(torch.load("ckpt.pt"))
    """,
}
