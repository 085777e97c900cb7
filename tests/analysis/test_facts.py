"""The facts rules read: name resolution, sharded modules, event order, report positions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts, interpret
from fsdp2_lint.analysis.model import (
    Const,
    EventKind,
    GradTag,
    GuardRanks,
    IterKind,
    Loaded,
    ObjKind,
    Order,
    RankDep,
    RankKind,
    StateDict,
    Symbol,
    UniformKind,
    canonical,
    may_be_same,
    may_be_wrapper,
    report_node,
    walk_contents,
)


def facts_of(source: str) -> FileFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    return FileFacts("example.py", source.encode(), module, interpret(module, source.encode()).traces)


def qualified_calls(source: str) -> list[str]:
    return [event.qname for trace in facts_of(source).traces for event in trace.events if event.kind is EventKind.CALL]


@pytest.mark.parametrize(
    "source",
    [
        "from torch.distributed.fsdp import fully_shard\nfully_shard(m)",
        "from torch.distributed._composable.fsdp import fully_shard\nfully_shard(m)",
        "from torch.distributed._composable.fsdp.fully_shard import fully_shard\nfully_shard(m)",
        "import torch.distributed.fsdp as fsdp\nfsdp.fully_shard(m)",
        "import torch.distributed._composable.fsdp as fsdp2\nfsdp2.fully_shard(m)",
        "from torch.distributed.fsdp import fully_shard as shard\nshard(m)",
        "from torch.distributed.fsdp import fully_shard as FSDP\nFSDP(m)",
        "import torch\ntorch.distributed.fsdp.fully_shard(m)",
        "from torch.distributed import fsdp\nfsdp.fully_shard(m)",
        "from torch.distributed.fsdp import *\nfully_shard(m)",
        "def main():\n    from torch.distributed.fsdp import fully_shard\n    fully_shard(m)\nmain()",
    ],
)
def test_fully_shard_resolves_through_every_import_form(source):
    assert apis.FULLY_SHARD in qualified_calls(source)


@pytest.mark.parametrize(
    "source",
    [
        "from megatron_fsdp import fully_shard\nfully_shard(m)",
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nFSDP(m)",
        "from torch.distributed.fsdp import fully_shard\ndef fully_shard(m):\n    return m\nfully_shard(m)",
        "import torch.distributed.fsdp as fsdp\nfsdp = None\nfsdp.fully_shard(m)",
    ],
)
def test_other_fully_shards_do_not_resolve_to_fsdp2(source):
    assert apis.FULLY_SHARD not in qualified_calls(source)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from torch.optim import AdamW\nAdamW(p)", "torch.optim.AdamW"),
        ("import torch.optim as optim\noptim.SGD(p)", "torch.optim.SGD"),
        ("from torch.optim.adamw import AdamW\nAdamW(p)", "torch.optim.adamw.AdamW"),
        ("import bitsandbytes as bnb\nbnb.optim.AdamW8bit(p)", "bitsandbytes.optim.AdamW8bit"),
        ("from torch import save\nsave(x, f)", apis.TORCH_SAVE),
        ("import torch\ntorch.serialization.save(x, f)", apis.TORCH_SAVE),
        ("import torch.distributed.checkpoint as dcp\ndcp.save(x)", f"{apis.DCP}.save"),
        ("from torch.distributed.checkpoint.state_dict_saver import save\nsave(x)", f"{apis.DCP}.save"),
        (
            "from torch.distributed._composable.fsdp import register_fsdp_forward_method as reg\nreg(m, 'f')",
            apis.REGISTER_FORWARD_METHOD,
        ),
        (
            "from torch.distributed.checkpoint.state_dict import get_model_state_dict\nget_model_state_dict(m)",
            apis.GET_MODEL_STATE_DICT,
        ),
        ("from torch.nn.parallel.distributed import DistributedDataParallel\nDistributedDataParallel(m)", apis.DDP),
    ],
)
def test_api_names_are_canonical(source, expected):
    assert expected in qualified_calls(source)


@pytest.mark.parametrize(
    "qname, is_optimizer",
    [
        ("torch.optim.AdamW", True),
        ("torch.optim.adamw.AdamW", True),
        ("bitsandbytes.optim.AdamW8bit", True),
        ("apex.optimizers.FusedAdam", True),
        ("transformers.Adafactor", True),
        ("torch.optim.lr_scheduler.LambdaLR", False),
        ("torch.optim.swa_utils.AveragedModel", False),
        ("transformers.get_linear_schedule_with_warmup", False),
        ("torch.nn.Linear", False),
    ],
)
def test_optimizer_recognition(qname, is_optimizer):
    assert apis.is_optimizer(qname) is is_optimizer


def shard_targets(source: str) -> list[str]:
    facts = facts_of(source)
    return [canonical(target).text for trace in facts.traces for shard in trace.shards for target in shard.targets]


@pytest.mark.parametrize(
    "loop, expected",
    [
        ("for b in model.layers:\n    fully_shard(b)", ["model.layers[*]"]),
        ("for i, b in enumerate(model.layers):\n    fully_shard(b)", ["model.layers[*]"]),
        ("for b in reversed(model.layers):\n    fully_shard(b)", ["model.layers[*]"]),
        ("for name, b in model.layers.named_children():\n    fully_shard(b)", ["model.layers[*]"]),
        ("for key, b in model.layers.items():\n    fully_shard(b)", ["model.layers[*]"]),
        ("for b in model.layers.values():\n    fully_shard(b)", ["model.layers[*]"]),
        ("[fully_shard(b) for b in model.blocks]", ["model.blocks[*]"]),
        ("fully_shard(model.layers[0])", ["model.layers[0]"]),
        ("fully_shard(model.get_submodule('encoder.block'))", ["model.encoder.block"]),
        ("for m in model.modules():\n    fully_shard(m)", ["model.<submodule>"]),
        ("model = fully_shard(model)", ["model"]),
        ("fully_shard([model.emb, model.head])", ["model.emb", "model.head"]),
    ],
)
def test_sharded_module_paths(loop, expected):
    source = "from torch.distributed.fsdp import fully_shard\nmodel = Net()\n" + loop
    assert shard_targets(source) == expected


def test_attribute_store_makes_one_module_of_two_names():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                fully_shard(model)
                fully_shard(self.model.head)
        t = Trainer(Net())
        """
    )
    first, second = facts.traces[0].shards
    root, head = canonical(first.targets[0]), canonical(second.targets[0])
    assert root.text == "t.model" and head.text == "t.model.head"
    assert root.root is head.root


