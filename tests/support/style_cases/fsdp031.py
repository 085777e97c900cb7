"""Style cases for FSDP031: code written in styles the fixtures do not use."""

CASES = {
    "fsdp031-trainer-setup-shards-again": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                for block in self.model.blocks:
                    fully_shard(block)
                fully_shard(self.model)
                self.setup()  # expect: FSDP031
            def setup(self):
                fully_shard(self.model)
    """,
    "fsdp031-alias-and-attribute-path": """
        import torch.distributed.fsdp as fsdp
        head = model.lm_head
        fsdp.fully_shard(model.lm_head)
        fsdp.fully_shard(head)  # expect: FSDP031
    """,
    "fsdp031-in-a-group-list": """
        from torch.distributed.fsdp import fully_shard
        fully_shard([model.emb, model.head])
        fully_shard(model.head)  # expect: FSDP031
    """,
    "fsdp031-good-loop-runs-one-statement": """
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        for name in ("emb", "head"):
            fully_shard(getattr(model, name))
        fully_shard(model)
    """,
    "fsdp031-good-two-models": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def shard(m):
            for block in m.blocks:
                fully_shard(block)
            fully_shard(m)
        ema = copy.deepcopy(model)
        shard(model)
        shard(ema)
    """,
    "fsdp031-good-early-return-guard": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def shard(m):
            if isinstance(m, FSDPModule):
                return m
            fully_shard(m)
            return m
        shard(model)
        shard(model)
    """,
    "fsdp031-good-tied-or-untied-plans": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, config):
            tied = model.tok_embeddings.weight is model.lm_head.weight
            if tied:
                fully_shard([model.tok_embeddings, model.norm, model.lm_head], **config)
            for block in model.layers:
                fully_shard(block, **config)
            if not tied and model.norm is not None:
                fully_shard([model.norm, model.lm_head], **config)
            fully_shard(model, **config)
    """,
    "fsdp031-plan-flag-rebound-between-the-tests": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, separate_head):
            if separate_head:
                fully_shard(model.head)
            separate_head = not separate_head
            if separate_head:
                fully_shard(model.head)  # expect: FSDP031
            fully_shard(model)
    """,
    "fsdp031-good-sharded-test-in-a-helper": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def is_sharded(module):
            if isinstance(module, FSDPModule):
                return True
            return False
        def shard(model):
            if not is_sharded(model):
                fully_shard(model)
        def main(model):
            fully_shard(model)
            shard(model)
    """,
    "fsdp031-helper-tests-another-module": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def is_sharded(module):
            if isinstance(module, FSDPModule):
                return True
            return False
        def shard(model, head):
            if not is_sharded(head):
                fully_shard(model)
        def main(model, head):
            fully_shard(model)
            shard(model, head)  # expect: FSDP031
    """,
}
