"""Style cases for FSDP029: code written in styles the fixtures do not use."""

CASES = {
    "fsdp029-fsdp1-fields-and-aliases": """
        import torch
        from torch.distributed import fsdp
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy as MP
        a = fsdp.MixedPrecisionPolicy(torch.bfloat16, keep_low_precision_grads=True)  # expect: FSDP029
        b = MP(param_dtype=torch.float16, cast_root_forward_inputs=True)  # expect: FSDP029
    """,
    "fsdp029-too-many-positional": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy
        policy = MixedPrecisionPolicy(torch.bfloat16, torch.float32, None, True, torch.float32)  # expect: FSDP029
    """,
    "fsdp029-string-in-variable-and-positional": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        DTYPE = "bfloat16"
        def shard(model):
            fully_shard(model, mp_policy=MixedPrecisionPolicy(DTYPE))  # expect: FSDP029
            fully_shard(model, mp_policy=MixedPrecisionPolicy(torch.bfloat16, "float32"))  # expect: FSDP029
    """,
    "fsdp029-good-dtypes-and-unknown-kwargs": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.bfloat16, cast_forward_inputs=False)
        other = MixedPrecisionPolicy(**config.mp_kwargs)
        third = MixedPrecisionPolicy(param_dtype=dtypes[config.precision])
    """,
    "fsdp029-good-fsdp1-mixed-precision-is-another-rule": """
        import torch
        from torch.distributed.fsdp import MixedPrecision
        policy = MixedPrecision(param_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    """,
    "fsdp029-good-callee-is-fsdp1-or-fsdp2-by-version": """
        def make_policy(version, dtype):
            if version == 1:
                from torch.distributed.fsdp import MixedPrecision
            elif version == 2:
                from torch.distributed.fsdp import MixedPrecisionPolicy as MixedPrecision
            args = {"param_dtype": dtype, "reduce_dtype": dtype}
            if version == 1:
                args["buffer_dtype"] = dtype
            return MixedPrecision(**args)
    """,
    "fsdp029-fsdp2-only-alias-still-checked": """
        from torch.distributed.fsdp import MixedPrecisionPolicy as MixedPrecision
        def make_policy(dtype):
            args = {"param_dtype": dtype}
            args["buffer_dtype"] = dtype
            return MixedPrecision(**args)  # expect: FSDP029
    """,
    "fsdp029-good-string-or-dtype-by-path": """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy
        dtype = "bfloat16"
        if use_torch_dtypes:
            dtype = torch.bfloat16
        policy = MixedPrecisionPolicy(param_dtype=dtype)
    """,
}
