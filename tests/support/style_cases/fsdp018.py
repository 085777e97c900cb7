"""Style cases for FSDP018: code written in styles the fixtures do not use."""

CASES = {
    "fsdp018-adjacent-calls-in-a-method": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
                self.lm_head.weight = self.wte.weight
            def shard(self, mesh):
                fully_shard(self.lm_head, mesh=mesh)  # expect: FSDP018
                fully_shard(self.wte, mesh=mesh)
                fully_shard(self, mesh=mesh)
        LM().shard(mesh)
    """,
    "fsdp018-adjacent-calls-differing-arguments": """
        from torch.distributed.fsdp import fully_shard
        model.head.weight = model.emb.weight
        fully_shard(model.emb, reshard_after_forward=False)  # expect: FSDP018
        fully_shard(model.head)
        fully_shard(model)
    """,
    "fsdp018-aliases": """
        from torch.distributed.fsdp import fully_shard
        emb, head = model.embed_tokens, model.lm_head
        head.weight = emb.weight
        fully_shard(emb)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-conditional-tie": """
        from torch.distributed.fsdp import fully_shard
        if config.tie_word_embeddings:
            model.lm_head.weight = model.model.embed_tokens.weight
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model.lm_head)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-nested-module-split": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = Decoder()
                self.out = nn.Linear(4, 8, bias=False)
                self.out.weight = self.decoder.embed.weight
        model = LM()
        fully_shard(model.decoder)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-good-block-holds-both": """
        from torch.distributed.fsdp import fully_shard
        model.body.head.weight = model.body.emb.weight
        fully_shard(model.body)
        fully_shard(model)
    """,
    "fsdp018-good-tuple-group": """
        from torch.distributed.fsdp import fully_shard
        model.lm_head.weight = model.embed_tokens.weight
        fully_shard((model.embed_tokens, model.lm_head))
        fully_shard(model)
    """,
    "fsdp018-good-cloned-parameter": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        model.head.weight = nn.Parameter(model.emb.weight.detach().clone())
        fully_shard(model.emb)
        fully_shard(model.head)
        fully_shard(model)
    """,
    "fsdp018-good-tie-after-other-model": """
        from torch.distributed.fsdp import fully_shard
        teacher.head.weight = teacher.emb.weight
        fully_shard(student.emb)
        fully_shard(student)
    """,
    "fsdp018-good-split-only-when-untied": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self, tie):
                super().__init__()
                self.tie = tie
                self.emb = nn.Embedding(8, 4)
                self.head = nn.Linear(4, 8, bias=False)
                if tie:
                    self.head.weight = self.emb.weight
            def apply_fsdp(self):
                if not self.tie:
                    fully_shard(self.emb)
                    fully_shard(self.head)
                fully_shard(self)
        LM(tie=config.tie_word_embeddings).apply_fsdp()
    """,
    "fsdp018-good-data-copy": """
        from torch.distributed.fsdp import fully_shard
        model.head.weight.data = model.emb.weight.data
        fully_shard(model.emb)
        fully_shard(model)
    """,
}
