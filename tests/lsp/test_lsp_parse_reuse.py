"""The language server's child keeps the project modules it parsed between lints: an edit re-parses
the edited buffer's statements around the edit, and a module only when its text changed."""

from __future__ import annotations

from pathlib import Path

import libcst

from fsdp2_lint import nesting
from fsdp2_lint.analysis import syntax
from fsdp2_lint.config import Selection
from fsdp2_lint.lsp.worker import lint_document
from fsdp2_lint.pipeline import LintTask, SettingsResolver, lint_files

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
    # helpers.py's tree was kept; of the buffer, the new statement and the unchanged one before it
    assert parsed == ["optimizer.step()\nprint('step done')\n"]

    helpers.write_bytes(HELPERS_EDITED)
    assert [d.code for d in lint_document(train, edited).diagnostics] == ["FSDP001"]
    assert parsed[1:] == [HELPERS_EDITED.decode()]  # its new text parsed; the buffer, unchanged, was not


def test_edits_in_a_row_report_what_a_fresh_lint_of_each_text_reports(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_bytes(HELPERS)
    train = tmp_path / "train.py"
    train.write_bytes(TRAIN)
    edits = [
        TRAIN.replace(b"optimizer.step()", b"optimizer.step()  # noqa: FSDP001"),
        TRAIN.replace(b"fully_shard(model)\n", b"fully_shard(model)\nfor _ in range(2):\n    pass\n"),
        TRAIN.replace(b"fully_shard(model)\n", b"if True:\n    fully_shard(model)\n"),
        TRAIN.replace(
            b"optimizer = build_optimizer(model)\nfully_shard(model)",
            b"fully_shard(model)\noptimizer = build_optimizer(model)",
        ),
        TRAIN,
    ]
    settings = SettingsResolver(Selection()).for_path(train, is_dir=False)
    for text in edits:
        fresh = lint_files([LintTask.of(train, settings, str(train), text)])[0]  # nothing kept from before
        assert list(lint_document(train, text).diagnostics) == fresh


def test_a_lint_estimates_the_nesting_of_each_text_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_bytes(HELPERS)
    train = tmp_path / "train.py"
    edited = TRAIN + b"print('nesting')\n"
    scanned: list[str] = []
    scan = nesting._text_depth
    monkeypatch.setattr(nesting, "_text_depth", lambda text, indented: scanned.append(text) or scan(text, indented))
    assert [d.code for d in lint_document(train, edited).diagnostics] == ["FSDP001"]
    assert scanned.count(edited.decode()) == 1  # for: is it heavy? may it be parsed? is it too deep?


def test_an_edit_walks_the_syntax_of_its_new_statements_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_bytes(HELPERS)
    train = tmp_path / "train.py"
    lint_document(train, TRAIN)
    lint_document(train, TRAIN + b"print('one')\n")
    walked: list[libcst.CSTNode] = []
    walk = syntax._links_under
    monkeypatch.setattr(syntax, "_links_under", lambda root: walked.append(root) or walk(root))
    assert [d.code for d in lint_document(train, TRAIN + b"print('two')\n").diagnostics] == ["FSDP001"]
    statements = [libcst.Module([]).code_for_node(root) for root in walked if not isinstance(root, libcst.Module)]
    assert statements == ["print('two')\n"]  # the parent links under the others were kept
