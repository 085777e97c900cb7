"""Style cases for FSDP001: code written in styles the fixtures do not use."""

CASES = {
    "fsdp001-comprehension-params": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])  # expect: FSDP001
        fully_shard(model)
        opt.step()
    """,
    "fsdp001-param-groups-named-parameters": """
        import torch
        from torch.distributed._composable.fsdp import fully_shard
        model = Net()
        decay, no_decay = [], []
        for name, param in model.named_parameters():
            (no_decay if name.endswith("bias") else decay).append(param)
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups)  # expect: FSDP001
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        train(model, opt)
    """,
    "fsdp001-dynamic-optimizer-class": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        opt = getattr(torch.optim, cfg.optimizer)(model.parameters(), lr=cfg.lr)  # expect: FSDP001
        fully_shard(model)
        opt.step()
    """,
    "fsdp001-submodule-params-before-root-shard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        head_opt = torch.optim.SGD(model.head.parameters(), lr=0.1)  # expect: FSDP001
        fully_shard(model)
        head_opt.step()
    """,
    "fsdp001-init-calls-setup-after-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.AdamW(self.model.parameters())  # expect: FSDP001
                self._setup_fsdp()
            def _setup_fsdp(self):
                for layer in self.model.layers:
                    fully_shard(layer)
                fully_shard(self.model)
    """,
    "fsdp001-helpers-in-wrong-order-in-main": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_model(m):
            for block in m.layers:
                fully_shard(block)
            fully_shard(m)
        def build_optimizer(m, lr):
            return torch.optim.AdamW(m.parameters(), lr=lr)
        def main():
            model = Net()
            optimizer = build_optimizer(model, 1e-3)  # expect: FSDP001
            shard_model(model)
            for batch in loader:
                optimizer.step()
        if __name__ == "__main__":
            main()
    """,
    "fsdp001-functools-partial-factory": """
        import functools
        import torch
        from torch.distributed.fsdp import fully_shard
        make_optimizer = functools.partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01)
        model = Net()
        optimizer = make_optimizer(model.parameters())  # expect: FSDP001
        fully_shard(model)
        optimizer.step()
    """,
    "fsdp001-partial-of-fully-shard-after-optimizer": """
        import functools
        import torch
        from torch.distributed.fsdp import fully_shard
        shard = functools.partial(fully_shard, mesh=mesh, reshard_after_forward=True)
        model = Net()
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP001
        for block in model.layers:
            shard(block)
        shard(model)
        optimizer.step()
    """,
    "fsdp001-good-partial-after-sharding": """
        from functools import partial
        import torch
        from torch.distributed.fsdp import fully_shard
        make_optimizer = partial(torch.optim.AdamW, lr=1e-3)
        model = Net()
        fully_shard(model)
        optimizer = make_optimizer(model.parameters())
        optimizer.step()
    """,
    "fsdp001-container-built-from-parts-sharded-later": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        encoder, decoder = Encoder(), Decoder()
        model = nn.ModuleList([encoder, decoder])
        opt = torch.optim.AdamW(model.parameters())  # expect: FSDP001
        fully_shard(encoder)
        fully_shard(decoder)
        opt.step()
    """,
    "fsdp001-imported-optimizer-factory": """
        from torch.distributed.fsdp import fully_shard
        from trainlib.optim import build_optimizers
        model = Net()
        optimizers = build_optimizers([model], job_config)  # expect: FSDP001
        fully_shard(model)
        optimizers.step()
    """,
    "fsdp001-configure-optimizers-of-a-model-defined-elsewhere": """
        from torch.distributed.fsdp import fully_shard
        from model import GPT
        model = GPT(config)
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda")  # expect: FSDP001
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
        optimizer.step()
    """,
    "fsdp001-good-factory-after-sharding": """
        from torch.distributed.fsdp import fully_shard
        from trainlib.optim import build_lr_schedulers, build_optimizer
        model = Net()
        fully_shard(model)
        optimizer = build_optimizer(model, cfg)
        scheduler = build_lr_schedulers(optimizer, cfg)
        optimizer.step()
    """,
    "fsdp001-dataclass-post-init": """
        from dataclasses import dataclass
        from typing import ClassVar
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class Trainer:
            model: nn.Module
            lr: float = 1e-3
            name: ClassVar[str] = "trainer"
            def __post_init__(self):
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr)  # expect: FSDP001
            def shard(self):
                fully_shard(self.model)
        trainer = Trainer(Net(), lr=3e-4)
        trainer.shard()
        trainer.optimizer.step()
    """,
    "fsdp001-good-helpers-in-right-order": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_model(m):
            for block in m.layers:
                fully_shard(block)
            fully_shard(m)
        def build_optimizer(m):
            return torch.optim.AdamW(m.parameters())
        model = Net()
        shard_model(model)
        optimizer = build_optimizer(model)
        optimizer.step()
    """,
    "fsdp001-good-separate-methods-unknown-order": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class LitModel:
            def configure_model(self):
                fully_shard(self.model)
            def configure_optimizers(self):
                return torch.optim.AdamW(self.model.parameters())
    """,
    "fsdp001-good-exclusive-branches": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        if args.fsdp:
            fully_shard(model)
            opt = torch.optim.AdamW(model.parameters())
        else:
            opt = torch.optim.AdamW(model.parameters())
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt.step()
    """,
    "fsdp001-good-other-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        teacher, student = Net(), Net()
        teacher_opt = torch.optim.AdamW(teacher.parameters())
        fully_shard(student)
        student_opt = torch.optim.AdamW(student.parameters())
        teacher_opt.step()
        student_opt.step()
    """,
    "fsdp001-good-megatron-fully-shard": """
        import torch
        from megatron_fsdp import fully_shard
        model = Net()
        opt = torch.optim.AdamW(model.parameters())
        model = fully_shard(model)
        opt.step()
    """,
    "fsdp001-good-param-groups-rebuilt-after-yield": """
        import torch
        from contextlib import contextmanager
        from torch.distributed.fsdp import fully_shard
        @contextmanager
        def sync_optimizer_and_model_params(optimizer, model):
            names = [name for name, _ in model.named_parameters()]
            try:
                yield
            finally:
                optimizer.param_groups.clear()
                optimizer.add_param_group({"params": list(model.parameters())})
        model = Net()
        opt = torch.optim.AdamW(model.parameters())
        with sync_optimizer_and_model_params(opt, model) if opt is not None else nullcontext():
            fully_shard(model)
        opt.step()
    """,
    "fsdp001-context-manager-that-repairs-nothing": """
        import torch
        from contextlib import contextmanager
        from torch.distributed.fsdp import fully_shard
        @contextmanager
        def sync_optimizer_and_model_params(optimizer, model):
            names = [name for name, _ in model.named_parameters()]
            yield
            print(names)
        model = Net()
        opt = torch.optim.AdamW(model.parameters())  # expect: FSDP001
        with sync_optimizer_and_model_params(opt, model):
            fully_shard(model)
        opt.step()
    """,
}
