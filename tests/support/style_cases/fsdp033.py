"""Style cases for FSDP033: code written in styles the fixtures do not use."""

CASES = {
    "fsdp033-near-miss-flag-picks-a-project-sync-context-or-none": """
        from contextlib import nullcontext
        import torch
        from torch.distributed.fsdp import fully_shard
        def run_step(model, inputs, defer_sync):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            engine = make_engine(model)
            for i, batch in enumerate(inputs):
                if defer_sync:
                    sync_ctx = engine.sync_context(last=i == len(inputs) - 1)
                else:
                    sync_ctx = nullcontext()  # the baseline: sync on every micro-batch, on purpose
                with sync_ctx:
                    model(batch).sum().backward()
            optimizer.step()
        def main():
            model = torch.nn.Linear(4, 4)
            fully_shard(model)
            run_step(model, batches, defer_sync=False)
            run_step(model, batches, defer_sync=True)
    """,
    "fsdp033-flag-picks-autocast-or-no-context": """
        from contextlib import nullcontext
        import torch
        from torch.distributed.fsdp import fully_shard
        def run_step(model, batches, amp):
            for batch in batches:
                ctx = torch.autocast("cuda", dtype=torch.bfloat16) if amp else nullcontext()
                with ctx:
                    model(batch).sum().backward()  # expect: FSDP033
            optimizer.step()
        fully_shard(model)
        run_step(model, batches, amp=True)
    """,
    "fsdp033-near-miss-reshard-helper-only-for-an-fsdp2-model": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def resize_embeddings(model, size):
            is_fsdp = isinstance(model, FSDPModule)
            model.emb.resize(size)
            if is_fsdp:
                fully_shard(model.emb)
        model = Net()
        resize_embeddings(model, 1024)
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """,
    "fsdp033-reshard-helper-on-a-sharded-model": """
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def resize_embeddings(model, size):
            if isinstance(model, FSDPModule):
                fully_shard(model.emb)
        model = Net()
        fully_shard(model)
        resize_embeddings(model, 1024)
        for i, batch in enumerate(loader):
            model(batch).sum().backward()  # expect: FSDP033
            if (i + 1) % accum == 0:
                optimizer.step()
    """,
    "fsdp033-while-loop-micro-batches-then-step": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for step in range(steps):
            mb = 0
            while mb < micro_batches:
                model(batch[mb]).sum().backward()  # expect: FSDP033
                mb += 1
            optimizer.step()
    """,
    "fsdp033-grad-accum-flag-in-helper": """
        from torch.distributed.fsdp import fully_shard
        def train(model, optimizer, loader, grad_accum_steps):
            for i, batch in enumerate(loader):
                loss = model(batch).mean() / grad_accum_steps
                loss.backward()  # expect: FSDP033
                if (i + 1) % grad_accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        fully_shard(model)
        train(model, optimizer, loader, 4)
    """,
    "fsdp033-ddp-only-no-sync-fallback": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for i, batch in enumerate(loader):
            ctx = model.no_sync() if hasattr(model, "no_sync") and (i + 1) % accum else contextlib.nullcontext()
            with ctx:
                model(batch).sum().backward()  # expect: FSDP033
            if (i + 1) % accum == 0:
                optimizer.step()
    """,
    "fsdp033-near-miss-step-under-overflow-test": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            model(batch).sum().backward()
            if not found_inf:
                optimizer.step()
    """,
    "fsdp033-near-miss-sync-off-flag": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for i, batch in enumerate(loader):
            model.set_requires_gradient_sync((i + 1) % accum == 0)
            model(batch).sum().backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """,
    "fsdp033-near-miss-unsharded-model": """
        for batch in micro_batches:
            model(batch).sum().backward()
        optimizer.step()
    """,
    "fsdp033-near-miss-scheduler-step-after-loop": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for epoch in range(epochs):
            for batch in loader:
                model(batch).sum().backward()
                optimizer.step()
            scheduler.step()
    """,
    "fsdp033-good-sync-context-the-analysis-cannot-see": """
        from contextlib import nullcontext
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for i, batch in enumerate(micro_batches):
            if defer_sync:
                ctx = engine.gradient_sync_context(is_last=i == len(micro_batches) - 1)
            else:
                ctx = nullcontext()
            with ctx:
                model(batch).sum().backward()
        optimizer.step()
    """,
    "fsdp033-nullcontext-alone-still-reported": """
        from contextlib import nullcontext
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in micro_batches:
            with nullcontext():
                model(batch).sum().backward()  # expect: FSDP033
        optimizer.step()
    """,
}
