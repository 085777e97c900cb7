"""Style cases for FSDP035: code written in styles the fixtures do not use."""

# The dtype a precision setting names, as a helper returns it.
_DTYPE_FROM_PRECISION = """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        def dtype_from_precision(precision):
            if precision == "bf16":
                return torch.bfloat16
            if precision == "fp16":
                return torch.float16
            return torch.float32
"""

CASES = {
    "fsdp035-to-dtype-keyword-named-policy": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = build()
        model.to(dtype=torch.bfloat16)  # expect: FSDP035
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        for block in model.blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    """,
    "fsdp035-to-device-and-dtype": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net().to("cuda", torch.bfloat16)  # expect: FSDP035
        fully_shard(model, mp_policy=MixedPrecisionPolicy(torch.bfloat16, torch.float32))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-from-pretrained-dtype-string": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(path, dtype="bfloat16")  # expect: FSDP035
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-trainer-self-model-half": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        class Trainer:
            def setup(self):
                self.model = Net()
                self.model.half()  # expect: FSDP035
                fully_shard(self.model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """,
    "fsdp035-good-policy-of-other-dtype": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net().to(torch.float16)
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-good-cast-back-with-to-float32": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
        model.to(torch.float32)
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-good-cast-inputs-not-module": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net()
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
        batch = batch.to(torch.bfloat16)
        loss = model(batch.half()).sum()
    """,
    "fsdp035-good-frozen-teacher": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        student = Net()
        teacher = Net().bfloat16().eval()
        fully_shard(student, mp_policy=mp)
        fully_shard(teacher, mp_policy=mp)
        optimizer = torch.optim.AdamW(student.parameters())
    """,
    "fsdp035-good-cast-back-after-sharding": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net().half()
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
        model.to(dtype=torch.float32)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-good-cast-back-after-the-optimizer": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        model = Net().half()
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
        optimizer = torch.optim.AdamW(model.parameters())
        model.float()
    """,
    "fsdp035-good-cast-to-the-dtype-a-setting-chooses": f"""{_DTYPE_FROM_PRECISION}\
        model = Transformer()
        model.to(dtype_from_precision(cfg.precision))
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-good-cast-to-a-dtype-looked-up-from-a-setting": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
        model = Transformer()
        model = model.to(dtype=DTYPES[args.precision])
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp035-cast-to-the-dtype-a-literal-setting-chooses": f"""{_DTYPE_FROM_PRECISION}\
        model = Transformer()
        model.to(dtype_from_precision("bf16"))  # expect: FSDP035
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        optimizer = torch.optim.AdamW(model.parameters())
    """,
}