def test_loop_variable_names_the_same_element_across_statements():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block.attn)
            fully_shard(block)
        """
    )
    attn, block = (shard.targets[0] for shard in facts.traces[0].shards)
    assert attn.path[:2] == block.path and block.path[1].startswith("*")


def test_isinstance_filter_excludes_root_unless_its_class_matches():
    source = """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module): ...
        class Net(nn.Module): ...
        model = Net()
        for m in model.modules():
            if isinstance(m, {types}):
                fully_shard(m)
    """
    (excluded,) = shard_targets(source.format(types="Block"))
    (included,) = shard_targets(source.format(types="(Block, Net)"))
    assert excluded == "model[*].<submodule>"
    assert included == "model.<submodule>"


def test_events_are_in_execution_order_with_helpers_expanded():
    facts = facts_of(
        """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard(m):
            fully_shard(m)
        model = Net()
        opt = torch.optim.AdamW(model.parameters())
        shard(model)
        """
    )
    trace = facts.traces[0]
    (optimizer,) = trace.optimizers
    (shard,) = trace.shards
    assert optimizer.index < shard.index
    assert facts.code(report_node(optimizer, shard)).startswith("torch.optim.AdamW")
    assert facts.code(report_node(shard, optimizer)) == "shard(model)"
    assert facts.code(shard.node) == "fully_shard(m)"


def test_branches_are_exclusive_and_joined():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        if cond:
            fully_shard(a)
        else:
            fully_shard(b)
        fully_shard(c)
        """
    )
    first, second, third = facts.traces[0].shards
    assert first.exclusive_with(second)
    assert not first.exclusive_with(third) and not second.exclusive_with(third)


