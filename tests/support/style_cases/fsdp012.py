"""Style cases for FSDP012: code written in styles the fixtures do not use."""

CASES = {
    "fsdp012-math-isnan-of-item-break": """
        import math
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            out = model(batch)
            loss = criterion(out, batch)
            if math.isnan(loss.item()):  # expect: FSDP012
                break
            loss.backward()
    """,
    "fsdp012-loss-spike-threshold": """
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        for step, batch in enumerate(loader):
            loss = model(batch).mean()
            if loss.item() > 10 * running_loss:  # expect: FSDP012
                print("spike, skipping")
                continue
            loss.backward()
            opt.step()
    """,
    "fsdp012-flag-all-reduced-near-miss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            skip = torch.tensor(float(not torch.isfinite(loss)))
            dist.all_reduce(skip, op=dist.ReduceOp.MAX)
            if skip.item() > 0:
                continue
            loss.backward()
    """,
    "fsdp012-raise-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            if not torch.isfinite(loss):
                raise FloatingPointError("loss is not finite")
            loss.backward()
    """,
    "fsdp012-unsharded-model-near-miss": """
        import torch
        for batch in loader:
            loss = model(batch).mean()
            if torch.isnan(loss):
                continue
            loss.backward()
    """,
    "fsdp012-global-step-tensor-near-miss": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            if global_step.item() >= max_steps:
                break
            loss.backward()
    """,
}
