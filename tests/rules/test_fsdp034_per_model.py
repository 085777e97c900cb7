"""FSDP034 asks per model whether its blocks are sharded, also when the models' sharding sits in
other modules of a project: one model's per-block plan in a helper module says nothing about a
second model the linted file shards only at its root."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from project_cases import write_project

from fsdp2_lint.config import Selection
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files

BLOCKS_ONLY = """
    from torch.distributed.fsdp import fully_shard


    def shard_blocks(model):
        for layer in model.layers:
            fully_shard(layer)
    """
TRAIN = """
    import torch
    from torch.distributed.fsdp import fully_shard
    from trainer.blocks import shard_blocks
    from trainer.model import Model
    from trainer.parallel import shard_model


    def main():
        policy = Model()
        {policy}
        critic = Model()
        {critic}
        return torch.optim.AdamW([*policy.parameters(), *critic.parameters()])
    """
ROOT_ONLY = "fully_shard(critic)"
CASES = {
    "another module's helper shards one model per block": ("shard_model(policy)", ROOT_ONLY, True),
    "another module's helper shards one model's blocks, the file its root": (
        "shard_blocks(policy)\n        fully_shard(policy)",
        ROOT_ONLY,
        True,
    ),
    "both models go through the helper": ("shard_model(policy)", "shard_model(critic)", False),
    "the blocks helper for both models": (
        "shard_blocks(policy)\n        fully_shard(policy)",
        "shard_blocks(critic)\n        fully_shard(critic)",
        False,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_model_sharded_per_block_in_another_module_does_not_hide_a_root_only_one(tmp_path: Path, case: str) -> None:
    policy, critic, reported = CASES[case]
    train = textwrap.dedent(TRAIN.format(policy=policy, critic=critic)).lstrip()
    compile(train, "train.py", "exec")  # a syntax error would report nothing
    write_project(tmp_path, {"trainer/blocks.py": BLOCKS_ONLY, "trainer/train.py": train})
    path = tmp_path / "trainer" / "train.py"
    resolver = SettingsResolver(Selection(select=("FSDP034",)), isolated=True)
    found = [
        d
        for diagnostics in lint_files([LintTask.of(path, resolver.for_path(path), str(path))], jobs=1)
        for d in diagnostics
    ]
    root_only_line = next((n for n, line in enumerate(train.splitlines(), 1) if line.strip() == ROOT_ONLY), None)
    assert [(d.line, d.code) for d in found] == ([(root_only_line, "FSDP034")] if reported else [])
