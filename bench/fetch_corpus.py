"""Fetch the benchmark corpus: public repositories with real FSDP2 training code, at the commits
pinned in the project's real-world corpus list, into one folder (default: bench-corpus/).

    python bench/fetch_corpus.py [DEST]
    python bench/lint_speed.py bench-corpus/

    python bench/fetch_corpus.py --precision bench-precision      # the speed corpus and 11 more
    python bench/precision_corpus.py bench-precision

Needs git and network access; a repository already there is left as it is. Without them, run
bench/lint_speed.py on the installed torch package's sources alone (always there).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPOSITORIES = {  # owner/name: commit
    "pytorch/torchtitan": "b5bcd76c66d0",
    "pytorch/torchtune": "bd2a0fc7c314",
    "pytorch/examples": "77f55b912142",
    "huggingface/accelerate": "16cb6eb80dd9",
    "verl-project/verl": "1dda039b9c63",
    "allenai/OLMo-core": "fa6c5014c9f6",
    "facebookresearch/lingua": "437d680e5218",
    "Lightning-AI/pytorch-lightning": "7f0c3436cd3f",
}
# Linted for precision as well (bench/precision_corpus.py), kept out of the speed corpus whose
# figures README gives.
PRECISION_REPOSITORIES = REPOSITORIES | {
    "axolotl-ai-cloud/axolotl": "067b021c8b87",
    "mosaicml/composer": "6405188805a0",
    "ByteDance-Seed/VeOmni": "d9774494f5d8",
    "PrimeIntellect-ai/prime-rl": "559b44772e47",
    "huggingface/trl": "f2cd57710ae3",
    "NVIDIA-NeMo/RL": "7ea279abfbeb",
    "pytorch/ao": "36027d82d1ad",
    "NVIDIA/Model-Optimizer": "a2fbac7bad8a",
    "inclusionAI/AReaL": "4aef98d8d818",
    "RLinf/RLinf": "a3816b596478",
    "NVIDIA-NeMo/Automodel": "36044ad3d139",
    "NVIDIA/NeMo": "8cfedd720346",
    # Added 2026-11-27, linted first with code that had never seen them.
    "InternLM/xtuner": "b934f462095c",
    "NovaSky-AI/SkyRL": "a9564572eb8e",
    "THUDM/slime": "624b824a898a",
    "pytorch/torchft": "73dafea42211",
    "Lightning-AI/litgpt": "26857050fe3f",
    "OpenRLHF/OpenRLHF": "3c3be6234e0c",
    "allenai/open-instruct": "e6c3044aa620",
    "facebookresearch/fairseq2": "027bdebca4b9",
    "facebookresearch/dinov3": "6876159a11b4",
    "facebookresearch/perception_models": "3e352cca6606",
    "modelscope/ms-swift": "3602360a5623",
    "NVIDIA/Megatron-LM": "d98e8a64ddf3",
    "NVIDIA/TransformerEngine": "d0067d0da6cb",
    "Lightning-AI/lightning-thunder": "1e22aacb1aef",
    "mosaicml/llm-foundry": "8c8dd48f7216",
    "linkedin/Liger-Kernel": "ead96b618e5c",
}


def main() -> int:
    arguments = sys.argv[1:]
    precision = "--precision" in arguments
    folders = [argument for argument in arguments if argument != "--precision"]
    destination = Path(folders[0] if folders else "bench-corpus")
    destination.mkdir(parents=True, exist_ok=True)
    for repository, commit in (PRECISION_REPOSITORIES if precision else REPOSITORIES).items():
        folder = destination / repository.replace("/", "+")
        if folder.exists():
            print(f"{folder}: already there")
            continue
        url = f"https://github.com/{repository}.git"
        print(f"{repository} @ {commit}", flush=True)
        subprocess.run(["git", "clone", "--quiet", "--filter=blob:none", "--no-checkout", url, str(folder)], check=True)
        subprocess.run(["git", "-C", str(folder), "checkout", "--quiet", commit], check=True)
    files = sum(1 for _ in destination.rglob("*.py"))
    print(f"{destination}: {files} Python files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
