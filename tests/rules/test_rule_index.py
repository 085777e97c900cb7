"""The rule index (``fsdp2_lint.rules._index``) says of each rule what the rule itself declares, so
that a run can select rules and prefilter files from it without importing any rule."""

from __future__ import annotations

import pytest

from fsdp2_lint.prefilter import Word
from fsdp2_lint.rule import Rule, head_of, index_source, loaded, rule_heads
from fsdp2_lint.rule import all_rules as rules

STALE = "rules/_index.py is stale: python tests/support/rule_index.py --update"


def test_the_index_holds_every_rules_head_in_code_order():
    assert [head.code for head in rule_heads()] == [rule.code for rule in rules()], STALE
    for head, rule in zip(rule_heads(), rules(), strict=True):
        assert head == head_of(rule), f"{rule.code}: {STALE}"


def test_a_head_loads_its_rule():
    assert [head.load() for head in rule_heads()] == list(rules())
    assert [loaded(head) for head in rule_heads()] == [loaded(rule) for rule in rules()] == list(rules())


def test_the_index_text_declares_the_same_heads():
    namespace: dict[str, object] = {}
    exec(compile(index_source(rules()), "_index.py", "exec"), namespace)
    assert namespace["HEADS"] == rule_heads()


class _Lambda(Rule):
    code = "FSDP999"
    name = "lambda-word"
    requires = ((Word("rank", lambda word: word == "rank"),),)


def test_a_word_the_index_cannot_name_is_refused():
    with pytest.raises(ValueError, match="FSDP999: a Word accepts a set of words or a function"):
        index_source([_Lambda])
