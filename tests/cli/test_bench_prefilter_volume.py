"""bench/prefilter_volume.py's counts on a small project: a file whose own code no rule can fire
on is admitted when imports are followed and a module it imports can satisfy a rule, and counted
as admitted only through its imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "prefilter_volume.py"
PROJECT = {
    "pyproject.toml": "",
    "pkg/__init__.py": "",
    "pkg/parallel.py": """
        import torch
        from torch.distributed.fsdp import fully_shard


        def build(model):
            optimizer = torch.optim.AdamW(model.parameters())
            fully_shard(model)
            return optimizer
        """,
    "pkg/app.py": """
        from pkg.parallel import build


        def main(model):
            return build(model)
        """,
    "pkg/unrelated.py": """
        def add(a, b):
            return a + b
        """,
}


def test_following_imports_admits_the_importer_of_fsdp_code(tmp_path: Path) -> None:
    for name, text in PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    command = [sys.executable, str(BENCH), "--follow-imports", str(tmp_path)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "admitted: 1 files" in output
    assert "admitted following imports: 2 files, 1 of them only through the modules they import" in output