def test_uncalled_functions_are_entry_points_and_called_ones_are_not():
    facts = facts_of(
        """
        def helper(m):
            return m
        def main():
            helper(1)
        class Lit:
            def configure_model(self):
                pass
        """
    )
    assert [trace.entry for trace in facts.traces] == ["<module>", "main", "Lit.configure_model"]


def test_methods_see_modules_sharded_by_other_methods_of_their_class():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        class Lit:
            def configure_model(self):
                fully_shard(self.model)
            def save(self):
                return self.model
        """
    )
    save = next(trace for trace in facts.traces if trace.entry == "Lit.save")
    (assumed,) = save.assumed_sharded
    assert assumed.path == ("model",) and assumed.root is save.instance.root


@pytest.mark.parametrize(
    "condition, ranks",
    [
        ("dist.get_rank() == 0", RankKind.ZERO),
        ("rank == 0", RankKind.ZERO),
        ("self.rank != 0", RankKind.NONZERO),
        ("not local_rank", RankKind.ZERO),
        ("accelerator.is_main_process", RankKind.ZERO),
        ("int(os.environ['RANK']) == 0", RankKind.ZERO),
        ("os.environ.get('LOCAL_RANK') in (0, -1)", RankKind.ZERO),
        ("rank == 0 and step % 100 == 0", RankKind.ZERO_SUBSET),
        ("dist.get_rank() % 2 == 0", RankKind.MIXED),
        ("step % 100 == 0", None),
        ("not dist.is_initialized() or dist.get_rank() == 0", RankKind.ZERO),
        ("dist.is_initialized() and dist.get_rank() != 0", RankKind.NONZERO),
        ("dist.get_world_size() > 1 and rank == 0", RankKind.ZERO),
        ("int(os.environ['WORLD_SIZE']) == 1 or rank == 0", RankKind.ZERO),
        ("args.verbose or rank == 0", None),
        ("int(os.environ.get('RANK', -1)) != -1", None),
        ("is_dist_avail_and_initialized() and rank == 0", RankKind.ZERO),
        ("ddp and dist.get_rank() != 0", RankKind.NONZERO),
    ],
)
def test_rank_conditions(condition, ranks):
    facts = facts_of(f"import os\nimport torch.distributed as dist\nflag = {condition}\nprint(flag)")
    (event,) = [e for e in facts.traces[0].events if e.qname == "builtins.print"]
    value = event.args[0]
    assert (value.kind if isinstance(value, RankDep) else None) == ranks


def test_rank_guard_after_early_return():
    facts = facts_of(
        """
        import torch.distributed as dist
        def save():
            if dist.get_rank() != 0:
                return
            dist.barrier()
        """
    )
    (barrier,) = facts.traces[1].calls("torch.distributed.barrier")
    assert barrier.ctx.rank_guard is not None and barrier.ctx.rank_guard.ranks is GuardRanks.ZERO


def test_lazy_parameters_are_captured_when_consumed():
    facts = facts_of(
        """
        import torch
        lazy = model.parameters()
        eager = list(model.parameters())
        first = torch.optim.SGD(lazy)
        second = torch.optim.SGD(eager)
        """
    )
    first, second = facts.traces[0].optimizers
    (lazy_source,) = first.result.root.params.sources
    (eager_source,) = second.result.root.params.sources
    assert lazy_source.captured_at == first.index
    assert eager_source.captured_at < first.index
    assert may_be_same(lazy_source.ref, eager_source.ref)


def test_functions_whose_def_never_ran_keep_their_decorator_names():
    facts = facts_of(
        """
        import torch.distributed as dist
        def outer():
            return
            @rank_zero_only
            @functools.wraps(outer)
            def save():
                dist.barrier()
        """
    )
    (barrier,) = next(trace for trace in facts.traces if trace.entry == "save").calls("torch.distributed.barrier")
    assert barrier.ctx.rank_guard is not None and barrier.ctx.rank_guard.ranks is GuardRanks.ZERO


def test_wrapper_checks_narrow_the_model_inside_their_arm_only():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        if hasattr(model, "no_sync"):
            inside = model.no_sync()
        after = model.no_sync()
        """
    )
    inside, after = facts.traces[0].methods("no_sync")
    assert may_be_wrapper(inside.receiver) and not may_be_wrapper(after.receiver)
    assert facts.traces[0].sharded_overlap(after.receiver, after)


