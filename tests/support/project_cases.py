"""Small generated projects whose FSDP code sits in modules the linted file imports, in the import
spellings the project's import closure must read: the linted file alone names no FSDP API, the
modules it reaches do (``trainer/train.py`` builds the optimizer before sharding: FSDP001)."""

from __future__ import annotations

import textwrap
from pathlib import Path

MODEL = """
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
    """
PARALLEL = """
    from torch.distributed.fsdp import fully_shard


    def shard_model(model):
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        return model
    """
OPTIM = """
    import torch


    def build_optimizer(model):
        return torch.optim.AdamW(model.parameters())
    """
MAIN = """

def main():
    model = Model()
    opt = build_optimizer(model)
    model = {shard}(model)
    opt.step()
"""
HELPERS = "from trainer.model import Model\nfrom trainer.optim import build_optimizer\n"
BASE = {
    "trainer/__init__.py": "",
    "trainer/model.py": MODEL,
    "trainer/optim.py": OPTIM,
    "trainer/parallel.py": PARALLEL,
}


def train(imports: str, shard: str = "shard_model") -> str:
    return imports + MAIN.format(shard=shard)


# name -> the files that differ from BASE
CASES: dict[str, dict[str, str]] = {
    "from-import": {"trainer/train.py": train(HELPERS + "from trainer.parallel import shard_model\n")},
    "the parent package an import runs": {
        "trainer/__init__.py": PARALLEL,
        "trainer/train.py": train("import trainer.optim\n" + HELPERS, "trainer.shard_model"),
    },
    "a submodule nothing imports": {
        "trainer/train.py": train("import trainer\n" + HELPERS, "trainer.parallel.shard_model"),
    },
    "a continued line": {
        "trainer/train.py": train(
            "import trainer.model, \\\n    trainer.parallel\n" + HELPERS, "trainer.parallel.shard_model"
        )
    },
    "after a semicolon": {
        "trainer/train.py": train("import os; import trainer.parallel\n" + HELPERS, "trainer.parallel.shard_model")
    },
    "a comment in parentheses": {
        "trainer/train.py": train(
            HELPERS + "from trainer import (  # the helpers\n    parallel,\n)\n", "parallel.shard_model"
        )
    },
    "inside the function": {
        "trainer/train.py": train(HELPERS).replace(
            "def main():\n", "def main():\n    from .parallel import shard_model\n"
        )
    },
    "if/else between two modules": {
        "trainer/train.py": train(
            "import os\n" + HELPERS + "if os.environ.get('FSDP'):\n    from trainer.parallel import shard_model\n"
            "else:\n    from trainer.single import shard_model\n"
        ),
        "trainer/single.py": "def shard_model(model):\n    return model\n",
    },
    "relative star imports": {
        "trainer/all.py": "from .model import *\nfrom .optim import *\nfrom .parallel import *\n",
        "trainer/train.py": train("from .all import *\n"),
    },
    "import_module relative to __name__": {
        "trainer/__init__.py": "from importlib import import_module\n\n"
        "shard_model = import_module('.parallel', __name__).shard_model\n",
        "trainer/train.py": train(HELPERS + "from trainer import shard_model\n"),
    },
    "a script's sibling modules": {
        "examples/model.py": MODEL,
        "examples/optim.py": OPTIM,
        "examples/parallel.py": PARALLEL,
        "examples/sub/train.py": train(
            "from model import Model\nfrom optim import build_optimizer\nfrom parallel import shard_model\n"
        ),
    },
}


def write_project(root: Path, files: dict[str, str]) -> list[Path]:
    """The project under ``root`` (BASE with ``files`` over it); its Python files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("")
    for name, text in {**BASE, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip() if text.startswith("\n") else text)
    return sorted(root.rglob("*.py"))
