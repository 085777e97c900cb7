"""The rule contract: a check reads the facts the analysis computed and never walks the syntax tree
to decide what to report. Only building a fix (a function that returns a ``Rewrite``, and the
helpers only such functions call) may look around a node to write its edit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "rules"
# Ways to walk a syntax tree: the syntax index's ancestors, children, visitors, matchers, and
# the fixing library's search of a scope.
TREE_WALKS = frozenset(
    {"enclosing", "statement_of", "parents", "child_nodes", "visit", "walk", "findall", "extractall", "bindings"}
)


def tree_walks_in_detection(source: str) -> list[tuple[str, str]]:
    """(function, walk) for each tree walk that the rule's ``check`` reaches without going through
    a fix builder."""
    functions: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            functions.setdefault(node.name, node)
    fix_builders = {
        name for name, function in functions.items() if function.returns and "Rewrite" in ast.unparse(function.returns)
    }
    reached, pending = set(), ["check"]
    while pending:
        name = pending.pop()
        if name in reached or name not in functions or name in fix_builders:
            continue
        reached.add(name)
        pending.extend(
            node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(functions[name])
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
        )
    return sorted(
        (name, walk)
        for name in reached
        for node in ast.walk(functions[name])
        for walk in [node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None]
        if walk in TREE_WALKS
    )


@pytest.mark.parametrize("rule", sorted(RULES.glob("fsdp*.py")), ids=lambda path: path.stem)
def test_checks_read_facts_and_never_walk_the_tree(rule):
    assert tree_walks_in_detection(rule.read_text(encoding="utf-8")) == []


def test_the_contract_check_sees_a_walk_and_spares_fix_builders():
    source = """
class Rule:
    def check(self, facts):
        for event in facts.events():
            if _guarded(facts, event):
                yield Finding(event.node, "message", fix=_fix(facts, event))

def _guarded(facts, event):
    return facts.enclosing(event.node, cst.If) is not None

def _fix(facts, event) -> Rewrite | None:
    return _rewrite(facts.statement_of(event.node))
"""
    assert tree_walks_in_detection(source) == [("_guarded", "enclosing")]
