"""A name the receiver's own class defines, in a module of the project other than the linted
file, is that class's, not the FSDP1 API of that name (FSDP005, FSDP024)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fsdp2_lint.config import Selection
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files

BASE = """
import contextlib


class BaseTrainer:
    @contextlib.contextmanager
    def no_sync(self):
        self.model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            self.model.set_requires_gradient_sync(True)
"""

MODEL = """
import contextlib

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    @contextlib.contextmanager
    def no_sync(self):
        self.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            self.set_requires_gradient_sync(True)

    def clip_grad_norm_(self, max_norm):
        return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
"""

SUBCLASS_TRAINER = """
from torch.distributed.fsdp import fully_shard

from base import BaseTrainer


class Trainer(BaseTrainer):
    def __init__(self, model):
        self.model = fully_shard(model)

    def step(self, x):
        with self.no_sync():
            self.model(x).sum().backward()
"""

MODEL_TRAINER = """
from torch.distributed.fsdp import fully_shard

from model import Model


def main(x):
    model = Model()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    with model.no_sync():
        model(x).sum().backward()
    model.clip_grad_norm_(1.0)
"""

# The base class defines `no_sync`, but the call is the model's (a plain module's): still reported.
MODEL_NO_SYNC_TRAINER = """
from torch.distributed.fsdp import fully_shard

from base import BaseTrainer


class Trainer(BaseTrainer):
    def __init__(self, model):
        self.model = fully_shard(model)

    def step(self, x):
        with self.model.no_sync():
            self.model(x).sum().backward()
"""


def lint_project(root: Path, train: str) -> list[tuple[int, str]]:
    (root / "pyproject.toml").write_text("")
    for name, text in {"base.py": BASE, "model.py": MODEL, "train.py": train}.items():
        (root / name).write_text(textwrap.dedent(text).lstrip())
    resolver = SettingsResolver(Selection(), isolated=True)
    path = root / "train.py"
    found = lint_files([LintTask.of(path, resolver.for_path(path), str(path))], jobs=1)
    return sorted((d.line, d.code) for diagnostics in found for d in diagnostics)


@pytest.mark.parametrize("train", [SUBCLASS_TRAINER, MODEL_TRAINER], ids=["base-class", "model-class"])
def test_a_method_a_class_in_another_module_defines_is_its_own(tmp_path: Path, train: str) -> None:
    assert lint_project(tmp_path, train) == []


def test_the_model_s_no_sync_is_reported_though_the_trainer_s_base_defines_one(tmp_path: Path) -> None:
    assert lint_project(tmp_path, MODEL_NO_SYNC_TRAINER) == [(11, "FSDP005")]
