"""Branches: ``if`` statements, ``while`` loops, conditional expressions, comprehension ``if``s and
``filter(...)`` over a module walk. Each arm runs on its own copy of the variables, with what the
test establishes in that arm (:mod:`.guards`) and in that arm's context (its branch, its ranks),
and the arms are joined afterwards; an arm that always exits leaves the rest of the block to the
other arm (a :class:`~.state.Continuation`).
"""

from __future__ import annotations

import libcst as cst

from fsdp2_lint.analysis.interpreter import guards
from fsdp2_lint.analysis.interpreter.state import (
    TERMINATED,
    Continuation,
    Env,
    Evaluator,
    joined,
    narrow_slots,
    restore_slots,
)
from fsdp2_lint.analysis.model import ANY, ANY_DEPTH, Lambda, Obj, Ref, Value, choice, const, is_any_depth, options
from fsdp2_lint.analysis.syntax import statements


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
    # A constant test decides the arm, unless a default decided it: the function is written
    # for the callers that pass the argument too (`if path is not None: save(path)`).
    if isinstance(const(test), (bool, type(None))) and not guards.names_in(node.test) & interp.frame.defaulted:
        return exec_taken_arm(interp, node, bool(const(test)))
    then_guard, else_guard = guards.rank_guards(node, guards.rank_kind(test), len(interp.frame.stack))
    then_narrowing, else_narrowing = guards.narrowing(interp, node.test)
    type_facts = guards.tensor_narrowing(interp, node.test)
    arm_slots = guards.slot_narrowing(interp, node.test)
    not_fsdp2 = guards.proved_not_fsdp2(interp, node.test)
    dtensor_tested = guards.dtensor_tested(interp, node.test)
    base, outer = interp.frame.env, interp.ctx
    arms: list[tuple[Env, bool, list[Continuation]]] = []
    for arm, (guard, narrowing) in enumerate(((then_guard, then_narrowing), (else_guard, else_narrowing))):
        exits: list[Continuation] = []
        interp.frame.env = base.branch()
        interp.frame.env.vars.update(type_facts[arm])  # still true after the `if`: never undone
        interp.frame.env.vars.update(narrowing)
        saved = narrow_slots(interp.heap, arm_slots[arm])
        interp.ctx = outer.with_(
            branches=outer.branches + ((id(node), arm),),
            rank_guard=guard or outer.rank_guard,
            not_fsdp2=outer.not_fsdp2 + not_fsdp2[arm],
            dtensor_tested=outer.dtensor_tested + dtensor_tested[arm],
        )
        if arm == 0:
            done = interp.exec_block(statements(node.body), exits)
        elif isinstance(node.orelse, cst.If):  # `elif`
            outcome = exec_if(interp, node.orelse)
            done = outcome is TERMINATED
            exits.extend([outcome] if isinstance(outcome, Continuation) else [])
        elif node.orelse is not None:
            done = interp.exec_block(statements(node.orelse.body), exits)
        else:
            done = False
        restore_slots(interp.heap, arm_slots[arm], saved)
        arms.append((interp.frame.env, done, exits))
    interp.frame.env, interp.ctx = base, outer
    (then_env, then_done, then_exits), (else_env, else_done, else_exits) = arms
    if then_done and else_done:
        return TERMINATED
    if then_done or else_done:
        base.vars.clear()
        base.vars.update((else_env if then_done else then_env).vars)
        arm = 1 if then_done else 0
        narrow_slots(interp.heap, arm_slots[arm])  # the rest of the block runs in that arm
        inner = joined(else_exits if then_done else then_exits)
        return Continuation(
            ((id(node), arm), *inner.arms),
            inner.rank_guard or (else_guard if then_done else then_guard),
            not_fsdp2[arm] + inner.not_fsdp2,
            dtensor_tested[arm] + inner.dtensor_tested,
        )
    for env, narrowing in ((then_env, then_narrowing), (else_env, else_narrowing)):
        undo_narrowing(env, narrowing, base)  # what the test said holds only inside the arm
    merged = dict(else_env.vars)
    for name, value in then_env.vars.items():
        other = else_env.vars.get(name)
        merged[name] = value if other is None or other == value else choice([value, other])
    base.vars.clear()
    base.vars.update(merged)
    if then_exits or else_exits:  # the rest never follows the arms that exited in either branch
        return Continuation(joined(then_exits + else_exits).arms, None)
    return None


