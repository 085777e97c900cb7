"""The branch engine: ``if``/``elif``/``else`` statements, conditional expressions, ``while``
loops (the arm that runs the body and the arm that skips it) and comprehension ``if``s all run
through it; ``filter(...)`` over a module walk keeps what its predicate's true arm leaves.

Each arm (:func:`run_arm`) runs on its own copy of the variables and its own view of the heap
(:class:`~.state.Heap` logs the arm's writes and takes them back out), with what the test
establishes in that arm (an :class:`~.state.Arm` from :func:`.guards.arms`) applied to the
variables, the heap and the :class:`~fsdp2_lint.analysis.model.Context` (:func:`in_arm`).
Afterwards the arms are joined by one function for variables and heap slots alike
(:func:`join`: equal values are kept, different ones become a choice). An arm that always exits
leaves the rest of the block to the other arm (a :class:`~.state.Continuation`), and its heap
writes hold again where the exit leads (:func:`rejoin_escaped`). Objects mutated in place
(container items) stay shared between the arms: see :class:`~.state.Heap`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import libcst as cst

from fsdp2_lint.analysis.emptiness import exits_when_empty
from fsdp2_lint.analysis.interpreter import guards
from fsdp2_lint.analysis.interpreter.state import TERMINATED, Arm, Continuation, Env, Evaluator, Slot, joined
from fsdp2_lint.analysis.model import (
    ANY,
    ANY_DEPTH,
    UNKNOWN,
    Context,
    Lambda,
    Obj,
    Ref,
    Value,
    choice,
    const,
    is_any_depth,
    options,
)
from fsdp2_lint.analysis.syntax import statements

K = TypeVar("K")


@dataclass
class ArmRun:
    """The state one arm ended in."""

    arm: Arm
    env: Env  # its variables
    writes: dict[Slot, Value]  # the heap slots it wrote, with what they hold at its end
    done: bool  # it always exits
    exits: list[Continuation]  # the `if`s in it that exit early on some paths


# --- the engine ---------------------------------------------------------------------------------


def in_arm(ctx: Context, arm: Arm) -> Context:
    """The context of code that runs in ``arm``."""
    return ctx.with_(
        branches=ctx.branches + (arm.branch,),
        conditions=ctx.conditions + arm.conditions,
        rank_guard=arm.rank_guard or ctx.rank_guard,
        not_fsdp2=ctx.not_fsdp2 + arm.not_fsdp2,
        distinct=ctx.distinct + arm.distinct,
        fsdp2_tested=ctx.fsdp2_tested + arm.fsdp2_tested,
        dtensor_tested=ctx.dtensor_tested + arm.dtensor_tested,
        not_dtensor=ctx.not_dtensor + arm.not_dtensor,
        against_default=ctx.against_default or arm.against_default,
        skipped=ctx.skipped + arm.skipped if arm.skipped else ctx.skipped,
        data_skips=ctx.data_skips + arm.data_skips if arm.data_skips else ctx.data_skips,
        data_arms=ctx.data_arms + arm.data_arms if arm.data_arms else ctx.data_arms,
    )


def continued(ctx: Context, continuation: Continuation) -> Context:
    """The context of the statements after an ``if`` one arm of which always exits."""
    for arm in continuation.arms:
        ctx = in_arm(ctx, arm)
    return ctx


def run_arm(interp: Evaluator, arm: Arm, body: Callable[[list[Continuation]], bool]) -> ArmRun:
    """Run ``body`` (True when it always exits) in ``arm``, then put the variables, the heap and
    the context back as they were before it. The arm runs in the scope's own variables, so that a
    function defined outside the branch and called in it reads what the arm bound (a global
    rebound in an ``if`` at module level); what it bound is taken back out afterwards."""
    scope, outer = interp.frame.env, interp.ctx
    before = dict(scope.vars)
    scope.vars.update(arm.type_facts)
    scope.vars.update(arm.narrowing)
    outer_log = interp.heap.open_arm()
    interp.heap.update(arm.slots)
    interp.ctx = in_arm(outer, arm)
    exits: list[Continuation] = []
    try:
        done = body(exits)
    finally:
        writes = interp.heap.close_arm(outer_log)
        env = Env(scope.parent, dict(scope.vars))
        scope.vars.clear()
        scope.vars.update(before)
        interp.frame.env, interp.ctx = scope, outer
    if done:  # what it wrote holds where its exit leads; what its test said holds only inside it
        interp.frame.escaped.append({slot: value for slot, value in writes.items() if arm.slots.get(slot) is not value})
    return ArmRun(arm, env, writes, done, exits)


def join_arms(interp: Evaluator, runs: list[ArmRun]) -> None:
    """After a branch whose arms all fall through: what the tests said holds only inside each arm
    is undone, then every variable and every heap slot holds the :func:`join` of the arms."""
    base, heap = interp.frame.env, interp.heap
    for run in runs:
        _undo_narrowing(run, base)
    merged = join([run.env.vars for run in runs])
    base.vars.clear()
    base.vars.update(merged)
    if any(run.writes for run in runs):
        before = {slot: heap[slot] for run in runs for slot in run.writes if slot in heap}
        heap.update(join([{**before, **run.writes} for run in runs]))


def join(arms: list[Mapping[K, Value]]) -> dict[K, Value]:
    """The one join of the arms of a branch, for variables and heap slots alike: a key bound to
    equal values in every arm that binds it keeps the value; one bound to different values holds
    a choice of them (in arm order)."""
    merged: dict[K, Value] = {}
    for arm in reversed(arms):  # each key holds its value in the first arm that binds it
        merged.update(arm)
    differing = []
    for key, first in merged.items():
        for arm in arms:
            value = arm.get(key, first)
            if value is not first and value != first:
                differing.append(key)
                break
    for key in differing:
        merged[key] = choice([arm[key] for arm in arms if key in arm])
    return merged


def rejoin_escaped(interp: Evaluator, mark: int) -> None:
    """At the end of a function body, loop body or other block that early exits lead past: the
    heap writes of the arms that exited (since ``mark``) may hold here too."""
    escaped = interp.frame.escaped[mark:]
    if not escaped:
        return
    del interp.frame.escaped[mark:]
    heap = interp.heap
    here = {slot: heap[slot] for writes in escaped for slot in writes if slot in heap}
    heap.update(join([here, *escaped]))


def _undo_narrowing(run: ArmRun, base: Env) -> None:
    for name, value in run.arm.narrowing.items():
        if run.env.vars.get(name) is not value:
            continue  # reassigned in the arm
        if name in base.vars:
            run.env.vars[name] = base.vars[name]
        else:
            del run.env.vars[name]
    for slot, value in run.arm.slots.items():
        if run.writes.get(slot) is value:  # not assigned in the arm
            del run.writes[slot]


def _decided(interp: Evaluator, test: cst.BaseExpression, value: Value) -> bool | None:
    """The arm a constant test takes (``if algo == 1:`` with ``algo`` bound to 2, ``while True:``),
    unless a default decided it: the function is written for the callers that pass the argument
    too (``if path is not None: save(path)``)."""
    if isinstance(const(value), (bool, type(None))) and not guards.names_in(test) & interp.frame.defaulted:
        return bool(const(value))
    return None


# --- the constructs -----------------------------------------------------------------------------


def exec_if(interp: Evaluator, node: cst.If) -> object:
    before = interp.ctx
    interp.ctx = before.with_(
        if_nodes=before.if_nodes + (id(node),),
        dtensor_checks=before.dtensor_checks + guards.dtensor_checks(interp, node.test),
    )
    try:
        return _exec_if(interp, node)
    finally:
        interp.ctx = before


def _exec_if(interp: Evaluator, node: cst.If) -> object:
    test = evaluate_test(interp, node)
    taken = _decided(interp, node.test, test)
    if taken is not None:
        return exec_taken_arm(interp, node, taken)
    then_arm, else_arm = _data_arms(node, test, *guards.arms(interp, node, node.test, test))
    then = run_arm(interp, then_arm, lambda exits: interp.exec_block(statements(node.body), exits))
    other = run_arm(interp, else_arm, lambda exits: _exec_else(interp, node, exits))
    if then.done and other.done:
        return TERMINATED
    if then.done or other.done:  # the rest of the block runs in the other arm, as it left it
        live = other if then.done else then
        exit_block = node.body if then.done else node.orelse
        if _ends_in_skip(exit_block):
            data = _skips_a_step(interp, exit_block) and exits_when_empty(node.test, then.done)
            live.arm = replace(live.arm, skipped=(id(node),), data_skips=(node,) if data else ())
        elif isinstance(_last_statement(exit_block), cst.Raise):  # a rank without the data stops the job
            live.arm = replace(live.arm, data_arms=())
        interp.frame.env.vars.clear()
        interp.frame.env.vars.update(live.env.vars)
        interp.heap.update(live.writes)
        return Continuation((live.arm, *joined(live.exits).arms))
    join_arms(interp, [then, other])
    if then.exits or other.exits:  # the rest never follows the arms that exited in either branch
        return Continuation(tuple(arm.path_only() for arm in joined(then.exits + other.exits).arms))
    return None


def _data_arms(node: cst.If | cst.IfExp, test: Value, then_arm: Arm, else_arm: Arm) -> tuple[Arm, Arm]:
    """The arms, the one that runs only when a value is not None and not empty marked so (`data_arms`).
    A plain truth test (`if use_vision:`) is no data test here: settings are tested that way. Nor is
    a test whose value is known, though both arms run because a default decided it (`if
    inputs_embeds is None:` where this caller passes none): every rank's call is this one."""
    if isinstance(const(test), bool):
        return then_arm, else_arm
    if exits_when_empty(node.test, exit_on_true=False, truthiness=False):
        return replace(then_arm, data_arms=(node,)), else_arm
    if exits_when_empty(node.test, exit_on_true=True, truthiness=False):
        return then_arm, replace(else_arm, data_arms=(node,))
    return then_arm, else_arm


