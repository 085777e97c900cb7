"""An edited module's re-parse from the statements around the edit gives what libcst's parse of
the whole text gives, or declines (None) and the whole text is parsed."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest

from fsdp2_lint.analysis import syntax
from fsdp2_lint.analysis.reparse import Parsed, reparsed
from fsdp2_lint.analysis.syntax import StatementLinks, parent_links

FIXTURES = Path(__file__).parents[2] / "fixtures"
MODULE = """\
\"\"\"A module.\"\"\"
import torch

LEARNING_RATE = 1e-3


def build(model):
    return torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)


# the model
model = torch.nn.Linear(8, 8)
optimizer = build(model)
"""


def previous(text: str) -> Parsed:
    return Parsed(cst.parse_module(text), text)


def assert_whole_parse(got: Parsed | None, text: str) -> None:
    """``got`` is None, or libcst's parse of ``text``: the same tree, settings, code and extents."""
    if got is None:
        return
    whole = cst.parse_module(text)
    assert got.module.deep_equals(whole)
    for setting in ("default_indent", "default_newline", "has_trailing_newline", "encoding"):
        assert getattr(got.module, setting) == getattr(whole, setting), setting
    assert got.module.code == whole.code
    assert got.lengths == Parsed(whole, text).statement_lengths()


def test_an_edit_parses_its_statement_and_the_two_beside_it_and_reuses_the_others() -> None:
    before = previous(MODULE)
    parsed: list[str] = []
    edited = MODULE.replace("lr=LEARNING_RATE", "lr=2 * LEARNING_RATE")
    got = reparsed(before, edited, lambda text: parsed.append(text) or cst.parse_module(text))
    assert got is not None
    assert_whole_parse(got, edited)
    around = "\nLEARNING_RATE = 1e-3\n\n\ndef build(model):\n    return torch.optim.AdamW(model.parameters(), lr=2 * LEARNING_RATE)\n"
    assert parsed == [around + "\n\n# the model\nmodel = torch.nn.Linear(8, 8)\n"]
    old, new = before.module.body, got.module.body
    assert [new[index] is old[index] for index in range(len(old))] == [True, True, True, False, True, True]


def test_edits_in_a_row_each_reuse_the_last_tree() -> None:
    tree = previous(MODULE)
    for rate in ("2e-3", "3e-3", "4e-3"):
        text = MODULE.replace("1e-3", rate)
        tree = reparsed(tree, text, cst.parse_module)
        assert tree is not None
        assert_whole_parse(tree, text)


@pytest.mark.parametrize(
    "edit",
    [
        ("model = torch", "    model = torch"),  # the statement moves into the block above
        ("optimizer = build(model)", "optimizer = build(model"),  # an unclosed bracket: no parse
        ("LEARNING_RATE = 1e-3", 'LEARNING_RATE = """'),  # a string that runs to the end
        ("# the model", "    # the model"),  # a comment that changes owner
        ("# the model", "x = (\n# the model"),  # a bracket that takes the comment in
        ("    return", "  return"),  # the first indented block's indentation: the module's
        ("build(model)\n", "build(model)\nif model:\n        print(model)\n"),  # a block indented otherwise
        ("import torch", "# -*- coding: latin-1 -*-"),  # the second line: the encoding
        ("optimizer = build(model)\n", "optimizer = build(model)"),  # the last line end
        ("optimizer = build(model)\n", "optimizer = build(model)\n\n# the end\n"),  # the footer
        ("import torch\n", "import torch\n\n\nif True:\n  pass\n"),  # a first block, another indentation
    ],
)
def test_an_edit_that_changes_more_than_its_statements_is_declined_or_parsed_as_the_whole(edit) -> None:
    text = MODULE.replace(*edit)
    assert text != MODULE
    assert_whole_parse(reparsed(previous(MODULE), text, cst.parse_module), text)


def test_a_part_that_does_not_parse_is_declined() -> None:
    assert reparsed(previous(MODULE), MODULE.replace("(model):", "(model)"), cst.parse_module) is None


def test_random_edits_of_the_fixtures_give_the_whole_texts_parse() -> None:
    chance = random.Random(20261127)
    snippets = [
        "\n",
        "    ",
        "  ",
        "#",
        "# c\n",
        "(",
        ")",
        "'''",
        '"',
        "\\\n",
        ":",
        "\n    x = 1\n",
        "if a:\n",
        "\t",
        "    # deep\n",
    ]
    reused = 0
    for path in sorted(FIXTURES.rglob("*.py"))[::6]:
        text = path.read_text(encoding="utf-8")
        try:
            tree = previous(text)
        except cst.ParserSyntaxError:
            continue
        for _ in range(6):
            at = chance.randrange(len(text) + 1)
            line = text.rfind("\n", 0, at) + 1
            edited = chance.choice(
                [
                    text[:at] + chance.choice(snippets) + text[at:],
                    text[:at] + text[at + chance.randrange(1, 40) :],
                    text[:line] + chance.choice([" ", "    ", "#"]) + text[line:],
                ]
            )
            got = reparsed(tree, edited, cst.parse_module)
            try:
                cst.parse_module(edited)
            except cst.ParserSyntaxError:
                assert got is None
                continue
            assert_whole_parse(got, edited)
            if got is not None:
                reused += 1
                text, tree = edited, got
    assert reused > 20  # most edits that parse are re-parsed in part


def test_a_tree_whose_code_is_not_its_text_is_declined() -> None:
    text = "import os\nx = 1\n\\\ny = 2\nz = 3\nw = 4\n"  # libcst drops the backslash's line
    tree = previous(text)
    assert tree.module.code != text
    assert tree.statement_lengths() is None
    assert reparsed(tree, text.replace("w = 4", "w = 5"), cst.parse_module) is None


def test_the_parent_links_of_the_statements_an_edit_keeps_are_reused(monkeypatch) -> None:
    before = previous(MODULE)
    kept: StatementLinks = {}
    parent_links(before.module, kept)
    got = reparsed(before, MODULE.replace("lr=LEARNING_RATE", "lr=2 * LEARNING_RATE"), cst.parse_module)
    assert got is not None
    walked: list[cst.CSTNode] = []
    walk = syntax._links_under
    monkeypatch.setattr(syntax, "_links_under", lambda root: walked.append(root) or walk(root))
    links = parent_links(got.module, {key: kept[key] for key in map(id, got.module.body) if key in kept})
    assert walked == [got.module.body[3]]  # the function edited; the others' links were kept
    assert links == walk(got.module)