def test_partial_calls_its_function_with_the_bound_arguments():
    facts = facts_of(
        """
        import functools
        import torch
        make = functools.partial(torch.optim.SGD, lr=0.1)
        optimizer = make(model.parameters())
        """
    )
    (optimizer,) = facts.traces[0].optimizers
    assert optimizer.qname == "torch.optim.SGD" and optimizer.kwargs["lr"] == Const(0.1)
    assert optimizer.result.root.params is not None


def test_state_dict_values_keep_what_they_hold():
    facts = facts_of(
        """
        import torch
        copied = {k: v.cpu() for k, v in model.state_dict().items()}
        gathered = {k: v.full_tensor() for k, v in model.state_dict().items()}
        torch.save(copied, "a.pt")
        torch.save(gathered, "b.pt")
        """
    )
    saved = [save.args[0] for save in facts.traces[0].calls(apis.TORCH_SAVE)]
    states = [[v for v in walk_contents(value) if isinstance(v, StateDict)] for value in saved]
    assert [[state.full for state in found] for found in states] == [[False], [True]]


def test_a_forward_analysed_on_its_own_runs_inside_its_module():
    facts = facts_of(
        """
        import torch
        import torch.nn as nn
        class Net(nn.Module):
            def forward(self, x):
                return torch.relu(x)
        """
    )
    trace = next(trace for trace in facts.traces if trace.entry == "Net.forward")
    (relu,) = trace.calls("torch.relu")
    assert relu.ctx.forward_of == (trace.instance,)


def test_a_while_test_narrows_the_loop_body():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        while hasattr(model, "module"):
            model = model.module
        model.no_sync()
        """
    )
    (unwrap,) = facts.traces[0].methods("module", EventKind.ATTR)
    (no_sync,) = facts.traces[0].methods("no_sync")
    assert may_be_wrapper(unwrap.receiver) and not may_be_wrapper(no_sync.receiver)


def test_modules_given_to_torch_containers_become_their_children():
    facts = facts_of(
        """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        encoder, head = Encoder(), nn.Linear(4, 4)
        model = nn.Sequential(encoder, head)
        blocks = nn.ModuleList([Block() for _ in range(4)])
        fully_shard(encoder)
        fully_shard(head)
        fully_shard(blocks[0])
        """
    )
    assert [canonical(target).text for shard in facts.traces[0].shards for target in shard.targets] == [
        "model[0]",
        "model[1]",
        "blocks[0]",
    ]


def test_values_read_from_a_checkpoint_stay_loaded_through_copies():
    facts = facts_of(
        """
        import torch
        raw = torch.load("pretrained.pt", map_location="cpu")
        state = {k.replace("module.", ""): v.float() for k, v in raw.items()}
        model.load_state_dict(state)
        """
    )
    (load,) = facts.traces[0].methods("load_state_dict")
    assert any(isinstance(value, Loaded) for value in walk_contents(load.args[0]))


def test_attributes_set_before_an_object_is_stored_stay_readable_through_its_owner():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        class Checkpointer:
            def __init__(self, model):
                self.states = {"model": model}
            def save(self):
                fully_shard(self.states["model"])
        class Trainer:
            def __init__(self, model):
                self.checkpointer = Checkpointer(model)
        model = Net()
        trainer = Trainer(model)
        trainer.checkpointer.save()
        """
    )
    (shard,) = facts.traces[0].shards
    assert [(target.root.label, target.path) for target in shard.targets] == [("model", ())]  # the object itself