def evaluate_test(interp: Evaluator, node: cst.If | cst.IfExp) -> Value:
    """The value of the test, evaluated in a context that says which test it is."""
    outer = interp.ctx
    interp.ctx = outer.with_(testing=outer.testing + (id(node),))
    try:
        return interp.eval(node.test)
    finally:
        interp.ctx = outer


def _last_statement(block: object) -> cst.CSTNode | None:
    """The last simple statement of an arm (or its last compound one)."""
    if isinstance(block, cst.Else):
        block = block.body
    if not isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)) or not block.body:
        return None
    last = block.body[-1]
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        last = last.body[-1]
    return last


def _ends_in_skip(block: object) -> bool:
    """Does the arm end in a plain `continue`, `break` or `return` (no `raise`)?"""
    return isinstance(_last_statement(block), (cst.Continue, cst.Break, cst.Return))


def _skips_a_step(interp: Evaluator, block: object) -> bool:
    """Does the arm skip one step: a `continue`, or a `return` from a function with no loop of its
    own around the `if` (a per-step function)? A `break`, or a `return` out of the function's own
    loop, ends the loop: where all ranks' data end together that is no divergence."""
    last = _last_statement(block)
    if isinstance(last, cst.Continue):
        return True
    return isinstance(last, cst.Return) and len(interp.ctx.loops) <= interp.frame.entry_loops


