"""Function summaries (issue 14): a call of a same-file function is expanded once per distinct
input and replayed after that, recording the events a fresh expansion would record, within the
bound that :mod:`fsdp2_lint.analysis.interpreter.summaries` documents."""

from __future__ import annotations

import dataclasses
import textwrap

import libcst as cst
import pytest
from fixture_marks import FIXTURES
from samples import CLUSTERS, HELPERS

from fsdp2_lint.analysis.interpreter import calls, core, summaries
from fsdp2_lint.analysis.interpreter.state import Env
from fsdp2_lint.analysis.model import Context, Event, EventKind, FunctionInfo, Obj, Params, Value
from fsdp2_lint.engine import lint_source


def interpreted(source: str, module: cst.Module | None = None) -> tuple[core.Interpreter, list]:
    interpreter = core.Interpreter(module or cst.parse_module(source), source.encode())
    return interpreter, interpreter.run()


@pytest.mark.parametrize("kind", CLUSTERS)
def test_mutually_calling_helpers_are_expanded_once_per_input_and_replayed(kind):
    """Each helper is expanded once per call depth it is first reached at (the key holds the
    depth), every other call replays a summary: expansions grow linearly with the helpers."""
    make_cluster, call = CLUSTERS[kind]
    for count in (HELPERS, 2 * HELPERS, 4 * HELPERS):
        interpreter, _ = interpreted(f"{make_cluster(count)}{call}\n")
        bound = interpreter.summaries
        assert bound.hits > 100
        assert max(bound.expansions.values()) <= summaries.MAX_EXPANSIONS_PER_FUNCTION
        assert sum(bound.expansions.values()) <= (calls.MAX_CALL_DEPTH + 2) * count
        assert bound.replayed <= summaries.MAX_REPLAYED


# --- a replay records what a fresh expansion would --------------------------------------------


def canonical(runs: list) -> list:
    """The runs' events with objects numbered in order of appearance: two analyses of one module
    give equal results exactly when they record the same events about the same objects."""
    numbers: dict[int, int] = {}
    keep: list[object] = []  # the numbered objects stay alive, so their ids stay theirs

    def number(obj: object) -> int:
        keep.append(obj)
        return numbers.setdefault(id(obj), len(numbers))

    def form(value: object) -> object:
        if isinstance(value, Obj):
            return ("obj", number(value), value.kind, value.label, value.qname)
        if isinstance(value, Env):
            return ("env", number(value))
        if isinstance(value, FunctionInfo):
            return ("function", id(value.node))
        if isinstance(value, cst.CSTNode):
            return ("node", id(value))
        if isinstance(value, Params):
            return ("params", sorted(map(repr, (form(source) for source in value.sources))), value.named)
        if isinstance(value, (Value, Context)) or dataclasses.is_dataclass(value):
            fields = dataclasses.fields(value) if dataclasses.is_dataclass(value) else ()
            return (type(value).__name__, *(form(getattr(value, field.name)) for field in fields))
        if isinstance(value, (tuple, list, frozenset)):
            return tuple(form(item) for item in value)
        if isinstance(value, dict):
            return tuple((key, form(item)) for key, item in value.items())
        return value

    def event(e: Event) -> tuple:
        fields = (e.index, e.kind, e.node, e.stack, e.ctx, e.name, e.qname, e.receiver, e.args, e.kwargs, e.result)
        return tuple(form(field) for field in fields)

    return [(run.entry, [event(e) for e in run.events], form(run.instance)) for run in runs]


def with_and_without_summaries(source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[core.Interpreter, list, list]:
    """The interpreter and runs of ``source``, and its runs when every call is expanded afresh
    (of the same syntax tree: events name its nodes)."""
    module = cst.parse_module(source)
    interpreter, runs = interpreted(source, module)
    with monkeypatch.context() as patch:
        patch.setattr(summaries, "key", lambda *args: None)
        return interpreter, runs, interpreted(source, module)[1]


TWICE = textwrap.dedent(
    """\
    import torch
    from torch.distributed.fsdp import fully_shard


    def shard(model):
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)


    def parameters_of(model):
        return list(model.parameters())


    def main():
        model = Net()
        early = parameters_of(model)
        shard(model)
        shard(model)
        late = parameters_of(model)
        torch.optim.AdamW(early).step()
        torch.optim.AdamW(late).step()


    main()
    """
)


def test_a_replay_records_the_events_of_a_fresh_expansion_at_the_new_call_site(monkeypatch):
    """The second ``shard(model)`` is replayed: its events carry the second call site in their
    stack, indexes after the first call's, and a loop of their own; ``parameters_of`` captures
    the parameters at its own call."""
    interpreter, runs, fresh = with_and_without_summaries(TWICE, monkeypatch)
    assert interpreter.summaries.hits == 2
    assert canonical(runs) == canonical(fresh)
    shards = [event for event in runs[0].events if event.qname == "torch.distributed.fsdp.fully_shard"]
    assert len(shards) == 4
    assert shards[0].stack != shards[2].stack and shards[0].node is shards[2].node
    assert shards[0].args[0].path != shards[2].args[0].path  # each loop over the blocks is a loop of its own


def test_a_replay_gives_the_diagnostics_of_a_fresh_expansion(monkeypatch):
    found = lint_source(TWICE.encode(), "train.py")
    with monkeypatch.context() as patch:
        patch.setattr(summaries, "key", lambda *args: None)
        expected = lint_source(TWICE.encode(), "train.py")
    assert [(d.code, d.line, d.message) for d in found] == [(d.code, d.line, d.message) for d in expected]
    # the second `shard(model)` passes again over a tree it sharded bottom-up (no top-down order,
    # so no FSDP002, but the root is sharded twice: FSDP031 at that call); the first capture of the
    # parameters, before sharding, is reported, the one after sharding is not
    assert [(d.code, d.line) for d in found] == [("FSDP031", 19), ("FSDP001", 21)]


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.glob("FSDP*/*.py")), ids=lambda path: f"{path.parent.name}/{path.name}"
)
def test_summaries_record_what_fresh_expansions_record_on_the_fixtures(path, monkeypatch):
    _, runs, fresh = with_and_without_summaries(path.read_text(), monkeypatch)
    assert canonical(runs) == canonical(fresh)


