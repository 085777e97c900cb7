"""Style cases for FSDP014: code written in styles the fixtures do not use."""

CASES = {
    "fsdp014-disabled-once-at-start": """
        model.set_requires_gradient_sync(False)  # expect: FSDP014
        for batch in loader:
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
    """,
    "fsdp014-good-reenabled-before-last-backward": """
        for step, batch in enumerate(loader):
            last = (step + 1) % accumulation == 0
            if not last:
                model.set_requires_gradient_sync(False)
            else:
                model.set_requires_gradient_sync(True)
            model(batch).sum().backward()
            if last:
                optimizer.step()
    """,
    "fsdp014-reenabled-only-after-the-step": """
        def train(model, optimizer, loader, accum):
            for i, batch in enumerate(loader):
                model.set_requires_gradient_sync(False)  # expect: FSDP014
                model(batch).mean().backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    model.set_requires_gradient_sync(True)
    """,
    "fsdp014-good-profiler-step-while-disabled": """
        def train(model, optimizer, micro, prof):
            model.set_requires_gradient_sync(False)
            for mb in micro[:-1]:
                model(mb).mean().backward()
                prof.step()
            model.set_requires_gradient_sync(True)
            model(micro[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-no-step-in-file": """
        def freeze_sync(model):
            model.set_requires_gradient_sync(False)
    """,
    "fsdp014-reenabled-on-another-model": """
        def train(model, ema_model, optimizer, micro_batches):
            model.set_requires_gradient_sync(False)  # expect: FSDP014
            for mb in micro_batches:
                model(mb).mean().backward()
            ema_model.set_requires_gradient_sync(True)
            optimizer.step()
    """,
    "fsdp014-reenabled-on-a-submodule": """
        from torch.distributed.fsdp import fully_shard
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        for batches in loader:
            model.set_requires_gradient_sync(False)  # expect: FSDP014
            for mb in batches[:-1]:
                model(mb).sum().backward()
            model.layers[-1].set_requires_gradient_sync(True)
            model(batches[-1]).sum().backward()
            optimizer.step()
    """,
    "fsdp014-reenabled-without-recursing": """
        def accumulate(model, optimizer, micro_batches):
            model.set_requires_gradient_sync(False)  # expect: FSDP014
            for mb in micro_batches[:-1]:
                model(mb).mean().backward()
            model.set_requires_gradient_sync(True, recurse=False)
            model(micro_batches[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-reenabled-without-recursing-positional": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model, optimizer):
                for block in model.blocks:
                    fully_shard(block)
                self.model = fully_shard(model)
                self.optimizer = optimizer
            def step(self, micro_batches):
                self.model.set_requires_gradient_sync(False)  # expect: FSDP014
                for mb in micro_batches[:-1]:
                    self.model(mb).mean().backward()
                self.model.set_requires_gradient_sync(True, False)
                self.model(micro_batches[-1]).mean().backward()
                self.optimizer.step()
    """,
    "fsdp014-good-reenabled-through-an-alias": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model, optimizer):
                self.model = fully_shard(model)
                self.optimizer = optimizer
            def step(self, micro_batches):
                model = self.model
                self.model.set_requires_gradient_sync(False)
                for mb in micro_batches[:-1]:
                    model(mb).mean().backward()
                model.set_requires_gradient_sync(True, recurse=True)
                model(micro_batches[-1]).mean().backward()
                self.optimizer.step()
    """,
    "fsdp014-good-reenabled-on-each-block-and-the-root": """
        from torch.distributed.fsdp import fully_shard
        def train(model, optimizer, micro_batches):
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            model.set_requires_gradient_sync(False)
            for mb in micro_batches[:-1]:
                model(mb).mean().backward()
            for block in model.blocks:
                block.set_requires_gradient_sync(True, recurse=False)
            model.set_requires_gradient_sync(True, recurse=False)
            model(micro_batches[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-each-module-individually-in-an-unseen-model": """
        def train(model, optimizer, micro_batches):
            for module in model.modules():
                module.set_requires_gradient_sync(False, recurse=False)
            for mb in micro_batches[:-1]:
                model(mb).mean().backward()
            for module in model.modules():
                module.set_requires_gradient_sync(True, recurse=False)
            model(micro_batches[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-root-off-alone-and-back-on-alone": """
        def train(model, optimizer, micro_batches):
            model.set_requires_gradient_sync(False, recurse=False)
            for mb in micro_batches[:-1]:
                model(mb).mean().backward()
            model.set_requires_gradient_sync(True, recurse=False)
            model(micro_batches[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-reenabled-in-another-method-on-self-model": """
        class Trainer:
            def accumulate(self, mb):
                self.model.set_requires_gradient_sync(False)
                self.model(mb).mean().backward()
            def finish(self, mb):
                self.model.set_requires_gradient_sync(True)
                self.model(mb).mean().backward()
                self.optimizer.step()
    """,
    "fsdp014-reenabled-in-another-method-on-another-model": """
        class Trainer:
            def accumulate(self, mb):
                self.model.set_requires_gradient_sync(False)  # expect: FSDP014
                self.model(mb).mean().backward()
                self.optimizer.step()
            def finish(self, mb):
                self.ref_model.set_requires_gradient_sync(True)
                self.model(mb).mean().backward()
                self.optimizer.step()
    """,
    "fsdp014-good-on-or-off-per-micro-batch-by-branch": """
        def train(model, optimizer, micro_batches):
            for i, mb in enumerate(micro_batches):
                if i == len(micro_batches) - 1:
                    model.set_requires_gradient_sync(True)
                else:
                    model.set_requires_gradient_sync(False)
                model(mb).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-off-branch-first-per-micro-batch": """
        def train(model, optimizer, micro_batches, accumulation):
            for step, mb in enumerate(micro_batches):
                if (step + 1) % accumulation:
                    model.set_requires_gradient_sync(False)
                else:
                    model.set_requires_gradient_sync(True)
                model(mb).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-helper-chooses-by-last-micro-batch-flag": """
        from contextlib import nullcontext

        class Strategy:
            def before_micro_batch(self, model, is_last_micro_batch):
                if is_last_micro_batch:
                    model.set_requires_gradient_sync(True)
                else:
                    model.set_requires_gradient_sync(False)
                return nullcontext()

        class Worker:
            def __init__(self, model, optimizer):
                self.model, self.optimizer, self.strategy = model, optimizer, Strategy()

            def update(self, micro_batches):
                for idx, mb in enumerate(micro_batches):
                    ctx = self.strategy.before_micro_batch(
                        self.model, is_last_micro_batch=(idx + 1) == len(micro_batches)
                    )
                    with ctx:
                        self.model(mb).mean().backward()
                self.optimizer.step()
    """,
    "fsdp014-switched-on-first-then-off-each-micro-batch": """
        def train(model, optimizer, micro_batches):
            for i, mb in enumerate(micro_batches):
                if i == 0:
                    model.set_requires_gradient_sync(True)
                model.set_requires_gradient_sync(False)  # expect: FSDP014
                model(mb).mean().backward()
            optimizer.step()
    """,
    "fsdp014-branch-on-a-setting-keeps-sync-off-every-micro-batch": """
        class Trainer:
            def train(self, micro_batches):
                for mb in micro_batches:
                    if self.cfg.accumulate:
                        self.model.set_requires_gradient_sync(False)  # expect: FSDP014
                    else:
                        self.model.set_requires_gradient_sync(True)
                    self.model(mb).mean().backward()
                self.optimizer.step()
    """,
}