def _exec_else(interp: Evaluator, node: cst.If, exits: list[Continuation]) -> bool:
    if isinstance(node.orelse, cst.If):  # `elif`
        outcome = exec_if(interp, node.orelse)
        exits.extend([outcome] if isinstance(outcome, Continuation) else [])
        return outcome is TERMINATED
    if node.orelse is not None:
        return interp.exec_block(statements(node.orelse.body), exits)
    return False


def exec_taken_arm(interp: Evaluator, node: cst.If, taken: bool) -> object:
    """An ``if`` whose test is a constant: only one arm runs, unconditionally."""
    if taken:
        body = statements(node.body)
    elif isinstance(node.orelse, cst.If):
        return exec_if(interp, node.orelse)
    elif node.orelse is not None:
        body = statements(node.orelse.body)
    else:
        return None
    exits: list[Continuation] = []
    if interp.exec_block(body, exits):
        return TERMINATED
    return joined(exits) if exits else None


def exec_while(interp: Evaluator, node: cst.While) -> None:
    """The body runs once, in the arm where the test holds (``while hasattr(model, "module"):
    model = model.module``), joined with the arm that skips it; then the ``else`` block."""
    test = interp.eval(node.test)
    taken = _decided(interp, node.test, test)
    if taken:
        interp.loop_body(node, node.body, None)
    elif taken is None:
        runs, skipped = guards.arms(interp, node, node.test, test)
        join_arms(
            interp,
            [
                run_arm(interp, runs, lambda exits: interp.loop_body(node, node.body, None) or False),
                run_arm(interp, skipped, lambda exits: False),
            ],
        )
    if node.orelse is not None:
        interp.exec_block(statements(node.orelse.body))


