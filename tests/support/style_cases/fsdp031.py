"""Style cases for FSDP031: code written in styles the fixtures do not use."""


def _sharding_base_model(*walk_filter: str) -> str:
    """A base model class whose `fully_shard` shards the sub-models its `modules()` walk lets
    through `walk_filter`, then itself (xtuner's `BaseModel`), and a model holding a sub-model."""
    lines = "\n                    ".join(walk_filter)
    return f"""
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class BaseModel(nn.Module):
            def fully_shard(self, config):
                for module in self.modules():
                    {lines}
                        module.fully_shard(config)
                self._fully_shard(config)
                return self
            def _fully_shard(self, config, module=None):
                target = module or self
                fully_shard(target, reshard_after_forward=config.reshard)
        class VisionModel(BaseModel):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
        class ChatModel(BaseModel):
            def __init__(self):
                super().__init__()
                self.vision = VisionModel()
                self.head = nn.Linear(8, 8)
    """


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
    "fsdp031-good-partial-of-one-sharder-or-another": """
        import functools
        from torch.distributed.fsdp import fully_shard
        def shard_fp32_aware(module, **kwargs):
            for child in module.children():
                fully_shard(child, **kwargs)
            fully_shard(module, **kwargs)
        def parallelize(model, mesh, keeps_fp32):
            impl = fully_shard
            if keeps_fp32:
                impl = shard_fp32_aware
            shard = functools.partial(impl, mesh=mesh)
            for block in model.layers:
                shard(block)
            shard(model.head)
            shard(model)
    """,
    "fsdp031-good-partial-of-a-conditional-sharder": """
        from functools import partial
        from torch.distributed.fsdp import fully_shard
        def shard_once(module, mesh):
            fully_shard(module.norm, mesh=mesh)
            fully_shard(module, mesh=mesh)
        class Parallelizer:
            def __init__(self, mesh, special):
                self.shard = partial(shard_once if special else fully_shard, mesh=mesh)
            def apply(self, model):
                self.shard(model.embed)
                self.shard(model)
    """,
    "fsdp031-partial-of-either-sharder-called-twice": """
        import functools
        from torch.distributed.fsdp import fully_shard
        def shard_fp32_aware(module, **kwargs):
            for child in module.children():
                fully_shard(child, **kwargs)
            fully_shard(module, **kwargs)
        def parallelize(model, mesh, keeps_fp32):
            impl = shard_fp32_aware if keeps_fp32 else fully_shard
            shard = functools.partial(impl, mesh=mesh)
            shard(model.head)
            shard(model)
            shard(model.head)  # expect: FSDP031
    """,
    "fsdp031-good-outer-sharded-where-it-is-not-the-inner": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, wrap_outer=True):
            inner = model.model if hasattr(model, "model") else model
            for block in inner.layers:
                fully_shard(block)
            fully_shard(inner)
            if wrap_outer and model is not inner:
                fully_shard(model)
    """,
    "fsdp031-good-inner-named-first-in-the-identity-test": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model):
            if getattr(model, "language_model", None) is not None:
                backbone = model.language_model
            else:
                backbone = model
            fully_shard(backbone)
            if backbone is model:
                return
            fully_shard(model)
    """,
    "fsdp031-outer-sharded-also-where-it-is-the-inner": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, wrap_outer=True):
            inner = model.model if hasattr(model, "model") else model
            fully_shard(inner)
            if wrap_outer:
                fully_shard(model)  # expect: FSDP031
    """,
    "fsdp031-good-outer-one-of-two-models-not-the-inner": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model):
            inner = model.model if hasattr(model, "model") else model
            fully_shard(inner)
            if model is not inner:
                fully_shard(model)
        def main(policy, value_model, train_value):
            parallelize(value_model if train_value else policy)
    """,
    "fsdp031-outer-sharded-where-the-inner-is-not-its-child": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model):
            inner = model.model if hasattr(model, "model") else model
            fully_shard(inner)
            if inner is not model.model:
                fully_shard(model)  # expect: FSDP031
    """,
    "fsdp031-good-fresh-trainer-sets-up-inner-then-outer": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, wrap_outer=True):
            inner = model[0] if hasattr(model, "inner") else model
            fully_shard(inner)
            if wrap_outer and model is not inner:
                fully_shard(model)
        class Trainer:
            def __init__(self, cfg):
                self.cfg = cfg
            def setup(self):
                self.pp = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
                parallelize(self.pp)
        def run(recipe_cls, cfg, parity):
            trainer = recipe_cls(cfg)
            trainer.setup()
            if parity:
                del trainer
                trainer = recipe_cls(cfg)
                trainer.setup()
            return trainer
        def test_run():
            run(Trainer, {}, True)
    """,
    "fsdp031-good-sub-models-shard-themselves-then-the-root": _sharding_base_model(
        "if module is self:", "    continue", "if isinstance(module, BaseModel):"
    ),
    "fsdp031-good-walk-skips-its-root-with-is-not": _sharding_base_model(
        "if module is not self and isinstance(module, BaseModel):"
    ),
    "fsdp031-good-walk-skips-the-model-it-walks": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            for module in model.modules():
                if module is model:
                    continue
                if isinstance(module, nn.TransformerEncoderLayer):
                    fully_shard(module)
            fully_shard(model)
        shard(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 2))
    """,
    "fsdp031-walk-shards-its-root-then-shards-it-again": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            for module in model.modules():
                if module is model:
                    fully_shard(module)
            fully_shard(model)  # expect: FSDP031
        shard(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 2))
    """,
}
