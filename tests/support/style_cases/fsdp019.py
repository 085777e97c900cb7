"""Style cases for FSDP019: code written in styles the fixtures do not use."""

CASES = {
    "fsdp019-encode-method-alias-import": """
        import torch.nn as nn
        import torch.distributed.fsdp as fsdp
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
            def forward(self, x):
                return self.encode(x)
            def encode(self, x):
                for block in self.blocks:
                    x = block(x)
                return self.proj(x)
        enc = Encoder()
        for block in enc.blocks:
            fsdp.fully_shard(block)
        fsdp.fully_shard(enc)
        emb = enc.encode(batch)  # expect: FSDP019
        out = enc(batch)
    """,
    "fsdp019-trainer-matmul-view": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.lm_head = nn.Linear(8, 32, bias=False)
            def forward(self, x):
                return self.body(x)
        class Trainer:
            def __init__(self):
                self.model = LM()
                fully_shard(self.model.lm_head)
                fully_shard(self.model)
            def step(self, x):
                hidden = self.model(x)
                logits = torch.matmul(hidden, self.model.lm_head.weight.t())  # expect: FSDP019
                return logits.sum()
    """,
    "fsdp019-fused-kernel-from-library": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from cut_cross_entropy import linear_cross_entropy
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.lm_head = nn.Linear(8, 32, bias=False)
            def forward(self, x):
                return self.body(x)
        model = LM()
        fully_shard(model.body)
        fully_shard(model.lm_head)
        fully_shard(model)
        hidden = model(x)
        loss = linear_cross_entropy(hidden, model.lm_head.weight, labels)  # expect: FSDP019
    """,
    "fsdp019-root-submodule-before-any-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(32, 8)
                self.body = nn.Linear(8, 8)
            def forward(self, tok):
                return self.body(self.emb(tok))
        model = LM()
        fully_shard(model.body)
        fully_shard(model)
        probe = model.emb(tok)  # expect: FSDP019
        out = model(tok)
    """,
    "fsdp019-good-registered-by-name-in-a-variable": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(32, 8)
            def forward(self, tok):
                return self.emb(tok)
            def score(self, tok):
                return self.emb(tok).sum(-1)
        model = LM()
        fully_shard(model)
        for name in ("score",):
            register_fsdp_forward_method(model, name)
        s = model.score(tok)
    """,
    "fsdp019-good-root-group-after-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.lm_head = nn.Linear(8, 32)
                self.criterion = nn.CrossEntropyLoss()
            def forward(self, x):
                return self.body(x)
        model = LM()
        fully_shard(model.body)
        fully_shard(model)
        for x, y in loader:
            hidden = model(x)
            loss = model.criterion(model.lm_head(hidden), y)
            loss.backward()
    """,
    "fsdp019-good-unknown-class-and-metadata": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        for layer in model.transformer.h:
            fully_shard(layer)
        fully_shard(model)
        out = model.generate(input_ids, max_new_tokens=8)
        vocab = model.lm_head.weight.shape[0]
        torch.nn.init.normal_(model.lm_head.weight)
        full = model.lm_head.weight.full_tensor()
    """,
    "fsdp019-good-method-only-calls-self-or-sharded-children": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
            @torch.no_grad()
            def generate(self, x, steps=4):
                for _ in range(steps):
                    x = self(x)
                return x
            def features(self, x):
                return [layer(x) for layer in self.layers]
        model = LM()
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        y = model.generate(x)
        f = model.features(x)
    """,
    "fsdp019-good-parameter-free-submodule-after-backward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.criterion = nn.CrossEntropyLoss()
                self.drop = nn.Dropout(0.1)
            def forward(self, x):
                return self.drop(self.body(x))
        model = LM()
        fully_shard(model.body)
        fully_shard(model)
        out = model(x)
        out.sum().backward()
        val = model.criterion(out.detach(), y)
    """,
}
