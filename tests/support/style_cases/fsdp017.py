"""Style cases for FSDP017: code written in styles the fixtures do not use."""

CASES = {
    "fsdp017-good-flag-set-to-fsdp2-picks-fully-shard": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
        USE_FSDP2 = True
        def wrap(model):
            for block in model.layers:
                if USE_FSDP2:
                    fully_shard(block)
                else:
                    FSDP(block)
            if not USE_FSDP2:
                return FSDP(model)
            fully_shard(model)
            return model
        wrap(Net())
    """,
    "fsdp017-flag-left-to-fsdp1-for-the-root": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
        USE_FSDP2 = False
        def wrap(model):
            for block in model.layers:
                fully_shard(block)
            if not USE_FSDP2:
                return FSDP(model)  # expect: FSDP017
            fully_shard(model)
            return model
        wrap(Net())
    """,
}
