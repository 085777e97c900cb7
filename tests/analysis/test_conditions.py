"""Correlated conditions (:mod:`fsdp2_lint.analysis.conditions`): the atom a test is keyed by, and
which facts about atoms exclude each other. Two `if`s on one setting exclude each other in every
spelling of the test; a setting that may change between them (rebound, stored, a call that may
change it, a loop, another call of the helper) is a new atom: not exclusive."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis.conditions import TRUTH, Condition, excludes, implied_tests, parts
from fsdp2_lint.analysis.facts import FileFacts, interpret

HEADER = """\
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
"""


def facts_of(source: str) -> FileFacts:
    source = HEADER + textwrap.dedent(source)
    module = cst.parse_module(source)
    return FileFacts("example.py", source.encode(), module, interpret(module, source.encode()).traces)


def _parts(source: str):
    found = parts(cst.parse_expression(source))
    return None if found is None else (cst.Module([]).code_for_node(found[0]), found[1], found[2])


@pytest.mark.parametrize(
    "test, expected",
    [
        ("cfg.use_fsdp2", ("cfg.use_fsdp2", TRUTH, True)),
        ("bool(flag)", ("flag", TRUTH, True)),
        ("x == 'full'", ("x", ("str", "full"), True)),
        ("'full' != x", ("x", ("str", "full"), False)),
        ("cfg.version == -1", ("cfg.version", ("int", -1), True)),
        ("x is None", ("x", ("none", None), True)),
        ("x is not None", ("x", ("none", None), False)),
        ("x is 1", None),  # identity of a non-singleton
        ("x == True", None),  # 1 == True: bools are no constant keys
        ("x < 2", None),
        ("a == b", None),
        ("f(x)", None),
        ("0 < x < 2", None),
    ],
)
def test_the_parts_of_a_test(test, expected):
    assert _parts(test) == expected


SITE = cst.Name("x")


@pytest.mark.parametrize(
    "first, second, exclusive",
    [
        ((TRUTH, True), (TRUTH, False), True),
        ((TRUTH, True), (TRUTH, True), False),
        ((("int", 1), True), (("int", 2), True), True),
        ((("int", 1), True), (("int", 2), False), False),
        ((("int", 1), False), (("int", 2), False), False),
        ((("str", "full"), True), (("str", "full"), False), True),
        ((("none", None), True), (TRUTH, True), True),  # x is None, x
        ((("none", None), False), (TRUTH, True), False),  # x is not None, x
        ((("int", 0), True), (TRUTH, False), False),  # x == 0, not x
        ((("str", "a"), True), (TRUTH, False), True),  # x == "a", not x
    ],
)
def test_which_facts_about_one_atom_exclude_each_other(first, second, exclusive):
    a, b = Condition("x", SITE, equals=first[0]), Condition("x", SITE, equals=second[0])
    assert excludes(a, first[1], b, second[1]) is exclusive
    assert excludes(b, second[1], a, first[1]) is exclusive


def test_different_atoms_never_exclude():
    base = Condition("x", SITE, ("use_fsdp2",), 3)
    for other in (
        Condition("y", SITE, ("use_fsdp2",), 3),
        Condition("x", cst.Name("x"), ("use_fsdp2",), 3),  # another binding
        Condition("x", SITE, ("use_fsdp1",), 3),
        Condition("x", SITE, ("use_fsdp2",), 4),  # after a mutation
        Condition("x", SITE, ("use_fsdp2",), 3, calls=(1,)),  # another call of the function
    ):
        assert not excludes(base, True, other, False)


CORRELATED = {
    "an attribute and its negation": (
        "cfg = load()\nif cfg.use_fsdp2:\n    fully_shard(a)\nif not cfg.use_fsdp2:\n    fully_shard(b)\n",
        True,
    ),
    "an attribute, then the other arm of another if": (
        "cfg = load()\nif cfg.fsdp.v2:\n    fully_shard(a)\nif cfg.fsdp.v2:\n    pass\nelse:\n    fully_shard(b)\n",
        True,
    ),
    "two constants": (
        "def f(cfg):\n    if cfg.version == 1:\n        fully_shard(a)\n    if cfg.version == 2:\n        fully_shard(b)\n"
        "f(load())\n",
        True,
    ),
    "== and != one constant": (
        "mode = load()\nif mode == 'full':\n    fully_shard(a)\nif mode != 'full':\n    fully_shard(b)\n",
        True,
    ),
    "is None and is not None": (
        "mesh = load()\nif mesh is None:\n    fully_shard(a)\nif mesh is not None:\n    fully_shard(b)\n",
        True,
    ),
    "bool() and not": ("flag = load()\nif bool(flag):\n    fully_shard(a)\nif not flag:\n    fully_shard(b)\n", True),
    "a torch call between the tests": (
        "cfg = load()\nif cfg.v2:\n    fully_shard(a)\ntorch.cuda.synchronize()\nif not cfg.v2:\n    fully_shard(b)\n",
        True,
    ),
    "an attribute stored between the tests": (
        "cfg = load()\nif cfg.v2:\n    fully_shard(a)\ncfg.v2 = other()\nif not cfg.v2:\n    fully_shard(b)\n",
        False,
    ),
    "another object's attribute stored between the tests": (
        "cfg = load()\nif cfg.v2:\n    fully_shard(a)\nopts.v2 = other()\nif not cfg.v2:\n    fully_shard(b)\n",
        False,
    ),
    "a call that may change the setting": (
        "cfg = load()\nif cfg.v2:\n    fully_shard(a)\ncfg.update(v2=False)\nif not cfg.v2:\n    fully_shard(b)\n",
        False,
    ),
    "an unknown function given the setting's owner": (
        "cfg = load()\nif cfg.v2:\n    fully_shard(a)\nfixup(cfg)\nif not cfg.v2:\n    fully_shard(b)\n",
        False,
    ),
    "the name rebound between the tests": (
        "flag = load()\nif flag == 1:\n    fully_shard(a)\nflag = other()\nif flag == 2:\n    fully_shard(b)\n",
        False,
    ),
    "x = not x": ("x = load()\nif x:\n    fully_shard(a)\nx = not x\nif not x:\n    fully_shard(b)\n", False),
    "one helper called with each value": (
        "def shard(flag):\n    if flag:\n        fully_shard(a)\n    if not flag:\n        fully_shard(b)\n"
        "shard(load())\nshard(other())\n",
        False,
    ),
    "a helper called in a loop": (
        "def shard(flag):\n    if flag:\n        fully_shard(a)\n    if not flag:\n        fully_shard(b)\n"
        "for flag in flags:\n    shard(flag)\n",
        False,
    ),
    "a rank test (left to the rank guards)": (
        "rank = dist.get_rank()\nif rank == 0:\n    fully_shard(a)\nif rank != 0:\n    fully_shard(b)\n",
        False,
    ),
    "two settings": ("cfg = load()\nif cfg.v2:\n    fully_shard(a)\nif not cfg.v1:\n    fully_shard(b)\n", False),
}


@pytest.mark.parametrize("source, exclusive", CORRELATED.values(), ids=CORRELATED.keys())
def test_tests_of_one_setting_are_exclusive_and_nothing_else_is(source, exclusive):
    shards = [event for trace in facts_of(source).traces for event in trace.shards]
    first, second = shards[0], shards[-1]  # the first call's first, the last call's last
    assert first.exclusive_with(second) is exclusive
    assert second.exclusive_with(first) is exclusive


@pytest.mark.parametrize(
    "body, implied",
    [
        ("return self.a and self.b == 'x'", ["self.a", "self.b == 'x'"]),
        ("ok = (self.a is not None\n      and self.a.k == 1)\nreturn ok", ["self.a is not None", "self.a.k == 1"]),
        ("ok = self.a\nif self.strict:\n    ok = ok and self.b\nreturn ok", ["self.a"]),
        ("return self.a or self.b", ["self.a or self.b"]),
        ("ok = self.a\nok = self.b\nreturn ok", []),  # built twice: either may be what it returns
        ("ok = self.a\nfor ok in self.items:\n    pass\nreturn ok", []),
        ("if self.a:\n    return True\nreturn self.b", []),  # two returns
        ("def inner():\n    return 1\nreturn self.a and self.b", ["self.a", "self.b"]),
    ],
)
def test_what_a_true_result_of_a_property_implies(body, implied):
    function = cst.parse_statement("def p(self):\n" + textwrap.indent(body, "    ") + "\n")
    assert [cst.Module([]).code_for_node(test) for test in implied_tests(function)] == implied
