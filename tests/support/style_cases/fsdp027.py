"""Style cases for FSDP027: code written in styles the fixtures do not use."""

CASES = {
    "fsdp027-trainer-sanity-check-of-the-encoder": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                fully_shard(self.model.encoder)
                fully_shard(self.model)
                with torch.no_grad():
                    self.model.encoder(torch.zeros(1, 8))  # expect: FSDP027
            def step(self, batch):
                return self.model(batch).sum()
        trainer = Trainer(Model())
        trainer.step(batch)
    """,
    "fsdp027-good-registered-forward-method": """
        import torch
        from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
        class LM(torch.nn.Module):
            def generate(self, x):
                for block in self.blocks:
                    x = block(x)
                return x
        model = LM()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        register_fsdp_forward_method(model, "generate")
        model.generate(prompt)
        model(batch)
    """,
    "fsdp027-good-root-never-runs-or-other-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(teacher.encoder)
        fully_shard(teacher)
        teacher.encoder(x)
        for block in student.blocks:
            fully_shard(block)
        fully_shard(student)
        student(x)
        student.blocks[0](x)
    """,
    "fsdp027-good-method-called-through-a-name": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def tie_if_supported(model):
            tie_weights = getattr(model, "tie_weights", None)
            if callable(tie_weights):
                tie_weights()
        def embedding_of(model):
            get_embeddings = model.get_input_embeddings
            return get_embeddings()
        class Trainer:
            def __init__(self, model):
                for name, child in model.named_children():
                    fully_shard(child)
                self.model = fully_shard(model)
                tie_if_supported(self.model)
                self.embedding = embedding_of(self.model)
                refresh = getattr(self.model, "reset_cache")
                refresh()
            def step(self, batch):
                return self.model(batch).sum()
        Trainer(Model()).step(batch)
    """,
    "fsdp027-sharded-submodule-called-through-a-name": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for name, child in model.named_children():
            fully_shard(child)
        fully_shard(model.encoder)
        fully_shard(model)
        encode = getattr(model, "encoder")
        encode(x)  # expect: FSDP027
        embed = model.get_input_embeddings()
        embed(ids)  # expect: FSDP027
        model(x)
    """,
}
