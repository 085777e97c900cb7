"""Style cases for FSDP042: code written in styles the fixtures do not use."""

CASES = {
    "fsdp042-get-model-state-dict-without-full-options-inline": """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(policy)
        fully_shard(ema)
        shards = get_model_state_dict(policy)
        set_model_state_dict(  # expect: FSDP042
            ema, shards, options=StateDictOptions(broadcast_from_rank0=True, full_state_dict=True)
        )
    """,
    "fsdp042-trainer-syncs-reference-from-policy": """
        import torch.distributed.checkpoint.state_dict as dsd
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, policy, reference):
                fully_shard(policy)
                fully_shard(reference)
                self.policy, self.reference = policy, reference
            def sync_reference(self):
                state = self.policy.state_dict()
                opts = dsd.StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
                dsd.set_model_state_dict(self.reference, model_state_dict=state, options=opts)  # expect: FSDP042
        Trainer(Net(), Net()).sync_reference()
    """,
    "fsdp042-near-miss-state-dict-taken-before-sharding": """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        state = policy.state_dict()
        fully_shard(policy)
        fully_shard(reference)
        set_model_state_dict(reference, state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    """,
    "fsdp042-near-miss-no-broadcast": """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(policy)
        fully_shard(reference)
        set_model_state_dict(reference, policy.state_dict(), options=StateDictOptions(full_state_dict=True))
    """,
    "fsdp042-near-miss-options-from-a-config": """
        from torch.distributed.checkpoint.state_dict import set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(policy)
        fully_shard(reference)
        set_model_state_dict(reference, policy.state_dict(), options=cfg.load_options)
    """,
    "fsdp042-near-miss-a-loaded-file-or-a-sharded-dict-on-some-paths": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(policy)
        fully_shard(reference)
        state = torch.load(path) if path else policy.state_dict()
        set_model_state_dict(reference, state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    """,
}
