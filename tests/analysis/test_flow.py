"""The branch engine: every branching construct (``if``, ``while``, conditional expressions,
comprehension ``if``s) runs its arms on their own variables and heap, applies what its test
establishes in each arm only there, and joins the arms by one join function."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis.facts import FileFacts, interpret
from fsdp2_lint.analysis.interpreter import flow
from fsdp2_lint.analysis.model import ANY, Event, EventKind, ObjKind, options

HEADER = """\
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
"""


def facts_of(source: str) -> FileFacts:
    source = HEADER + textwrap.dedent(source)
    module = cst.parse_module(source)
    return FileFacts("example.py", source.encode(), module, interpret(module, source.encode()).traces)


def calls_of(facts: FileFacts, name: str, entry: str) -> list[Event]:
    """The ``receiver.name(...)`` events of one entry point, in execution order."""
    (trace,) = [trace for trace in facts.traces if trace.entry == entry]
    return [event for event in trace.events if event.kind is EventKind.METHOD and event.name == name]


def made_by(facts: FileFacts, event: Event) -> set[str]:
    """The code that created each object the receiver of ``event`` may be."""
    return {
        facts.code(option.root.node) if option.root.node else option.root.kind for option in options(event.receiver)
    }


SHARDED, OTHER = "Net()", "Other()"

# --- each arm has its own heap; after the construct the heap is the join ---------------------------

HEAP_PER_ARM = {
    "if": """
        class A:
            def setup(self, c, x):
                self.m = fully_shard(Net())
                if c:
                    self.m = Other()
                    self.m.forward(x)
                else:
                    self.m.forward(x)
                self.m.forward(x)
        """,
    "while": """
        class A:
            def setup(self, c, x):
                self.m = fully_shard(Net())
                while c:
                    self.m = Other()
                    self.m.forward(x)
                self.m.forward(x)
                self.m.forward(x)
        """,
    "conditional expression": """
        class A:
            def other(self):
                self.m = Other()
                return self.m
            def setup(self, c, x):
                self.m = fully_shard(Net())
                self.other().forward(x) if c else self.m.forward(x)
                self.m.forward(x)
        """,
    "comprehension if": """
        class A:
            def other(self):
                self.m = Other()
                return self.m
            def setup(self, c, x, xs):
                self.m = fully_shard(Net())
                [self.other().forward(x) for _ in xs if c]
                self.m.forward(x)
                self.m.forward(x)
        """,
}


@pytest.mark.parametrize("construct", HEAP_PER_ARM)
def test_an_arm_sees_only_its_own_heap_writes_and_the_heap_is_joined_after(construct):
    facts = facts_of(HEAP_PER_ARM[construct])
    in_first_arm, in_second_arm, after = calls_of(facts, "forward", "A.setup")
    assert made_by(facts, in_first_arm) == {OTHER}
    if construct in ("if", "conditional expression"):  # the other arm does not see the first's write
        assert made_by(facts, in_second_arm) == {SHARDED}
    assert made_by(facts, after) == {SHARDED, OTHER}


def test_the_arm_that_exits_leaves_the_rest_of_the_block_its_own_heap_and_its_caller_the_join():
    facts = facts_of(
        """
        class A:
            def setup(self, c, x):
                self.m = fully_shard(Net())
                if c:
                    self.m = Other()
                    return
                self.m.forward(x)
        def main(c, x):
            a = A()
            a.setup(c, x)
            a.m.forward(x)
        """
    )
    rest_of_block, in_caller = calls_of(facts, "forward", "main")
    assert made_by(facts, rest_of_block) == {SHARDED}
    assert made_by(facts, in_caller) == {SHARDED, OTHER}


def test_an_else_arm_does_not_see_the_then_arm_writes_to_a_local_object():
    facts = facts_of(
        """
        def main(c, x):
            holder = Holder()
            holder.m = fully_shard(Net())
            if c:
                holder.m = Other()
            else:
                holder.m.forward(x)
        """
    )
    (in_else,) = calls_of(facts, "forward", "main")
    assert made_by(facts, in_else) == {SHARDED}


# --- what a test says holds inside its arm and is undone after --------------------------------------

NARROWING = {
    "if": """
        def main(model, x):
            if isinstance(model, DDP):
                model.forward(x)
            model.forward(x)
        """,
    "if on an attribute": """
        class A:
            def __init__(self):
                self.model = fully_shard(Net())
            def run(self, x):
                if hasattr(self.model, "no_sync"):
                    self.model.forward(x)
                self.model.forward(x)
        """,
    "if, another name it narrows rebound in the arm": """
        def main(model, other, x):
            if isinstance(other, DDP) and isinstance(model, DDP):
                other = None
                model.forward(x)
            model.forward(x)
        """,
    "while": """
        def main(model, x):
            while isinstance(model, DDP):
                model.forward(x)
            model.forward(x)
        """,
    "conditional expression": """
        def main(model, x):
            model.forward(x) if isinstance(model, DDP) else None
            model.forward(x)
        """,
    "comprehension if": """
        def main(model, x, xs):
            [model.forward(x) for _ in xs if isinstance(model, DDP)]
            model.forward(x)
        """,
}


@pytest.mark.parametrize("construct", NARROWING)
def test_a_narrowing_holds_in_its_arm_and_is_undone_after(construct):
    facts = facts_of(NARROWING[construct])
    entry = "A.run" if "attribute" in construct else "main"
    inside, after = calls_of(facts, "forward", entry)
    assert made_by(facts, inside) == {ObjKind.WRAPPER}  # the model is a DDP wrapper in the arm
    assert inside.ctx.not_fsdp2  # and so no FSDP2 module
    assert made_by(facts, after) != {ObjKind.WRAPPER} and ObjKind.WRAPPER not in made_by(facts, after)
    assert not after.ctx.not_fsdp2


def test_a_state_dict_tensor_proved_plain_stays_plain_after_the_if():
    facts = facts_of(
        """
        from torch.distributed.tensor import DTensor
        def main(model):
            sd = model.state_dict()
            if isinstance(sd, DTensor):
                sd = sd.full_tensor()
            sd.clone()
        """
    )
    (trace,) = [trace for trace in facts.traces if trace.entry == "main"]
    (clone,) = [event for event in trace.events if event.kind is EventKind.METHOD and event.name == "clone"]
    assert any(getattr(option, "full", False) for option in options(clone.receiver))


FSDP2_TESTS = {  # ways to run code only when `model` is already an FSDP2 module
    "isinstance": "if isinstance(model, FSDPModule):",
    "a variable holding the test": "is_fsdp = isinstance(model, FSDPModule)\n    if is_fsdp:",
    "not of a negated test": "not_fsdp = not isinstance(model, FSDPModule)\n    if not not_fsdp:",
}


def shards_in(source: str, entry: str) -> list[str]:
    facts = facts_of("from torch.distributed.fsdp import FSDPModule\n" + textwrap.dedent(source))
    (trace,) = [trace for trace in facts.traces if trace.entry == entry]
    return [facts.code(shard.node) for shard in trace.shards]


@pytest.mark.parametrize("test", FSDP2_TESTS.values(), ids=FSDP2_TESTS.keys())
def test_a_shard_that_runs_only_on_an_fsdp2_module_needs_one_sharded_before(test):
    helper = f"def reshard(model):\n    {test}\n        fully_shard(model.emb)\n"
    never = helper + "def main():\n    model = Net()\n    reshard(model)\n"
    before = helper + "def main():\n    model = Net()\n    fully_shard(model)\n    reshard(model)\n"
    assert shards_in(never, "main") == []  # the model this run built was never sharded: the arm never runs
    assert shards_in(before, "main") == ["fully_shard(model)", "fully_shard(model.emb)"]
    assert shards_in(helper, "reshard") == ["fully_shard(model.emb)"]  # a caller's model may be sharded


def test_the_other_arm_of_an_fsdp2_test_and_a_mixed_type_test_keep_their_shards():
    other_arm = (
        "def main():\n    model = Net()\n    if not isinstance(model, FSDPModule):\n        fully_shard(model)\n"
    )
    either = "def main():\n    model = Net()\n    if isinstance(model, (FSDP, FSDPModule)):\n        fully_shard(model.emb)\n"
    assert shards_in(other_arm, "main") == ["fully_shard(model)"]
    assert shards_in("from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n" + either, "main") == [
        "fully_shard(model.emb)"
    ]


# --- one join for every construct -------------------------------------------------------------------

ASSIGNS_IN_AN_ARM = {  # lines of `main`'s body
    "if": ["if c:", "    a.m = Other()", "    v = Other()"],
    "while": ["while c:", "    a.m = Other()", "    v = Other()"],
    "conditional expression": ["a.other() if c else None"],
    "comprehension if": ["[a.other() for _ in xs if c]"],
}


def main_body(construct: str) -> str:
    return "\n            ".join(ASSIGNS_IN_AN_ARM[construct])


@pytest.mark.parametrize("construct", ASSIGNS_IN_AN_ARM)
def test_every_construct_joins_through_the_one_join(construct, monkeypatch):
    joined = []
    real_join = flow.join

    def spy(arms):
        merged = real_join(arms)
        joined.append(merged)
        return merged

    monkeypatch.setattr(flow, "join", spy)
    facts_of(
        f"""
        class A:
            def other(self):
                self.m = Other()
        def main(c, xs):
            a = A()
            a.m = fully_shard(Net())
            {main_body(construct)}
            a.m.forward(1)
        """
    )
    assert joined  # the variables and the heap of the arms went through flow.join


@pytest.mark.parametrize("construct", ["if", "while"])
def test_variables_and_heap_slots_join_alike(construct):
    facts = facts_of(
        f"""
        def main(c, x):
            a = Holder()
            a.m = v = fully_shard(Net())
            {main_body(construct)}
            a.m.forward(x)
            v.forward(x)
        """
    )
    slot, variable = calls_of(facts, "forward", "main")
    assert made_by(facts, slot) == made_by(facts, variable) == {SHARDED, OTHER}


@pytest.mark.parametrize(
    "predicate, root_included",
    [
        ("lambda m: isinstance(m, Block)", False),
        ("lambda m: not isinstance(m, Block)", True),  # like a comprehension `if`: the root is no Block
        ("lambda m: isinstance(m, nn.Module)", True),  # the root is a module too
        ("is_block", False),  # a predicate it cannot read: the root is left out
    ],
)
def test_filter_keeps_the_modules_its_predicates_true_arm_leaves(predicate, root_included):
    facts = facts_of(
        f"""
        import torch.nn as nn
        def main(model, x):
            for m in filter({predicate}, model.modules()):
                m.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    (module,) = options(call.receiver)
    assert (module.path[-2:-1] != (ANY,)) is root_included