def eval_if_exp(interp: Evaluator, node: cst.IfExp) -> Value:
    """Like an ``if`` statement: each arm is a branch, run on the ranks its test selects."""
    before = interp.ctx
    interp.ctx = before.with_(if_nodes=before.if_nodes + (id(node),))
    try:
        return _eval_if_exp(interp, node)
    finally:
        interp.ctx = before


def _eval_if_exp(interp: Evaluator, node: cst.IfExp) -> Value:
    test = evaluate_test(interp, node)
    taken = _decided(interp, node.test, test)
    if taken is not None:  # `cfg.fsdp if cfg is not None else None` with `cfg` None: None
        return interp.eval(node.body if taken else node.orelse)
    results: list[Value] = []
    bodies = (node.body, node.orelse)
    runs = [
        run_arm(interp, arm, lambda exits, body=body: results.append(interp.eval(body)) or False)
        for arm, body in zip(_data_arms(node, test, *guards.arms(interp, node, node.test, test)), bodies, strict=True)
    ]
    join_arms(interp, runs)
    decided = const(test)
    if isinstance(decided, (bool, type(None))) and len(results) == 2:
        # A default decided the test: the other arm ran for callers that pass the argument, but
        # this call gets this arm's value (`self.sync if override is None else override`).
        return results[0 if decided else 1]
    return choice(results)


def comprehension_condition(interp: Evaluator, node: cst.CompIf, rest: Callable[[], Value]) -> Value:
    """``[... for x in xs if test ...]``: ``rest`` (the comprehension after the test, which returns
    its element) runs in the arm where ``test`` holds, joined with the arm that skips it."""
    runs, skipped = guards.arms(interp, node, node.test, interp.eval(node.test))
    elements: list[Value] = []
    join_arms(
        interp,
        [
            run_arm(interp, runs, lambda exits: elements.append(rest()) or False),
            run_arm(interp, skipped, lambda exits: False),
        ],
    )
    return elements[0]


def filtered_modules(interp: Evaluator, predicate: Value, modules: Value, node: cst.Call) -> Value:
    """``filter(lambda m: isinstance(m, Block), model.modules())``: the elements the predicate's
    true arm leaves (like a comprehension ``if``: the root of a module walk is left out unless the
    predicate is a type test its class passes). A predicate that is no lambda leaves out the root."""
    element = interp.element_of(modules, lazy=False)
    if isinstance(predicate, Lambda) and len(predicate.node.params.params) == 1:
        name = predicate.node.params.params[0].name.value
        outer, interp.frame.env = interp.frame.env, Env(predicate.closure, {name: element})  # type: ignore[arg-type]
        try:
            kept, _ = guards.arms(interp, predicate.node, predicate.node.body, UNKNOWN)
        finally:
            interp.frame.env = outer
        element = kept.narrowing.get(name, element)
    else:
        element = choice([_without_root(option) for option in options(element)])
    container = Obj.container([(None, element)], node)
    return Ref(container)


def _without_root(module: Value) -> Value:
    if isinstance(module, Ref) and module.path and is_any_depth(module.path[-1]):
        return Ref(module.root, module.path[:-1] + (ANY, ANY_DEPTH))
    return module
