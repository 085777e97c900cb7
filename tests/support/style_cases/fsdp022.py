"""Style cases for FSDP022: code written in styles the fixtures do not use."""

CASES = {
    "fsdp022-strategy-named-on-the-command-line-as-reshard-after-forward": """
        import argparse
        from torch.distributed.fsdp import ShardingStrategy, fully_shard
        args = argparse.ArgumentParser().parse_args()
        fully_shard(model, reshard_after_forward=ShardingStrategy[args.sharding])  # expect: FSDP022
    """,
    "fsdp022-strategy-named-in-a-config-through-a-helper": """
        from torch.distributed.fsdp import api, fully_shard
        class Trainer:
            def strategy(self):
                return api.ShardingStrategy[self.cfg.sharding.upper()]
            def wrap(self, model):
                fully_shard(model, reshard_after_forward=self.strategy())  # expect: FSDP022
    """,
    "fsdp022-good-strategy-named-on-the-command-line-compared": """
        import argparse
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy, fully_shard
        args = argparse.ArgumentParser().parse_args()
        strategy = ShardingStrategy[args.sharding]
        if args.fsdp2:
            fully_shard(model, reshard_after_forward=strategy == ShardingStrategy.FULL_SHARD)
        else:
            model = FSDP(model, sharding_strategy=strategy)
    """,
    "fsdp022-good-strategy-on-the-fsdp1-path-only": """
        import os
        from torch.distributed.fsdp import ShardingStrategy, fully_shard
        class Plugin:
            def __init__(self, version):
                value = os.environ.get("RESHARD", "true")
                if version == 2:
                    self.reshard = value.lower() == "true"
                else:
                    self.reshard = ShardingStrategy[value.upper()]
        plugin = Plugin(version)
        fully_shard(model, reshard_after_forward=plugin.reshard)
    """,
    "fsdp022-strategy-on-both-paths": """
        from torch.distributed.fsdp import ShardingStrategy, fully_shard
        strategy = ShardingStrategy.FULL_SHARD if big else ShardingStrategy.SHARD_GRAD_OP
        fully_shard(model, reshard_after_forward=strategy)  # expect: FSDP022
    """,
}
