"""A fix's text edits are computed from the statements it changes, not from the whole file."""

from __future__ import annotations

import libcst as cst
import pytest

from fsdp2_lint.analysis.facts import FileFacts, interpret
from fsdp2_lint.analysis.syntax import generate, source_lines
from fsdp2_lint.fixing import text_edits as text_edits_module
from fsdp2_lint.fixing.apply import apply_rewrites
from fsdp2_lint.fixing.lines import keep_dropped, line_edits
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.fixing.text_edits import text_edits
from fsdp2_lint.rule import all_rules

HEADER = "# a training script\nimport torch\nfrom torch.distributed.fsdp import fully_shard\n\n"
CASES = {
    "expression in a nested block": HEADER + "def main():\n    if True:\n        fully_shard(model)\n"
    "        out = model.forward(x)  # keep\n    return out\n",
    "import added and a with block rewritten": "from torch.distributed.fsdp import fully_shard\n\n"
    "def step(model, batches):\n    fully_shard(model)\n    for b in batches:\n        with model.no_sync():\n"
    "            # accumulate\n            model(b).sum().backward()\n",
    "a statement moved inside main()": HEADER + "def main():\n    model = Net()\n"
    "    opt = torch.optim.AdamW(model.parameters())\n    for blk in model.blocks:\n        fully_shard(blk)\n"
    "    fully_shard(model)\n    opt.step()\n",
    "the last line, no final newline, CRLF": HEADER.replace("\n", "\r\n") + "fully_shard(model)\r\nmodel.forward(x)",
    "inside try/except/else": HEADER + "try:\n    fully_shard(model)\nexcept ValueError:\n    pass\nelse:\n"
    "    y = model.forward(x)\n",
}


def fixes_of(source: str) -> tuple[FileFacts, list]:
    module = cst.parse_module(source)
    facts = FileFacts("train.py", source.encode(), module, interpret(module, source.encode()).traces)
    found = [finding.fix for rule in all_rules() for finding in rule().check(facts) if finding.fix is not None]
    return facts, found


def applied(source: str, edits) -> str:
    lines = source_lines(source)
    for edit in sorted(edits, key=lambda e: e.line, reverse=True):
        lines[edit.line - 1 : edit.end_line - 1] = source_lines(edit.content)
    return "".join(lines)


def whole_module_code(module: cst.Module) -> str:
    raise AssertionError("the whole module was generated again")


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_edits_rebuild_only_the_changed_statements_and_match_the_whole_fix(source, monkeypatch):
    facts, fixes = fixes_of(source)
    assert fixes
    for fix in fixes:
        with monkeypatch.context() as patch:
            patch.setattr(cst.Module, "code", property(whole_module_code))
            edits = text_edits(facts, fix)
        assert applied(source, edits) == apply_rewrites(facts.module, [fix]).code
        assert edits and all(edit.end_line - edit.line <= 4 for edit in edits)  # a few lines each, not the file


def test_a_change_to_the_files_header_falls_back_to_comparing_whole_files():
    source = HEADER + "fully_shard(model)\nmodel.forward(x)\n"
    facts, (fix,) = fixes_of(source)
    comment = facts.module.header[0]
    header_fix = Rewrite("drop the comment", {comment: cst.RemoveFromParent()})
    assert applied(source, text_edits(facts, header_fix)) == source.replace("# a training script\n", "")


def test_a_fix_deep_in_a_long_function_generates_only_the_statements_it_changes(monkeypatch):
    steps = "".join(f"    step{i}(model)\n" for i in range(30))
    middle = "    if ready:\n        out = model.forward(x)\n"
    source = HEADER + "def main():\n    fully_shard(model)\n" + steps + middle + steps + "    return out\n"
    facts, fixes = fixes_of(source)
    generated: list[str] = []

    def recorded(module, statements, indent):
        generated.append(generate(module, statements, indent))
        return generated[-1]

    monkeypatch.setattr(text_edits_module, "generate", recorded)
    edits = [edit for fix in fixes for edit in text_edits(facts, fix)]
    assert applied(source, edits) == source.replace("model.forward(x)", "model(x)")
    assert generated and all(code.count("\n") <= 2 for code in generated)  # the statement, not main()


def test_a_statement_added_after_a_last_line_without_a_line_break_goes_on_a_line_of_its_own():
    source = HEADER + "fully_shard(model)\nmodel.forward(x)"
    facts, _ = fixes_of(source)
    last = facts.module.body[-1]
    added = Rewrite(
        "synchronize", {last: cst.FlattenSentinel([last, cst.parse_statement("torch.cuda.synchronize()\n")])}
    )
    fixed = applied(source, text_edits(facts, added))
    assert fixed == apply_rewrites(facts.module, [added]).code
    assert fixed.endswith("model.forward(x)\ntorch.cuda.synchronize()")


# Lines the old and new text share at either end are set aside before diffing; repeated lines there
# must not be taken for shared ones.
LINE_CHANGES = {
    "a copy of the last line appended": ("a = 1\nb = 2\n", "a = 1\nb = 2\nb = 2\n"),
    "the last line moved to the top": ("p = 1\nq = 2\n", "q = 2\np = 1\n"),
    "the first line replaced, the last line's copy after it": ("p = 1\nq = 2\np = 1\n", "r = 3\np = 1\np = 1\n"),
}


@pytest.mark.parametrize(("old", "new"), LINE_CHANGES.values(), ids=LINE_CHANGES.keys())
def test_line_edits_turn_the_old_text_into_the_new_when_lines_repeat_at_either_end(old, new):
    assert applied(old, line_edits(old, new)) == new


def test_a_fixed_line_keeps_more_form_feeds_than_its_statement_is_long():
    text = "\f" * 8 + "x = 1\ny = 2\n"
    assert keep_dropped(text, "x = 1\ny = 2\n", "x = 3\ny = 2\n") == "\f" * 8 + "x = 3\ny = 2\n"


def test_a_file_ending_in_a_blank_line_of_a_lone_carriage_return_keeps_it_when_fixed():
    assert keep_dropped("x = 1\n\r", "x = 1\n", "x = 2\n") == "x = 2\n\r"