def test_filter_over_a_submodules_walk_keeps_modules_under_that_submodule():
    facts = facts_of(
        """
        def main(model, x):
            for m in filter(is_block, model.encoder.modules()):
                m.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    (module,) = options(call.receiver)
    assert module.path[:2] == ("encoder", ANY)  # the encoder's modules, less the encoder itself


def test_the_rest_of_a_loop_body_runs_in_the_arm_that_falls_through_an_elif_chain_that_always_exits():
    facts = facts_of(
        """
        def main(model, batches):
            for b in batches:
                if b is None:
                    model = fully_shard(Net())
                elif len(b) == 0:
                    continue
                else:
                    continue
                model.forward(b)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    assert made_by(facts, call) == {SHARDED}


def test_an_early_return_inside_an_if_that_always_runs_guards_the_rest_of_the_function():
    facts = facts_of(
        """
        def main(model, x, rank):
            if True:
                if rank != 0:
                    return
            model.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    assert call.ctx.rank_guard  # rank 0 only


def test_a_write_in_a_conditional_expressions_arm_is_overwritten_by_a_later_store():
    """A conditional expression's arms always fall through: what they write is joined after the
    expression, and a later store replaces it (it does not come back at the end of the function)."""
    facts = facts_of(
        """
        class A:
            def attach(self):
                self.m = fully_shard(Net())
                return self.m
            def setup(self, c, x):
                y = self.attach() if c else None
                self.m = Other()
            def run(self, c, x):
                self.setup(c, x)
                self.m.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "A.run")
    assert made_by(facts, call) == {OTHER}


def test_a_continue_after_other_statements_on_the_line_still_skips_the_step():
    facts = facts_of(
        """
        def main(model, batches):
            for b in batches:
                if b is None:
                    log(b); continue
                model.forward(b)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    assert call.ctx.skipped  # the rest of the loop body runs only where the step was not skipped
    assert call.ctx.data_skips  # skipped where there was no data


def test_a_write_in_a_comprehensions_if_arm_is_overwritten_by_a_later_store():
    facts = facts_of(
        """
        class A:
            def attach(self):
                self.m = fully_shard(Net())
                return self.m
            def setup(self, cs):
                ms = [self.attach() for c in cs if c]
                self.m = Other()
            def run(self, cs, x):
                self.setup(cs)
                self.m.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "A.run")
    assert made_by(facts, call) == {OTHER}


def test_code_after_an_if_whose_arm_may_return_early_follows_only_the_paths_that_did_not():
    facts = facts_of(
        """
        def main(model, x, rank, a):
            if a:
                if rank != 0:
                    return
                y = 1
            else:
                y = 2
            model.forward(x)
        """
    )
    (call,) = calls_of(facts, "forward", "main")
    assert len(call.ctx.branches) == 1  # the arm of the inner `if` that falls through


def test_a_function_called_in_an_arm_reads_what_the_arm_bound():
    """An arm runs in its scope's own variables: a helper defined outside the branch reads a global
    the arm rebound, and after the branch the global is the join of the arms."""
    facts = facts_of(
        """
        model = Other()
        def step(x):
            return model.forward(x)
        if c:
            model = fully_shard(Net())
            step(1)
        step(2)
        """
    )
    in_arm, after = calls_of(facts, "forward", "<module>")
    assert made_by(facts, in_arm) == {SHARDED}
    assert made_by(facts, after) == {SHARDED, OTHER}


@pytest.mark.parametrize("test", ["state is None", "state is not None", "None is state"])
def test_a_none_test_on_a_value_that_is_never_none_runs_one_arm(test):
    """A caller passes a state dict: ``state is None`` is False in the callee, so only the arm for
    a given state dict runs (the other would take a sharded state dict and read it as sharded)."""
    facts = facts_of(
        f"""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        def convert(model, state=None):
            if {test}:
                {"model.load_state_dict(state)" if "not" in test else "model.own_path()"}
            else:
                {"model.own_path()" if "not" in test else "model.load_state_dict(state)"}
        model = fully_shard(Net())
        convert(model, get_model_state_dict(model))
        """
    )
    ran = {event.name for event in facts.traces[0].events if event.kind is EventKind.METHOD}
    assert ("load_state_dict" in ran, "own_path" in ran) == (True, False)


def test_a_none_test_on_an_unknown_value_runs_both_arms():
    facts = facts_of(
        """
        def convert(model, state=None):
            if state is None:
                model.own_path()
            else:
                model.load_state_dict(state)
        convert(fully_shard(Net()), load())
        """
    )
    ran = {event.name for event in facts.traces[0].events if event.kind is EventKind.METHOD}
    assert {"own_path", "load_state_dict"} <= ran


@pytest.mark.parametrize(
    ("test", "arms"),
    [
        ("not USE_FSDP2", {"else_arm"}),
        ("not USE_FSDP2 and ready", {"else_arm"}),
        ("USE_FSDP2 or ready", {"then_arm"}),
        ("USE_FSDP2 and ready", {"then_arm", "else_arm"}),  # `True and x` is `x`, unknown
        ("not USE_FSDP2 or ready", {"then_arm", "else_arm"}),  # `False or x` is `x`
    ],
)
def test_not_and_or_on_a_constant_flag_run_the_arms_python_runs(test, arms):
    """``USE_FSDP2 = True``: ``not USE_FSDP2`` is False, and ``and``/``or`` decide on a constant left
    side as Python does, so the FSDP1 arm of a flag set to FSDP2 never runs."""
    facts = facts_of(
        f"""
        USE_FSDP2 = True
        def step(model, ready):
            if {test}:
                model.then_arm()
            else:
                model.else_arm()
        step(fully_shard(Net()), load())
        """
    )
    ran = {event.name for event in facts.traces[0].events if event.kind is EventKind.METHOD}
    assert ran & {"then_arm", "else_arm"} == arms


# --- conditions whose truth is fixed: two `if`s on one setting ------------------------------------

CORRELATED = {
    "a name and its negation": ("tie = probe()\nif tie:\n    fully_shard(a)\nif not tie:\n    fully_shard(b)\n", True),
    "one side of an `and`": (
        "tie, big = probe(), probe()\nif tie and big:\n    fully_shard(a)\nif not tie:\n    fully_shard(b)\n",
        True,
    ),
    "both sides of an `or` fail": (
        "tie, big = probe(), probe()\nif tie or big:\n    pass\nelse:\n    fully_shard(a)\nif tie:\n    fully_shard(b)\n",
        True,
    ),
    "a parameter of the function": (
        "def shard(model, tie):\n    if tie:\n        fully_shard(a)\n    if not tie:\n        fully_shard(b)\n"
        "shard(m, probe())\n",
        True,
    ),
    "rebound between the tests": (
        "tie = probe()\nif tie:\n    fully_shard(a)\ntie = other()\nif not tie:\n    fully_shard(b)\n",
        False,
    ),
    "bound in a loop": (
        "for block in blocks:\n    big = probe(block)\n    if big:\n        fully_shard(a)\n    if not big:\n"
        "        fully_shard(b)\n",
        False,
    ),
    "an object whose truth a mutation changes": (
        "items = []\nif not items:\n    fully_shard(a)\nitems.append(1)\nif items:\n    fully_shard(b)\n",
        False,
    ),
    "an `or` in the true arm": (
        "tie, big = probe(), probe()\nif tie or big:\n    fully_shard(a)\nif not tie:\n    fully_shard(b)\n",
        False,
    ),
    "two names": ("tie, big = probe(), probe()\nif tie:\n    fully_shard(a)\nif not big:\n    fully_shard(b)\n", False),
}


@pytest.mark.parametrize("source, exclusive", CORRELATED.values(), ids=CORRELATED.keys())
def test_tests_of_one_fixed_condition_are_exclusive_and_nothing_else_is(source, exclusive):
    first, second = [event for trace in facts_of(source).traces for event in trace.shards][-2:]
    assert first.exclusive_with(second) is exclusive
    assert second.exclusive_with(first) is exclusive


@pytest.mark.parametrize("bound_before", [False, True], ids=["new", "rebound"])
def test_a_variable_given_different_values_in_the_two_arms_may_be_either_after_the_if(bound_before):
    facts = facts_of(
        f"""
        def main(c, x):
            {"m = Third()" if bound_before else "pass"}
            if c:
                m = fully_shard(Net())
            else:
                m = Other()
            m.forward(x)
        """
    )
    (after,) = calls_of(facts, "forward", "main")
    assert made_by(facts, after) == {SHARDED, OTHER}


# --- a setting compared with a constant reads as that constant where they are equal ---------------

SETTING_TESTS = {  # the body of main(cfg), one statement a line
    "attribute": ["if cfg.kind == 'full':", "    run(cfg)"],
    "early exit": ["if cfg.kind != 'full':", "    return", "run(cfg)"],
    "property": ["holder = Holder(cfg)", "if holder.full:", "    run(holder.cfg)"],
    "property through a local": ["holder = Holder(cfg)", "if holder.full_and_checked:", "    run(cfg)"],
}


@pytest.mark.parametrize("body", SETTING_TESTS.values(), ids=list(SETTING_TESTS))
def test_a_setting_proved_equal_to_a_constant_decides_a_later_test_of_it(body):
    lines = "\n            ".join(body)
    source = f"""
        class Holder:
            def __init__(self, cfg):
                self.cfg = cfg
            @property
            def full(self):
                return self.cfg is not None and self.cfg.kind == "full"
            @property
            def full_and_checked(self):
                ok = self.cfg.kind == "full"
                ok = ok and self.cfg.checked
                return ok
        def run(cfg):
            model = fully_shard(Net())
            if cfg.kind == "sharded":
                model.forward(1)
            model.forward(2)
        def main(cfg):
            {lines}
        """
    assert len(calls_of(facts_of(source), "forward", "main")) == 1  # forward(2) only


def test_a_setting_is_not_decided_where_nothing_proved_it():
    source = """
        def run(cfg):
            model = fully_shard(Net())
            if cfg.kind == "sharded":
                model.forward(1)
            model.forward(2)
        def check(cfg):
            if cfg.kind == "full":
                return True
            return False
        def main(cfg):
            check(cfg)
            run(cfg)
            if cfg.kind == "full" or cfg.strict:
                run(cfg)
            while cfg.kind == "full":
                run(cfg)
        """
    assert len(calls_of(facts_of(source), "forward", "main")) == 6