# --- calls that are expanded each time --------------------------------------------------------

STORES = textwrap.dedent(
    """\
    def attach(holder, module):
        holder.model = module


    attach(holder, first)
    attach(holder, first)
    """
)

CREATES = textwrap.dedent(
    """\
    def make():
        return Net()


    a = make()
    b = make()
    """
)


@pytest.mark.parametrize("source", [STORES, CREATES], ids=["writes-shared-state", "creates-objects"])
def test_calls_whose_effect_is_not_in_their_events_are_expanded_each_time(source):
    interpreter, _ = interpreted(source)
    assert interpreter.summaries.hits == 0
    assert list(interpreter.summaries.expansions.values()) == [2]


def test_each_call_of_a_creating_helper_creates_its_own_object():
    _, runs = interpreted(CREATES)
    made = [event.result for event in runs[0].events if event.kind is EventKind.INVOKE]  # `Net()`: Net is unbound
    assert [ref.root.label for ref in made] == ["a", "b"]


def test_a_summary_is_not_replayed_once_what_it_read_has_changed():
    source = textwrap.dedent(
        """\
        from torch.distributed.fsdp import fully_shard


        def shard(holder):
            fully_shard(holder.model)


        holder.model = first
        shard(holder)
        shard(holder)
        holder.model = second
        shard(holder)
        """
    )
    interpreter, runs = interpreted(source)
    assert interpreter.summaries.hits == 1
    sharded = [event.args[0].root.label for event in runs[0].events if event.qname and event.name == "fully_shard"]
    assert sharded == ["first", "first", "second"]


def test_a_replay_that_records_nothing_inside_a_summarised_call(monkeypatch):
    source = textwrap.dedent(
        """\
        from torch.distributed.fsdp import fully_shard


        def check(model):
            pass


        def shard(model):
            check(model)
            check(model)
            fully_shard(model)


        shard(model)
        shard(model)
        """
    )
    interpreter, runs, fresh = with_and_without_summaries(source, monkeypatch)
    assert interpreter.summaries.hits == 2  # the second `check`, the second `shard`
    assert canonical(runs) == canonical(fresh)


GLOBAL_REBOUND_IN_AN_ARM = textwrap.dedent(
    """\
    from torch.distributed.fsdp import fully_shard

    model = Net()


    def step(x):
        return model.forward(x)


    if distributed:
        step(1)
        model = fully_shard(Net())
        step(1)
    """
)


def test_a_global_rebound_inside_an_arm_is_seen_by_the_next_call(monkeypatch):
    """An arm's variables are a copy of the module's; a write there still changes what a summary
    keyed before it may read, so the second ``step(1)`` is expanded again and sees the sharded model."""
    interpreter, runs, fresh = with_and_without_summaries(GLOBAL_REBOUND_IN_AN_ARM, monkeypatch)
    assert interpreter.summaries.hits == 0
    assert canonical(runs) == canonical(fresh)
    assert [(d.code, d.line) for d in lint_source(GLOBAL_REBOUND_IN_AN_ARM.encode(), "train.py")] == [("FSDP003", 7)]


# --- accessors are not counted against the bound ----------------------------------------------


@pytest.mark.parametrize(
    ("body", "accessor"),
    [
        ("return self._a if self._a is not None else self._b", True),
        ('"""The configuration."""\n    return self._config', True),
        ("return self.x.y[0] + 1", True),
        ("return self.build()", False),  # a call runs code of its own
        ("return [m for m in self.modules]", False),
        ("return lambda: self._a", False),
        ("x = self._a\n    return x", False),
        ("return", False),
        ("pass", False),
    ],
)
def test_an_accessor_is_one_return_of_an_expression_that_calls_nothing(body, accessor):
    function = cst.parse_module(f"def config(self):\n    {body}\n").body[0]
    assert FunctionInfo(function, None).is_accessor is accessor

