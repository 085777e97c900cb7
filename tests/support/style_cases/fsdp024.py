"""Style cases for FSDP024: code written in styles the fixtures do not use."""

CASES = {
    "fsdp024-good-model-class-own-methods": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
            @property
            def module(self):
                return self.inner
            def clip_grad_norm_(self, max_norm):
                return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        model = Model(nn.Linear(8, 8))
        fully_shard(model)
        model.clip_grad_norm_(1.0)
        inner = model.module
        class Trainer:
            def __init__(self, inner):
                self.model = fully_shard(Model(inner))
            def step(self):
                self.model.clip_grad_norm_(1.0)
                return self.model.module.weight
    """,
    "fsdp024-good-base-class-defines-clip": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class ClipMixin:
            def clip_grad_norm_(self, max_norm):
                return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        class Model(ClipMixin, nn.Module):
            pass
        def train(model):
            fully_shard(model)
            model.clip_grad_norm_(1.0)
        train(Model())
    """,
    "fsdp024-model-class-without-those-methods": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def clip_gradients(self, max_norm):
                pass
        class Trainer:
            def __init__(self):
                self.model = fully_shard(Model())
            def clip_grad_norm_(self, max_norm):
                return self.model.clip_grad_norm_(max_norm)  # expect: FSDP024
            def unwrapped(self):
                return self.model.module  # expect: FSDP024
    """,
    "fsdp024-good-fsdp1-arm-of-a-module-flag-set-to-fsdp2": """
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = True
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)
        train(Net())
    """,
    "fsdp024-good-fsdp1-arm-of-a-class-flag-set-to-fsdp2": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            use_fsdp2 = True
            def __init__(self, model):
                self.model = model
                fully_shard(model)
            def step(self, clip):
                if not self.use_fsdp2 and clip:
                    self.model.clip_grad_norm_(1.0)
        Trainer(Net()).step(True)
    """,
    "fsdp024-good-fsdp1-arm-of-a-config-default-set-to-fsdp2": """
        from dataclasses import dataclass
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class Config:
            use_fsdp2: bool = True
        cfg = Config()
        model = Net()
        fully_shard(model)
        if not cfg.use_fsdp2:
            model.clip_grad_norm_(1.0)
    """,
    "fsdp024-fsdp1-arm-of-a-module-flag-set-to-fsdp1": """
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = False
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)  # expect: FSDP024
        train(Net())
    """,
    "fsdp024-fsdp1-arm-of-a-flag-read-at-run-time": """
        import os
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = os.environ.get("USE_FSDP2") == "1"
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)  # expect: FSDP024
        train(Net())
    """,
}
