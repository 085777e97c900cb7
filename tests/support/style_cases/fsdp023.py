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
    "fsdp023-policy-in-a-dataclass-default-factory": """
        from dataclasses import dataclass, field
        import torch
        from torch.distributed.fsdp import MixedPrecision, fully_shard
        @dataclass
        class TrainConfig:
            mp: MixedPrecision = field(default_factory=lambda: MixedPrecision(param_dtype=torch.bfloat16))  # expect: FSDP023
        def shard(model, cfg):
            fully_shard(model, mp_policy=cfg.mp)
        shard(Net(), TrainConfig())
    """,
    "fsdp023-policy-class-as-a-dataclass-default-factory-in-a-method": """
        import dataclasses
        from torch.distributed.fsdp import CPUOffload, fully_shard
        @dataclasses.dataclass
        class ParallelConfig:
            offload: CPUOffload = dataclasses.field(default_factory=CPUOffload)  # expect: FSDP023
        class Trainer:
            def __init__(self, model):
                self.cfg = ParallelConfig()
                fully_shard(model, offload_policy=self.cfg.offload)
        Trainer(Net())
    """,
    "fsdp023-good-fsdp2-policy-in-a-dataclass-default-factory": """
        from dataclasses import dataclass, field
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        def fsdp1_policy():
            return MixedPrecision(param_dtype=torch.bfloat16)
        @dataclass
        class TrainConfig:
            mp: MixedPrecisionPolicy = field(default_factory=lambda: MixedPrecisionPolicy(param_dtype=torch.bfloat16))
            fsdp1_mp: MixedPrecision = field(default_factory=fsdp1_policy)  # for the FSDP1 path, not given here
        def shard(model, cfg):
            fully_shard(model, mp_policy=cfg.mp)
        shard(Net(), TrainConfig())
    """,
    "fsdp023-good-version-table-read-at-fsdp2": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        FSDP_VERSION = 2
        POLICIES = {
            1: MixedPrecision(param_dtype=torch.bfloat16),
            2: MixedPrecisionPolicy(param_dtype=torch.bfloat16),
        }
        def shard(model, version=FSDP_VERSION):
            fully_shard(model, mp_policy=POLICIES[version])
        class Wrapper:
            policies = {"fsdp1": MixedPrecision(param_dtype=torch.bfloat16), "fsdp2": MixedPrecisionPolicy()}
            def __init__(self, model):
                fully_shard(model, mp_policy=self.policies.get("fsdp2"))
        shard(Net())
        Wrapper(Net())
    """,
    "fsdp023-version-table-read-at-fsdp1": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        POLICIES = {
            1: MixedPrecision(param_dtype=torch.bfloat16),  # expect: FSDP023
            2: MixedPrecisionPolicy(param_dtype=torch.bfloat16),
        }
        def shard(model):
            fully_shard(model, mp_policy=POLICIES[1])
        shard(Net())
    """,
    "fsdp023-good-policy-class-table-keyed-by-version": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        class Plugin:
            def __init__(self, fsdp_version, dtype):
                self.fsdp_version = fsdp_version
                policy_class = {1: MixedPrecision, 2: MixedPrecisionPolicy}[fsdp_version]
                self.mixed_precision = policy_class(param_dtype=dtype, reduce_dtype=dtype)
        def prepare(model, plugin):
            if plugin.fsdp_version == 2:
                fully_shard(model, mp_policy=plugin.mixed_precision)
        def main(cfg):
            prepare(Net(), Plugin(cfg.fsdp_version, torch.bfloat16))
        def main_fsdp2():
            prepare(Net(), Plugin(2, torch.bfloat16))
    """,
    "fsdp023-policy-class-table-read-at-fsdp1-for-fully-shard": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        class Plugin:
            def __init__(self, fsdp_version, dtype):
                policy_class = {1: MixedPrecision, 2: MixedPrecisionPolicy}[fsdp_version]
                self.mixed_precision = policy_class(param_dtype=dtype, reduce_dtype=dtype)  # expect: FSDP023
        def main():
            plugin = Plugin(1, torch.bfloat16)
            fully_shard(Net(), mp_policy=plugin.mixed_precision)
    """,
}
