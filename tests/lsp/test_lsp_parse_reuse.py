"""The language server's child keeps the project modules it parsed between lints: an edit re-parses
the edited buffer, and a module only when its text changed."""

from __future__ import annotations

from pathlib import Path

import libcst

from fsdp2_lint.lsp.worker import lint_document

HELPERS = b"""\
import torch


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)
"""
HELPERS_EDITED = HELPERS.replace(b"lr=1e-3", b"lr=3e-4")
TRAIN = b"""\
import torch
from torch.distributed.fsdp import fully_shard

from helpers import build_optimizer

model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
optimizer = build_optimizer(model)
fully_shard(model)
model(torch.randn(2, 8)).sum().backward()
optimizer.step()
"""


def count_parses(monkeypatch) -> list[bytes]:
    """The texts libcst parses from now on."""
    parsed: list[bytes] = []
    parse = libcst.parse_module

    def counting(source, *args, **kwargs):
        parsed.append(source)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting)
    return parsed


def test_a_lint_parses_only_the_texts_that_changed_since_the_last_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    helpers, train = tmp_path / "helpers.py", tmp_path / "train.py"
    helpers.write_bytes(HELPERS)
    train.write_bytes(TRAIN)
    before = lint_document(train, TRAIN)
    assert [d.code for d in before.diagnostics] == ["FSDP001"]  # the optimizer is built in helpers.py

    parsed = count_parses(monkeypatch)
    edited = TRAIN + b"print('step done')\n"
    assert [d.code for d in lint_document(train, edited).diagnostics] == ["FSDP001"]
    assert parsed == [edited]  # helpers.py's tree was kept

    helpers.write_bytes(HELPERS_EDITED)
    assert [d.code for d in lint_document(train, edited).diagnostics] == ["FSDP001"]
    assert parsed[1:] == [HELPERS_EDITED]  # its new text parsed; the buffer, unchanged, was not
