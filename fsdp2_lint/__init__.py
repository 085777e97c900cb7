"""fsdp2-lint: catch PyTorch FSDP2 (fully_shard) contract violations before they cost a training run."""

__version__ = "0.1.0"
