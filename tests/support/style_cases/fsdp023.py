"""Style cases for FSDP023: code written in styles the fixtures do not use."""

CASES = {
    "fsdp023-policy-in-a-class-attribute": """
        from torch.distributed.fsdp import CPUOffload, fully_shard
        class Strategy:
            offload = CPUOffload(offload_params=True)  # expect: FSDP023
            def setup(self, model):
                fully_shard(model, offload_policy=self.offload)
        Strategy().setup(Net())
    """,
    "fsdp023-good-helper-called-with-the-fsdp2-algorithm": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        def get_policy(algo):
            if algo == 1:
                return MixedPrecision(param_dtype=torch.bfloat16)
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        def wrap(model):
            fully_shard(model, mp_policy=get_policy(2))
            return model
    """,
    "fsdp023-helper-called-with-the-fsdp1-algorithm": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        def get_policy(algo):
            if algo == 1:
                return MixedPrecision(param_dtype=torch.bfloat16)  # expect: FSDP023
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        def wrap(model):
            fully_shard(model, mp_policy=get_policy(1))
            return model
    """,
}