def test_unknown_keyword_mappings_may_pass_any_keyword():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        def shard(module, **options):
            fully_shard(module, **options)
        fully_shard(model, **{"mesh": mesh})
        fully_shard(model, **config.fsdp_kwargs)
        shard(model, **config.fsdp_kwargs)
        """
    )
    known, unknown, forwarded = facts.traces[0].shards
    assert known.may_pass("mesh") and not known.may_pass("reshard_after_forward")
    assert unknown.may_pass("reshard_after_forward") and forwarded.may_pass("reshard_after_forward")


def test_modules_kept_in_a_dict_attribute_are_named_from_their_owner():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def __init__(self):
                self.models = {"ref": Net()}
            def _build(self, role):
                module = Net()
                fully_shard(module)
                self.models[role] = module
            def init_model(self):
                self._build("actor")
            def step(self):
                return self.models["actor"], self.models["ref"]
        """
    )
    init, step = (next(t for t in facts.traces if t.entry == f"Worker.{name}") for name in ("init_model", "step"))
    (shard,) = init.shards
    assert canonical(shard.targets[0]).text == "self.models['actor']"
    (returned,) = step.of_kind(EventKind.RETURN)
    actor, ref = (canonical(part).text for part in returned.result.items)
    assert (actor, ref) == ("self.models['actor']", "self.models['ref']")
    assert step.is_fsdp_module(returned.result.items[0], returned)
    assert not step.is_fsdp_module(returned.result.items[1], returned)


def test_objects_created_in_a_call_are_named_by_the_parameter_they_bind():
    facts = facts_of(
        """
        from torch.distributed.fsdp import fully_shard
        def main(model):
            fully_shard(model)
        main(Net())
        """
    )
    (shard,) = facts.traces[0].shards
    assert canonical(shard.targets[0]).text == "model"


@pytest.mark.parametrize(
    "kinds", [ObjKind, EventKind, RankKind, GuardRanks, UniformKind, IterKind, Order, GradTag], ids=lambda k: k.__name__
)
def test_kinds_are_plain_enums_that_no_string_equals(kinds):
    """A kind compared with a string it used to be is never equal: a leftover comparison fails."""
    assert not issubclass(kinds, str)
    assert list(kinds) and all(kind != kind.value and kind.value not in {kind} for kind in kinds)


def _method_events(source: str, name: str):
    return [e for trace in facts_of(source).traces for e in trace.events if e.name == name]


def test_an_assertion_is_recorded_where_it_is_written_not_in_the_helpers_it_calls():
    source = """
def helper(model):
    return model.grad_norm()

assert model.grad_norm() < 1
self.assertLess(model.grad_norm(), 1)
torch.testing.assert_close(helper(model), 1)
print(model.grad_norm())
"""
    events = _method_events(source, "grad_norm")
    assert [event.ctx.asserted for event in events] == [True, True, False, False]


def test_dtensor_checks_are_the_checked_expressions_of_the_enclosing_if_tests():
    source = """
def gather(x):
    return x.full_tensor()

if isinstance(state.value, DTensor) and ready:
    if flag:
        state.value.full_tensor()
    gather(state.value)
state.value.full_tensor()
"""
    events = _method_events(source, "full_tensor")
    assert [event.ctx.dtensor_checks for event in events] == [("state.value",), (), ()]


def test_a_check_in_a_test_and_an_access_under_it_share_the_if():
    source = """
def unwrap(m):
    return m.module if hasattr(m, "module") else m

def is_wrapped(m):
    return hasattr(m, "module")

if is_wrapped(model):
    inner = model.module
other = model.module
"""
    module, unwrap = (trace.events for trace in facts_of(source).traces if trace.entry in ("<module>", "unwrap"))
    (check, *_), (inner, other) = _checks_and_accesses(module)
    assert set(check.ctx.testing) & set(inner.ctx.if_nodes)  # `if is_wrapped(model): model.module`
    assert not set(check.ctx.testing) & set(other.ctx.if_nodes)  # after the `if`
    (check,), (access,) = _checks_and_accesses(unwrap)
    assert set(check.ctx.testing) & set(access.ctx.if_nodes)  # `m.module if hasattr(m, "module") else m`


