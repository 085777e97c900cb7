from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Choice,
    Event,
    Order,
    Ref,
    canonical,
    is_any_depth,
    may_be_same,
    report_node,
    strict_ancestor,
)
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature


class TopDownSharding(Rule):
    code = "FSDP002"
    name = "top-down-sharding"
    summary = "`fully_shard` on a submodule after its ancestor was sharded: FSDP2 must be applied bottom-up"
    hint = "shard the submodules first (e.g. every transformer block), then the root"
    failure = "`TypeError: Invariant encountered` / `RuntimeError: Cannot concatenate overlapping meshes` at the second `fully_shard`"
    fix_offer = FixOffer(
        summary=(
            "moves the ancestor's `fully_shard` after the statement that shards its submodules (same "
            "block; `model = fully_shard(model)` may be moved)"
        ),
        applicabilities=(Applicability.UNSAFE,),
        safety=(
            "the ancestor's `fully_shard` moves past the statements that shard its submodules: check that"
            " the code in between does not need the ancestor sharded."
        ),
    )
    docs = """
## What it does
Flags a `fully_shard` call on a module whose ancestor was already passed to `fully_shard`:
the root sharded before its blocks, a helper that shards the blocks called after the root,
or `for m in model.modules(): fully_shard(m)`, which visits the root first.

## Why is this bad?
Sharding the root turns every parameter below it into an FSDP DTensor. The later call on a
submodule then takes the tensor-parallel path and fails at that `fully_shard` call, before any
forward: `TypeError: Invariant encountered: value was None when it should not be` for a mesh
without dimension names, `RuntimeError: Cannot concatenate overlapping meshes` for a named one.

A type filter in a `modules()` loop (`isinstance(m, T)`, `type(m) in WRAP`,
`type(m).__name__ not in NAMES: continue`, `m.__class__.__name__ in NAMES`) is a bug only when it
lets the root through together with something below it: the types or names list the root's
class (or a base of it, such as `nn.Module`) and another class. A filter that lists only block
classes is bottom-up enough (blocks do not contain each other), and so is one that lists only
the root's class. A list filled with `append` in that loop holds the modules in the same order:
`reversed(...)`, `.reverse()` and `[::-1]` make it bottom-up.

## Known problems
- The root's class must be visible: a class constructed in the project, a parameter's annotation
  (`model: Model`), an imported class called or its `from_pretrained`. For a model from a factory
  (`AutoModelForCausalLM.from_pretrained`, `build_model(cfg)`) or an unannotated parameter, a filter
  that names classes is assumed to leave the root out, so a filter that does list the root's
  class is missed there.
- An annotation is taken for the exact class: `model: Model` filtered by `type(m) in (Block, Model)`
  is reported, though a subclass of `Model` passed in would not pass the filter.
- Class names read from configuration or from the model (`model._no_split_modules`,
  `cfg.wrap_classes`) are unknown, and treated like block names.
- A filter listing the root's class and a class the model does not contain is reported; whether a
  class occurs below the root is not checked.
- A test on the module that is not a type test (`if m.weight is not None`) is taken to leave the
  root out. A test on the name `named_modules()` yields with it (`if name.startswith("layers.")`)
  does not filter the module: the loop is reported though the names leave the root out.
- A test that is a type test only in part (`if m is model or not isinstance(m, Block): continue`)
  is read as a whole: its `or` is not split into what each operand decides, and the code after
  it is taken to see the root.
- `isinstance` of an imported base class (`PreTrainedModel`) is not known to admit the root: the
  bases of classes outside the project are not read.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
""",
        """
from torch.distributed.fsdp import fully_shard

for module in reversed(list(model.modules())):
    if isinstance(module, Block):
        fully_shard(module)
""",
        """
from torch.distributed.fsdp import fully_shard

def shard_bottom_up(model):  # called once per trainer a script builds on the same model
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)

shard_bottom_up(model)
shard_bottom_up(model)  # a second pass over the whole tree: its order is bottom-up again
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model)
for block in model.layers:
    fully_shard(block)  # expect: FSDP002
""",
        """
import torch.distributed.fsdp as fsdp

for module in model.modules():
    fsdp.fully_shard(module)  # expect: FSDP002
""",
        """
from torch.distributed.fsdp import fully_shard

root_or_encoder = model if shard_whole else model.encoder
fully_shard(root_or_encoder)  # on one path the root, sharded before its encoder
fully_shard(model.encoder)  # expect: FSDP002
""",
    )
    signature = RuntimeSignature(
        evidence="exception",
        exception=("TypeError", "RuntimeError"),
        message=r"Invariant encountered|Cannot concatenate overlapping meshes",
        min_ranks=2,  # with one rank, the second `fully_shard` on a named mesh passes and the model fails later
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            shards = trace.shards
            for position, late in enumerate(shards):
                for early_position, early in enumerate(shards[:position]):
                    same_call = [early] if early.node is late.node else []  # one call, a joined module
                    if early.exclusive_with(late) or _sharded_before(late, shards[:early_position] + same_call):
                        continue  # late's module may be sharded already: a second pass, no top-down order
                    ancestor = _ancestor_of_any(early.targets, late.targets)
                    if ancestor is not None:
                        reported, earlier = report_node(late, early), report_node(early, late)
                        yield Finding(
                            reported,
                            f"`fully_shard` on a submodule of `{ancestor}`, which was already sharded "
                            f"at {facts.where(earlier, reported)}: shard submodules before their ancestors",
                            fix=_shard_ancestor_last(facts, early, late),
                            related=((earlier, f"`{ancestor}` is sharded here"),),
                        )
                        break
                else:
                    why = _top_down_within(late)
                    if why:
                        yield Finding(late.node, why)


def _shard_ancestor_last(facts: FileFacts, early: Event, late: Event) -> Rewrite | None:
    """Move the statement that shards the ancestor to just after the one that shards its
    descendants, when both are in one block and nothing in between uses what the moved statement
    binds (`model = fully_shard(model)` binds the same module again, which does not count).
    Unsafe: the statements in between now run before the ancestor is sharded."""
    move = builders.move_after(facts, report_node(early, late), report_node(late, early))
    if move is None:
        return None
    rebound = _rebound_to_itself(move.statement, early.node)
    if (builders.bound_names(move.statement) - rebound) & builders.mentioned_names(move.passed):
        return None
    return Rewrite(
        "shard bottom-up: move the ancestor's `fully_shard` after its submodules' (check the code in between "
        "does not need the ancestor sharded)",
        move.replacements,
        applicability=Applicability.UNSAFE,
    )


def _rebound_to_itself(statement: cst.BaseStatement, shard: cst.CSTNode) -> set[str]:
    """``x = fully_shard(x, ...)``: ``fully_shard`` returns the module it was given."""
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or small.value is not shard:
        return set()
    target, args = small.targets[0].target, shard.args  # type: ignore[attr-defined]
    if args and args[0].keyword is None and builders.code_of(args[0].value) == builders.code_of(target):
        return {builders.code_of(target)}
    return set()


def _sharded_before(late: Event, shards: list[Event]) -> bool:
    """May a module ``late`` shards be sharded already by one of ``shards`` (on the same path)? A
    second pass over a tree sharded bottom-up, or an earlier run of the same call whose module may be
    this one (a recursive helper's parameter joined over the tree), is no top-down order."""
    return any(
        not shard.exclusive_with(late) and may_be_same(canonical(target), canonical(again))
        for shard in shards
        for target in shard.targets
        for again in late.targets
    )


def _ancestor_of_any(earlier: tuple, later: tuple) -> str | None:
    for outer in earlier:
        for inner in later:
            if strict_ancestor(outer, inner):
                return canonical(outer).text
    return None


def _top_down_within(event: Event) -> str | None:
    """One call that shards an ancestor before its descendants by itself: a loop over
    ``modules()`` (root first), or a loop over a literal list that lists the root first."""
    for target in event.targets:
        if target.path and is_any_depth(target.path[-1]) and target.order is Order.PRE:
            return (
                f"`{canonical(Ref(target.root, target.path[:-1])).text}.modules()` yields the root first, so the "
                "root is sharded before its submodules; iterate `reversed(list(...modules()))` or filter by type"
            )
    modules = event.arg(0, "module")
    if isinstance(modules, Choice) and modules.sequential:
        targets = event.targets
        for index, outer in enumerate(targets):
            if any(strict_ancestor(outer, inner) for inner in targets[index + 1 :]):
                return f"`{canonical(outer).text}` is sharded before its own submodules in this loop"
    return None