def evaluate_test(interp: Evaluator, node: cst.If | cst.IfExp) -> Value:
    """The value of the test, evaluated in a context that says which test it is."""
    outer = interp.ctx
    interp.ctx = outer.with_(testing=outer.testing + (id(node),))
    try:
        return interp.eval(node.test)
    finally:
        interp.ctx = outer


def exec_taken_arm(interp: Evaluator, node: cst.If, taken: bool) -> object:
    """An ``if`` whose test is a constant (``if algo == 1:`` with ``algo`` bound to 2, ``if
    False:``): only one arm runs, unconditionally."""
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
    interp.eval(node.test)
    inside, _ = guards.narrowing(interp, node.test)  # `while hasattr(model, "module"): model = model.module`
    slots, _ = guards.slot_narrowing(interp, node.test)
    before = Env(None, dict(interp.frame.env.vars))
    interp.frame.env.vars.update(inside)
    saved = narrow_slots(interp.heap, slots)
    interp.loop_body(node, node.body, node.orelse)
    restore_slots(interp.heap, slots, saved)
    undo_narrowing(interp.frame.env, inside, before)


def eval_if_exp(interp: Evaluator, node: cst.IfExp) -> Value:
    """Like an ``if`` statement: each arm is a branch, run on the ranks its test selects."""
    before = interp.ctx
    interp.ctx = before.with_(if_nodes=before.if_nodes + (id(node),))
    try:
        return _eval_if_exp(interp, node)
    finally:
        interp.ctx = before


def _eval_if_exp(interp: Evaluator, node: cst.IfExp) -> Value:
    rank_guards = guards.rank_guards(node, guards.rank_kind(evaluate_test(interp, node)), len(interp.frame.stack))
    results = []
    base, outer = interp.frame.env, interp.ctx
    narrowings = zip(guards.tensor_narrowing(interp, node.test), guards.narrowing(interp, node.test), strict=True)
    tests = (
        guards.slot_narrowing(interp, node.test),
        guards.proved_not_fsdp2(interp, node.test),
        guards.dtensor_tested(interp, node.test),
    )
    arms = zip(narrowings, *tests, rank_guards, strict=True)
    for index, ((facts, narrowing), slots, not_fsdp2, dtensor_tested, guard) in enumerate(arms):
        interp.frame.env = Env(base, {**facts, **narrowing}) if facts or narrowing else base
        interp.ctx = outer.with_(
            branches=outer.branches + ((id(node), index),),
            rank_guard=guard or outer.rank_guard,
            not_fsdp2=outer.not_fsdp2 + not_fsdp2,
            dtensor_tested=outer.dtensor_tested + dtensor_tested,
        )
        saved = narrow_slots(interp.heap, slots)
        results.append(interp.eval(node.body if index == 0 else node.orelse))
        restore_slots(interp.heap, slots, saved)
        interp.frame.env, interp.ctx = base, outer
    return choice(results)


def filtered_modules(interp: Evaluator, predicate: Value, modules: Value, node: cst.Call) -> Value:
    """``filter(lambda m: isinstance(m, Block), model.modules())``: like a filtered loop, the
    root is left out unless the predicate is a type test its class passes."""
    element = interp.element_of(modules, lazy=False)
    kept = []
    for option in options(element):
        if isinstance(option, Ref) and option.path and is_any_depth(option.path[-1]):
            if not (isinstance(predicate, Lambda) and guards.lambda_admits_root(interp, predicate.node, option)):
                option = Ref(option.root, option.path[:-1] + (ANY, ANY_DEPTH))
        kept.append(option)
    container = Obj.container([(None, choice(kept))], node)
    return Ref(container)


def comprehension_condition(interp: Evaluator, test: cst.BaseExpression) -> None:
    """``[... for x in xs if test]``: the rest of the comprehension runs where ``test`` holds."""
    interp.eval(test)
    interp.frame.env.vars.update(guards.tensor_narrowing(interp, test)[0])
    interp.frame.env.vars.update(guards.narrowing(interp, test)[0])
    tested = guards.dtensor_tested(interp, test)[0]
    interp.ctx = interp.ctx.with_(dtensor_tested=interp.ctx.dtensor_tested + tested) if tested else interp.ctx


def undo_narrowing(env: Env, narrowing: dict[str, Value], base: Env) -> None:
    for name, value in narrowing.items():
        if env.vars.get(name) is not value:
            continue  # reassigned in the arm
        if name in base.vars:
            env.vars[name] = base.vars[name]
        else:
            del env.vars[name]