def _checks_and_accesses(events):
    checks = [e for e in events if e.qname == "builtins.hasattr"]
    return checks, [e for e in events if e.name == "module" and e.kind is EventKind.ATTR]


@pytest.mark.parametrize(
    "merge",
    [
        'checkpoint = {}\ncheckpoint.update({"model": model.state_dict(), "seed": 0})',
        "checkpoint = {}\ncheckpoint.update(model=model.state_dict(), seed=0)",
        'checkpoint = {**{"model": model.state_dict(), "seed": 0}}',
        'checkpoint = {}\ncheckpoint |= {"model": model.state_dict(), "seed": 0}',
        'checkpoint = {} | {"model": model.state_dict(), "seed": 0}',
        "checkpoint = dict(**config, model=model.state_dict())",
        'checkpoint = dict({"model": model.state_dict()}, seed=0)',
    ],
)
def test_a_merged_dict_keeps_each_value_under_its_key(merge):
    """Reading one key of a dict merged from another finds what was merged under that key: a seed
    read back from a checkpoint dict is no state dict (torchtune's recipe state)."""
    facts = facts_of(
        f'import torch\n{merge}\ntorch.save(checkpoint["seed"], "seed.pt")\ntorch.save(checkpoint["model"], "model.pt")\n'
    )
    saved = [save.args[0] for save in facts.traces[0].calls(apis.TORCH_SAVE)]
    holds_state_dict = [any(isinstance(v, StateDict) for v in walk_contents(value)) for value in saved]
    assert holds_state_dict == [False, True]


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        ('ShardingStrategy["SHARD_GRAD_OP"]', "ShardingStrategy.SHARD_GRAD_OP"),
        ("ShardingStrategy.SHARD_GRAD_OP", "ShardingStrategy.SHARD_GRAD_OP"),
        ("ShardingStrategy[args.strategy]", "ShardingStrategy.*"),
        ("getattr(ShardingStrategy, args.strategy)", "ShardingStrategy.*"),
        ("api.StateDictType[name.upper()]", "StateDictType.*"),
    ],
)
def test_an_fsdp1_enum_indexed_by_name_is_that_member_or_some_member(member, expected):
    """``ShardingStrategy[name]`` is the member ``name`` names; a name read at run time gives
    some member (``*``), as ``getattr`` on a module does."""
    facts = facts_of(
        "from torch.distributed.fsdp import ShardingStrategy, api, fully_shard\n"
        f"fully_shard(model, reshard_after_forward={member})\n"
    )
    (shard,) = facts.traces[0].shards
    assert shard.kwargs["reshard_after_forward"] == Symbol(f"{apis.FSDP}.{expected}")


@pytest.mark.parametrize(
    "declaration",
    [
        "field(default_factory=lambda: MixedPrecision(param_dtype=torch.bfloat16))",
        "dataclasses.field(default_factory=make_policy)",
        "field(default_factory=MixedPrecision)",
        "field(default=MixedPrecision(param_dtype=torch.bfloat16))",
    ],
)
def test_a_dataclass_field_left_to_its_default_holds_what_field_declares(declaration):
    """A field the constructor is not given holds ``field(default=v)``'s ``v``, or what its
    ``default_factory`` returns: a new object for each instance, as Python makes it."""
    facts = facts_of(
        f"""
        import dataclasses
        from dataclasses import dataclass, field
        import torch
        from torch.distributed.fsdp import MixedPrecision, fully_shard
        def make_policy():
            return MixedPrecision(param_dtype=torch.bfloat16)
        @dataclass
        class Config:
            mp: MixedPrecision = {declaration}
        first, second = Config(), Config()
        fully_shard(model, mp_policy=first.mp)
        fully_shard(model, mp_policy=second.mp)
        """
    )
    policies = [shard.kwargs["mp_policy"] for shard in facts.traces[0].shards]
    assert [policy.root.qname for policy in policies] == [f"{apis.FSDP}.MixedPrecision"] * 2
    assert (policies[0].root is policies[1].root) == declaration.startswith("field(default=")
