"""Style cases for FSDP044: code written in styles the fixtures do not use."""

CASES = {
    "fsdp044-unshard-async-after-backward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            model(batch).sum().backward()
            handle = model.unshard(async_op=True)  # expect: FSDP044
            handle.wait()
            optimizer.step()
    """,
    "fsdp044-unshard-each-fsdp-module-in-a-helper": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def gather_for_logging(model):
            for module in model.modules():
                if isinstance(module, FSDPModule):
                    module.unshard()  # expect: FSDP044
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        for batch in loader:
            model(batch).sum().backward()
            gather_for_logging(model)
            optimizer.step()
            optimizer.zero_grad()
    """,
    "fsdp044-good-unshard-after-step-prefetches-next-forward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            model(batch).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            model.unshard()
    """,
    "fsdp044-good-unshard-before-last-micro-batch-backward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for mb in micro_batches:
            model.unshard()
            model(mb).sum().backward()
        optimizer.step()
    """,
    "fsdp044-good-every-module-resharded": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        fully_shard(model)
        model(batch).sum().backward()
        model.unshard()
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        optimizer.step()
    """,
    "fsdp044-good-unshard-of-something-not-sharded": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        model(batch).sum().backward()
        cache.unshard()
        optimizer.step()
    """,
    "fsdp044-off-once-at-start": """
        model.set_reshard_after_backward(False)  # expect: FSDP044
        for batch in loader:
            model(batch).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    """,
    "fsdp044-root-only-off": """
        def train(model, optimizer, micro_batches):
            model.set_reshard_after_backward(False, recurse=False)  # expect: FSDP044
            for mb in micro_batches:
                model(mb).mean().backward()
            optimizer.step()
    """,
    "fsdp044-good-is-last-keyword": """
        def train(model, optimizer, micro_batches):
            for i, mb in enumerate(micro_batches):
                model.set_reshard_after_backward(reshard_after_backward=i == len(micro_batches) - 1)
                model(mb).mean().backward()
            optimizer.step()
    """,
    "fsdp044-good-back-on-before-last-backward": """
        model.set_reshard_after_backward(False)
        for mb in micro_batches[:-1]:
            model(mb).mean().backward()
        model.set_reshard_after_backward(True)
        model(micro_batches[-1]).mean().backward()
        optimizer.step()
    """,
    "fsdp044-back-on-only-after-the-step": """
        def train(model, optimizer, loader, accum):
            for i, batch in enumerate(loader):
                model.set_reshard_after_backward(False)  # expect: FSDP044
                model(batch).mean().backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    model.set_reshard_after_backward(True)
    """,
    "fsdp044-back-on-for-another-model": """
        def train(model, ema_model, optimizer, micro_batches):
            model.set_reshard_after_backward(False)  # expect: FSDP044
            for mb in micro_batches:
                model(mb).mean().backward()
            ema_model.set_reshard_after_backward(True)
            optimizer.step()
    """,
    "fsdp044-good-root-resharded-by-hand": """
        def train(model, optimizer, micro_batches):
            model.set_reshard_after_backward(False, recurse=False)
            for mb in micro_batches:
                model(mb).mean().backward()
            model.reshard()
            optimizer.step()
    """,
    "fsdp044-root-reshard-does-not-reach-blocks": """
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        model.set_reshard_after_backward(False)  # expect: FSDP044
        for mb in micro_batches:
            model(mb).mean().backward()
        model.reshard()
        optimizer.step()
    """,
    "fsdp044-good-no-step-in-file": """
        def keep_unsharded(model):
            model.set_reshard_after_backward(False)
    """,
    "fsdp044-good-scheduler-step-only": """
        def warm(model, scheduler, micro_batches):
            model.set_reshard_after_backward(False)
            for mb in micro_batches:
                model(mb).mean().backward()
            scheduler.step()
    """,
}
