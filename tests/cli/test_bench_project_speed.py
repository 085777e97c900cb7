"""bench/project_speed.py's measuring on a small project: the warm run analyses nothing, and
editing a helper re-analyses exactly the files whose import closure holds it (timings are the
benchmark's business, never asserted here)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "project_speed.py"
PROJECT = {
    "pyproject.toml": "",
    "pkg/__init__.py": "",
    # the helper, imported by two modules (one through the other)
    "pkg/common.py": """
        from torch.distributed.fsdp import fully_shard


        def shard_each(modules):
            for module in modules:
                fully_shard(module)
        """,
    "pkg/parallel.py": """
        from torch.distributed.fsdp import fully_shard

        from pkg.common import shard_each


        def shard_model(model):
            shard_each(model.layers)
            fully_shard(model)
            return model
        """,
    "pkg/train.py": """
        import torch

        from pkg.parallel import shard_model


        def main(model):
            opt = torch.optim.AdamW(model.parameters())
            model = shard_model(model)
            opt.step()
        """,
    "pkg/standalone.py": """
        from torch.distributed.fsdp import fully_shard


        def shard(model):
            fully_shard(model)
        """,
    "pkg/data.py": "def batches(items):\n    return list(items)\n",
}


def project_speed(monkeypatch: pytest.MonkeyPatch):
    """The script as a module (registered while the test runs: its dataclasses look themselves up)."""
    spec = importlib.util.spec_from_file_location("project_speed", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_editing_a_helper_reanalyses_exactly_the_files_that_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in PROJECT.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    result = project_speed(monkeypatch).measure_project(tmp_path, jobs=1)

    assert result.files == 6
    assert result.admitted == ["pkg/common.py", "pkg/parallel.py", "pkg/standalone.py", "pkg/train.py"]
    assert result.runs["cold"].analysed == 4
    assert result.runs["warm"].analysed == 0
    assert result.edited == "pkg/common.py"  # imported by parallel.py, and by train.py through it
    assert result.importers == result.reanalysed == ["pkg/common.py", "pkg/parallel.py", "pkg/train.py"]
    assert result.runs["edited"].analysed == 3 and result.unexplained == 0
    assert (tmp_path / "pkg/common.py").read_text() == textwrap.dedent(PROJECT["pkg/common.py"]).lstrip()
