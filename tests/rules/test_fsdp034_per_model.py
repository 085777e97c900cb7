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


# The models module selects the device, so the analysis follows it (a module of plain `nn` code
# no rule's prefilter admits is not followed: its models are unknown, taken to have blocks).
TOY_MODELS = """
    import copy

    import torch
    import torch.nn as nn


    def setup_device(rank):
        torch.cuda.set_device(rank)


    class FeedForward(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.w1 = nn.Linear(size, 2 * size)
            self.w2 = nn.Linear(2 * size, size)


    class ToyModel(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.ffn = FeedForward(size)


    class TwoBlocks(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.encoder = FeedForward(size)
            self.decoder = FeedForward(size)


    def make_pair(model_class, size):
        ref_model = model_class(size).to("cuda")
        return ref_model, copy.deepcopy(ref_model)
    """
PARITY_TEST = """
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module
    from toys.models import {model_class}, make_pair


    def test_parity(mesh, plan):
        {build}
        dist_model = parallelize_module(dist_model, mesh["tp"], plan)
        dist_model = fully_shard(dist_model, mesh=mesh["dp"])
        dist_optim = torch.optim.SGD(dist_model.parameters(), lr=1e-2)
    """
SHARD_LINE = 'dist_model = fully_shard(dist_model, mesh=mesh["dp"])'
TOY_CASES = {
    "a toy model of one feed-forward, built in another module": (
        "ToyModel",
        "_, dist_model = make_pair(ToyModel, 64)",
        False,
    ),
    "a copy of a reference the test trains, made in another module": (
        "TwoBlocks",
        "ref_model, dist_model = make_pair(TwoBlocks, 64)\n"
        "        ref_optim = torch.optim.SGD(ref_model.parameters(), lr=1e-2)",
        False,
    ),
    "a model of two blocks, built in another module": (
        "TwoBlocks",
        "dist_model = make_pair(TwoBlocks, 64)[1]",
        True,
    ),
    "a copy of an untrained reference of two blocks": (
        "TwoBlocks",
        "ref_model, dist_model = make_pair(TwoBlocks, 64)",
        True,
    ),
}


@pytest.mark.parametrize("case", TOY_CASES)
def test_how_another_module_builds_the_model_decides_whether_it_has_blocks(tmp_path: Path, case: str) -> None:
    model_class, build, reported = TOY_CASES[case]
    test = textwrap.dedent(PARITY_TEST.format(model_class=model_class, build=build)).lstrip()
    compile(test, "test_parity.py", "exec")
    write_project(tmp_path, {"toys/__init__.py": "", "toys/models.py": TOY_MODELS, "toys/test_parity.py": test})
    path = tmp_path / "toys" / "test_parity.py"
    resolver = SettingsResolver(Selection(select=("FSDP034",)), isolated=True)
    found = [
        d
        for diagnostics in lint_files([LintTask.of(path, resolver.for_path(path), str(path))], jobs=1)
        for d in diagnostics
    ]
    shard_line = next(n for n, line in enumerate(test.splitlines(), 1) if line.strip() == SHARD_LINE)
    assert [(d.line, d.code) for d in found] == ([(shard_line, "FSDP034")] if reported else [])
