"""``python -m fsdp2_lint.runtime.rank.gpus`` prints how many GPUs torch sees: the torchrun launcher
must know before any launch, and imports no torch itself."""

from __future__ import annotations

import torch

if __name__ == "__main__":
    print(torch.cuda.device_count())
