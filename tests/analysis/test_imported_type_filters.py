"""FSDP002 on a `modules()` walk filtered by types or class names that another project module
defines: the filter is what that module binds, and the root's class is the one the model was
built or annotated with."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fsdp2_lint.config import Selection
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files

MODEL = """
import torch.nn as nn


class Block(nn.Module):
    pass


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(2))


WRAP = (Block, Model)
WRAP_NAMES = {"Block", "Model"}
BLOCK_NAMES = {"Block"}
"""

SHARD = """
from torch.distributed.fsdp import fully_shard

{imports}


def shard(model: Model):
    for m in model.modules():
{filter}
            fully_shard(m)
    fully_shard(model)
"""

FILTERS = {  # the import line, the loop's filter, whether the root passes it (FSDP002)
    "type in an imported tuple": ("from app.model import WRAP, Model", "if type(m) in WRAP:", True),
    "isinstance of an imported tuple": ("from app.model import WRAP, Model", "if isinstance(m, WRAP):", True),
    "class name in an imported set": (
        "from app.model import WRAP_NAMES, Model",
        "if type(m).__name__ in WRAP_NAMES:",
        True,
    ),
    "module attribute": (
        "from app import model as defs\nfrom app.model import Model",
        "if type(m) in defs.WRAP:",
        True,
    ),
    "block names only": ("from app.model import BLOCK_NAMES, Model", "if type(m).__name__ in BLOCK_NAMES:", False),
    "the block class only": ("from app.model import Block, Model", "if type(m) is Block:", False),
}


@pytest.mark.parametrize("name", FILTERS)
def test_a_filter_defined_in_another_module_admits_the_root_when_it_lists_its_class(tmp_path: Path, name) -> None:
    imports, test, reported = FILTERS[name]
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "app").mkdir()
    (tmp_path / "app/__init__.py").write_text("")
    (tmp_path / "app/model.py").write_text(MODEL)
    shard = tmp_path / "app/shard.py"
    shard.write_text(SHARD.format(imports=imports, filter=textwrap.indent(test, " " * 8)))
    resolver = SettingsResolver(Selection(select=("FSDP002",)), isolated=True)
    found = [
        d for result in lint_files([LintTask.of(shard, resolver.for_path(shard), str(shard))], jobs=1) for d in result
    ]
    line = next(n for n, text in enumerate(shard.read_text().splitlines(), 1) if "fully_shard(m)" in text)
    assert [(d.code, d.line) for d in found] == ([("FSDP002", line)] if reported else [])
