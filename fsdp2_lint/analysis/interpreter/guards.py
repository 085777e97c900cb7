"""Every condition analysis: what an ``if``/``while``/conditional-expression/comprehension test
establishes in its true and in its false arm, as two :class:`~.state.Arm` records from one walk
of the test (:func:`arms`). Per arm:

- ``narrowing``: variables a type test rebinds (a DDP/FSDP1 wrapper, a ``modules()`` loop
  variable that is not the root) or an identity test narrows (``model is ref_model``), undone
  after the arm;
- ``type_facts``: state-dict tensors a DTensor test proves plain, kept after the arm;
- ``slots``: the same wrapper narrowing for attributes, as heap slots, undone after the arm;
  also a setting compared with a constant, which reads as that constant in the arm where they are
  equal (:mod:`.settings`), so that a later test of the same setting is decided;
- ``not_fsdp2``: the modules the test proves are no FSDP2 modules, or hold no DTensor parameter
  (``any(isinstance(p, DTensor) for p in model.parameters())`` in its false arm);
- ``distinct``: the values (modules) an identity test proves are different objects;
- ``dtensor_tested``: the values the test requires to be DTensors;
- ``not_dtensor``: the values the test proves are no DTensors (a parameter, or its gradient);
- ``rank_guard``: the ranks the arm runs on, from the test's rank kind (:mod:`.ranks`, computed
  when the test is evaluated).

A new path fact: a field of :class:`~.state.Arm`, its producer here (a field of :class:`_Facts`
filled by :func:`_condition`, or computed in :func:`arms`), its consumers in :mod:`.flow`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypeVar

import libcst as cst

from fsdp2_lint.analysis import apis, conditions
from fsdp2_lint.analysis.conditions import Condition
from fsdp2_lint.analysis.interpreter import settings
from fsdp2_lint.analysis.interpreter.ranks import rank_guards, rank_kind
from fsdp2_lint.analysis.interpreter.state import Arm, Evaluator, Slot
from fsdp2_lint.analysis.interpreter.versions import peek, version_fsdp2, version_not_fsdp2
from fsdp2_lint.analysis.model import (
    ANY,
    ANY_DEPTH,
    UNKNOWN,
    Class,
    EventKind,
    Obj,
    ObjKind,
    Ref,
    StateDict,
    Symbol,
    Tuple,
    Value,
    canonical,
    choice,
    const,
    is_any_depth,
    is_container,
    options,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import child_nodes, dotted

T = TypeVar("T")
Branching = cst.If | cst.IfExp | cst.While | cst.CompIf | cst.Lambda  # a lambda: a filter's predicate


def arms(interp: Evaluator, node: Branching, test: cst.BaseExpression, value: Value) -> tuple[Arm, Arm]:
    """What ``test`` (of ``node``, evaluated to ``value``) establishes in its true and in its
    false arm."""
    facts = _by_arm(test, lambda condition: _condition(interp, condition), _Facts.both, _Facts(), _Facts.either)
    identities = _by_arm(test, lambda condition: _identity_test(interp, condition), _Identity.both, _Identity())
    loops = _loop_narrowing(interp, test)
    guards = rank_guards(node, test, rank_kind(value), len(interp.frame.stack))
    ruled_out = _ruled_out_by_default(interp, test, value)
    decides_settings = not isinstance(node, cst.While)  # a loop's body may change what it tests
    return tuple(  # type: ignore[return-value]
        Arm(
            branch=(id(node), index),
            rank_guard=guards[index],
            # an identity test names the module exactly: it overrides what a walk's filter suggests
            narrowing={**_variables(facts[index].wrappers), **loops[index], **identities[index].narrowing},
            distinct=identities[index].distinct,
            type_facts=facts[index].type_facts,
            slots={**_slots(facts[index].wrappers), **(facts[index].settings if decides_settings else {})},
            not_fsdp2=_proved_not_fsdp2(interp, facts[index].wrappers)
            + facts[index].unsharded
            + version_not_fsdp2(value, index),
            fsdp2_tested=version_fsdp2(value, index),
            dtensor_tested=facts[index].dtensor_tested,
            not_dtensor=facts[index].not_dtensor,
            # A rank test is left to the rank guards: its arms run on different ranks of one job.
            conditions=facts[index].conditions if guards == (None, None) else (),
            against_default=index == ruled_out,
        )
        for index in (0, 1)
    )


def _ruled_out_by_default(interp: Evaluator, test: cst.BaseExpression, value: Value) -> int | None:
    """The arm (0: true, 1: false) that a constant test on parameters the call left to their
    defaults rules out. Both arms run (the function is written for callers that pass them too)."""
    if isinstance(const(value), (bool, type(None))) and names_in(test) & interp.frame.defaulted:
        return 0 if not const(value) else 1
    return None


@dataclass(frozen=True)
class _Facts:
    """What one condition (or an ``and``/``or`` of conditions) establishes in one arm."""

    wrappers: dict[object, Value] = field(default_factory=dict)  # names and slots a wrapper test rebinds
    type_facts: dict[str, Value] = field(default_factory=dict)
    dtensor_tested: tuple[Value, ...] = ()
    not_dtensor: tuple[Value, ...] = ()
    conditions: tuple[tuple[Condition, bool], ...] = ()
    settings: dict[Slot, Value] = field(default_factory=dict)  # settings known equal to a constant
    unsharded: tuple[Ref, ...] = ()  # modules none of whose parameters is a DTensor

    def both(self, other: _Facts) -> _Facts:
        """What two conditions that both hold establish."""
        return _Facts(
            {**self.wrappers, **other.wrappers},
            {**self.type_facts, **other.type_facts},
            self.dtensor_tested + other.dtensor_tested,
            self.not_dtensor + other.not_dtensor,
            self.conditions + other.conditions,
            {**self.settings, **other.settings},
            self.unsharded + other.unsharded,
        )

    def either(self, other: _Facts) -> _Facts:
        """What one of two conditions holding establishes: a name both narrow is one of the two
        (``type(m) is FSDP or type(m) is DDP``: a wrapper either way)."""
        return _Facts(_one_of(self.wrappers, other.wrappers), _one_of(self.type_facts, other.type_facts))


def _one_of(first: dict, second: dict) -> dict:
    return {key: choice([value, second[key]]) for key, value in first.items() if key in second}


def _condition(interp: Evaluator, test: cst.BaseExpression) -> tuple[_Facts, _Facts]:
    """What one condition (no ``not``/``and``/``or``) establishes in its true and its false arm."""
    true, false = _type_condition(interp, test)
    equal, unequal = settings.setting_facts(interp, test)
    true, false = replace(true, settings=equal), replace(false, settings=unequal)
    fixed = _fixed_condition(interp, test)
    if fixed is None:
        return true, false
    polarity = conditions.parts(test)[2]  # type: ignore[index]
    return (
        replace(true, conditions=true.conditions + ((fixed, polarity),)),
        replace(false, conditions=false.conditions + ((fixed, not polarity),)),
    )


def _type_condition(interp: Evaluator, test: cst.BaseExpression) -> tuple[_Facts, _Facts]:
    """What a type test (``isinstance``, ``hasattr``) establishes in its true and its false arm."""
    over_parameters = _parameters_dtensor_test(interp, test)
    if over_parameters is not None:
        return over_parameters
    wrapper_true, wrapper_false = _wrapper_type_test(interp, test)
    name = dtensor_test_subject(interp, test)
    tested = interp.frame.env.lookup(name) if name is not None else None
    if name is None or tested is None:
        parameter = _gradient_test_subject(interp, test)  # `isinstance(p.grad, DTensor)`
        if parameter is not None:
            return _Facts(wrapper_true), _Facts(wrapper_false, not_dtensor=(parameter,))
        return _Facts(wrapper_true), _Facts(wrapper_false)
    # A DTensor test: in the true arm the value is a DTensor; in the false arm a tensor of a
    # sharded state dict is plain (a buffer), so it holds its full value, and a parameter or a
    # gradient is no DTensor.
    plain = {}
    if any(isinstance(o, StateDict) for o in options(tested)):
        plain = {name: choice([replace(o, full=True) if isinstance(o, StateDict) else o for o in options(tested)])}
    return _Facts(wrapper_true, dtensor_tested=(tested,)), _Facts(wrapper_false, plain, not_dtensor=(tested,))


def _identity_test(interp: Evaluator, test: cst.BaseExpression) -> tuple[_Identity, _Identity]:
    """What ``x is y`` (or ``is not``) establishes. Where they differ, the two values (modules, or
    choices of them) are different objects, so what was given one earlier did not take the other
    (``fully_shard(inner)``, then ``if model is not inner: fully_shard(model)``). A name on either
    side that holds one of several objects (``for model in (ref_model, fsdp_model):``, ``inner =
    model.model if ... else model``) of which the other side is some, is one of those where they are
    the same; where not, and the other side is one object, one of the others.
    Returns what the true arm establishes, then the false arm."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return _Identity(), _Identity()
    target = test.comparisons[0]
    if not isinstance(target.operator, (cst.Is, cst.IsNot)):
        return _Identity(), _Identity()
    left, right = peek(interp, test.left), peek(interp, target.comparator)
    modules = all(any(isinstance(o, Ref) for o in options(value)) for value in (left, right))
    same, different = _Identity(), _Identity(distinct=((left, right),) if modules else ())
    for name, other in ((test.left, right), (target.comparator, left)):
        if isinstance(name, cst.Name):
            narrowed = _identity_narrowing(interp, name.value, other)
            same, different = same.both(narrowed[0]), different.both(narrowed[1])
    return (same, different) if isinstance(target.operator, cst.Is) else (different, same)


@dataclass(frozen=True)
class _Identity:
    """What an identity test establishes in one arm: names narrowed to some of their objects, and
    pairs of values that are different objects."""

    narrowing: dict[str, Value] = field(default_factory=dict)
    distinct: tuple[tuple[Value, Value], ...] = ()

    def both(self, other: _Identity) -> _Identity:
        return _Identity({**self.narrowing, **other.narrowing}, self.distinct + other.distinct)


def _identity_narrowing(interp: Evaluator, name: str, other: Value) -> tuple[_Identity, _Identity]:
    """What ``name`` is where it is ``other`` and where it is not: a module of a ``modules()`` walk
    tested against the walk's root (``if m is self: continue``) is the root, or one below it."""
    held, others = options(interp.frame.env.lookup(name) or UNKNOWN), options(other)
    if len(held) == 1 and _walked(held[0]) and others == (_kept(held[0], root=True),):
        return _Identity({name: _kept(held[0], root=True)}), _Identity({name: _kept(held[0], root=False)})
    same = [o for o in held if isinstance(o, Ref) and o in others]
    if len(held) < 2 or not same:
        return _Identity(), _Identity()
    rest = [o for o in held if o not in same]
    different = _Identity({name: choice(rest)}) if rest and len(others) == 1 else _Identity()
    return _Identity({name: choice(same)}), different


def _fixed_condition(interp: Evaluator, test: cst.BaseExpression) -> Condition | None:
    """The test as a :class:`Condition` when its truth cannot change until the name it reads is
    bound again (:mod:`fsdp2_lint.analysis.conditions`): a local name (not bound in a loop of this
    function) holding no list, dict or set the code builds, whose truth a mutation changes (`if not
    items:` ... `items.append(x)`); an attribute read from it, as of the heap's mutations so far."""
    found = conditions.parts(test)
    if found is None:
        return None
    tested, equals, _ = found
    named = conditions.subject(tested)
    if named is None:
        return None
    name, path = named
    frame = interp.frame
    value = frame.env.vars.get(name)
    if value is None or name in frame.global_names:
        return None
    if not path and equals is conditions.TRUTH and any(is_container(o) for o in options(value)):
        return None
    site = frame.bindings[name] if name in frame.bindings else frame.function  # a parameter's: its function
    if site is None or frame.entry_loops:  # a call in a loop binds its names anew each iteration
        return None
    calls = tuple(id(call) for call in frame.stack)  # another call of the function binds them anew
    return Condition(name, site, path, interp.mutations if path else 0, equals, calls)


def dtensor_test_subject(interp: Evaluator, test: cst.BaseExpression) -> str | None:
    """``x`` when the test is ``isinstance(x, DTensor)`` or ``hasattr(x, "full_tensor")``, ``x``
    or its ``x.data`` (a DTensor parameter's data is the DTensor)."""
    if not (isinstance(test, cst.Call) and len(test.args) == 2):
        return None
    subject = _data_of(test.args[0].value)
    if subject is None:
        return None
    kind, function = test.args[1].value, dotted(test.func)
    if function == "hasattr":
        is_dtensor_test = isinstance(kind, cst.SimpleString) and kind.evaluated_value in apis.DTENSOR_ONLY
    else:
        is_dtensor_test = function == "isinstance" and any(
            isinstance(option, Symbol) and option.qname == apis.DTENSOR for option in walk_contents(peek(interp, kind))
        )
    return subject.value if is_dtensor_test else None


def _parameters_dtensor_test(interp: Evaluator, test: cst.BaseExpression) -> tuple[_Facts, _Facts] | None:
    """``any(isinstance(p, DTensor) for p in model.parameters())`` (or ``named_parameters()``, or
    ``all(not ...)``): where no parameter of ``model`` is a DTensor, no ``fully_shard`` covers
    any part of it. The facts of the true and of the false arm."""
    function = dotted(test.func) if isinstance(test, cst.Call) else None
    if function not in ("any", "all") or len(test.args) != 1:  # type: ignore[union-attr]
        return None
    loop = test.args[0].value  # type: ignore[union-attr]
    if not isinstance(loop, (cst.GeneratorExp, cst.ListComp)) or loop.for_in.ifs or loop.for_in.inner_for_in:
        return None
    element, negated = _without_not(loop.elt)
    if negated != (function == "all"):
        return None
    target = loop.for_in.target
    parameter = target.elements[-1].value if isinstance(target, cst.Tuple) and target.elements else target
    module = _parameters_owner(interp, loop.for_in.iter)
    if not isinstance(parameter, cst.Name) or module is None:
        return None
    if dtensor_test_subject(interp, element) != parameter.value:
        return None
    unsharded = _Facts(unsharded=tuple(canonical(ref) for ref in refs(module)))
    return (unsharded, _Facts()) if function == "all" else (_Facts(), unsharded)


def _parameters_owner(interp: Evaluator, node: cst.BaseExpression) -> Value | None:
    """``model`` of ``model.parameters()`` / ``model.named_parameters()`` (``model`` a name or
    ``self.model``)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    if node.func.attr.value not in ("parameters", "named_parameters"):
        return None
    owner = node.func.value
    if isinstance(owner, cst.Name):
        return interp.frame.env.lookup(owner.value)
    attribute = _attribute_of(interp, owner)
    if attribute is None:
        return None
    return interp.heap.get((id(attribute.root), attribute.path)) or attribute  # stored there, or as read


def _gradient_test_subject(interp: Evaluator, test: cst.BaseExpression) -> Value | None:
    """``p`` when the test is ``isinstance(p.grad, DTensor)`` (or of ``p.grad.data``): in its false
    arm the parameter's gradient is no DTensor."""
    if not (isinstance(test, cst.Call) and len(test.args) == 2 and dotted(test.func) == "isinstance"):
        return None
    subject = test.args[0].value
    if isinstance(subject, cst.Attribute) and subject.attr.value == "data":
        subject = subject.value
    if not (
        isinstance(subject, cst.Attribute) and subject.attr.value == "grad" and isinstance(subject.value, cst.Name)
    ):
        return None
    kind = peek(interp, test.args[1].value)
    if not any(isinstance(option, Symbol) and option.qname == apis.DTENSOR for option in walk_contents(kind)):
        return None
    return interp.frame.env.lookup(subject.value.value)


def _data_of(node: cst.BaseExpression) -> cst.Name | None:
    """``x`` for ``x`` and for ``x.data``."""
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        node = node.value
    return node if isinstance(node, cst.Name) else None


def _proved_not_fsdp2(interp: Evaluator, wrappers: dict[object, Value]) -> tuple[Ref, ...]:
    """The modules a type test proves are no FSDP2 modules: those the wrapper narrowing rebinds,
    as they are before it."""
    values = (interp.frame.env.lookup(key) if isinstance(key, str) else interp.heap.get(key) for key in wrappers)
    return tuple(canonical(ref) for value in values if value is not None for ref in refs(value))


def _wrapper_type_test(interp: Evaluator, test: cst.BaseExpression) -> tuple[dict[object, Value], dict[object, Value]]:
    """A model tested for being a DDP/FSDP1 wrapper (``hasattr(model, "no_sync")``,
    ``isinstance(model, DDP)``, ``type(model) in WRAPPERS`` with a dict, set or tuple of such
    classes) or an FSDP2 module (``isinstance(model, FSDPModule)``) is, in the arm that rules
    that out, not an FSDP2 module. Keys: variable names, or heap slots for attributes
    (``hasattr(self.model, "no_sync")``)."""
    parts = _class_test(test)
    if parts is None:
        return {}, {}
    function, tested, kind, negative = parts
    name = tested.value if isinstance(tested, cst.Name) else _slot_of(interp, tested)
    if name is None:
        return {}, {}
    if function == "hasattr":
        if isinstance(kind, cst.SimpleString) and kind.evaluated_value in apis.WRAPPER_ONLY:
            return {name: _unknown_wrapper(dotted(tested))}, {}
        return {}, {}
    types = _classes_in(interp, kind)
    found: tuple[dict[object, Value], dict[object, Value]] = ({}, {})
    if function == "isinstance" and apis.FSDP_MODULE in types:
        found = {}, {name: UNKNOWN}
    elif types & {apis.DDP, apis.FSDP1} and not types & apis.ROOT_ADMITTING_TYPES:
        found = {name: _unknown_wrapper(dotted(tested))}, {}
    return (found[1], found[0]) if negative else found


def _class_test(test: cst.BaseExpression) -> tuple[str, cst.BaseExpression, cst.BaseExpression, bool] | None:
    """``(how, tested, classes, negative)`` for ``hasattr(m, "name")`` and ``isinstance(m, C)``
    (how: the function), ``type(m) in C`` / ``type(m) is C`` / ``m.__class__ == C`` and their
    negations (how: ``"type"``)."""
    if isinstance(test, cst.Call) and len(test.args) >= 2 and dotted(test.func) in ("hasattr", "isinstance"):
        return dotted(test.func), test.args[0].value, test.args[1].value, False
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    operator, right = test.comparisons[0].operator, test.comparisons[0].comparator
    if not isinstance(operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)):
        return None
    tested = _type_argument(test.left)
    if tested is None:
        return None
    return "type", tested, right, isinstance(operator, (cst.NotIn, cst.IsNot, cst.NotEqual))


def _type_argument(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``m`` of ``type(m)`` or ``m.__class__``."""
    if isinstance(node, cst.Call) and dotted(node.func) == "type" and len(node.args) == 1:
        return node.args[0].value
    if isinstance(node, cst.Attribute) and node.attr.value == "__class__":
        return node.value
    return None


def _classes_in(interp: Evaluator, node: cst.BaseExpression) -> set[str]:
    """The names of the classes a type test lists: a class, a tuple, list or set of them, or the
    keys of a dict of them (``WRAPPERS``, ``WRAPPERS.keys()``, ``tuple(WRAPPERS)``)."""
    if isinstance(node, cst.Call) and len(node.args) == 1 and dotted(node.func) in _COPIES:
        return _classes_in(interp, node.args[0].value)
    if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute):
        return _classes_in(interp, node.func.value) if node.func.attr.value == "keys" else set()
    found: set[str] = set()
    for option in walk_contents(peek(interp, node)):
        if isinstance(option, Symbol):
            found.add(option.qname)
        elif is_container(option) and isinstance(option.root.node, cst.Dict):  # type: ignore[union-attr]
            keys = option.root.node.elements  # type: ignore[union-attr]
            found |= {
                qname for key in keys if isinstance(key, cst.DictElement) for qname in _classes_in(interp, key.key)
            }
    return found


_COPIES = frozenset({"tuple", "list", "set", "frozenset"})


def _slot_of(interp: Evaluator, node: cst.BaseExpression) -> Slot | None:
    """The heap slot of ``name.attr`` when ``name`` holds one known object."""
    attribute = _attribute_of(interp, node)
    return None if attribute is None else (id(attribute.root), attribute.path)


def _attribute_of(interp: Evaluator, node: cst.BaseExpression) -> Ref | None:
    """``name.attr`` named from its owner's outermost owner, when ``name`` holds one known object."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
        return None
    owner = interp.frame.env.lookup(node.value.value)
    if not isinstance(owner, Ref) or owner.root.kind is ObjKind.CONTAINER:
        return None
    return canonical(owner).child(node.attr.value)


def _loop_narrowing(interp: Evaluator, test: cst.BaseExpression) -> tuple[dict[str, Value], dict[str, Value]]:
    """A loop variable over ``m.modules()`` (which includes ``m`` itself) that is filtered by a
    condition no longer includes the root, unless the condition is a type test that the root's
    own class passes: then it is the root alone when the test admits no other class, and is left
    as it is (root and submodules) when it does."""
    loop_modules = {  # `m` in `for m in model.modules()` (of one model, or of one of several)
        name: options(value)
        for name, value in interp.frame.env.vars.items()
        if any(_walked(o) for o in options(value)) and not any(_other_module(o) for o in options(value))
    }
    arms: tuple[dict[str, Value], dict[str, Value]] = ({}, {})
    if not loop_modules:
        return arms
    inner, negated = _without_not(test)
    mentioned = names_in(inner)
    for name, found in loop_modules.items():
        subjects = {name: "module"} | _type_aliases(interp, mentioned - loop_modules.keys(), found)
        if not mentioned & subjects.keys():
            continue
        admitted = [_admitted(interp, inner, subjects, o) if isinstance(o, Ref) else _NONE for o in found]
        if not any(root and others for root, others in admitted):
            # Any other test leaves the root out of its true arm (precision first); a type test
            # written negatively (`type(m).__name__ not in NAMES`) out of its false arm.
            negative_type_test = _negative_comparison(inner) and _type_test(inner, subjects) is not None
            kept = choice([_kept(o, root) for o, (root, _) in zip(found, admitted, strict=True)])
            arms[int(negated ^ negative_type_test)][name] = kept
    return arms


def _without_not(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """The test without its ``not``s, and whether there were an odd number of them."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    return test, negated


def _negative_comparison(test: cst.BaseExpression) -> bool:
    """``a not in b``, ``a != b``, ``a is not b``: true in the arm where the positive form fails."""
    return (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, (cst.NotIn, cst.NotEqual, cst.IsNot))
    )


def _kept(module: Value, root: bool) -> Value:
    """What of a ``modules()`` walk a test's true arm keeps: the root alone (a type test only its
    class passes) or the modules below it."""
    if not _walked(module):
        return module
    assert isinstance(module, Ref)
    return Ref(module.root, module.path[:-1] + (() if root else (ANY, ANY_DEPTH)))


_NONE = (False, False)


def _type_aliases(interp: Evaluator, names: set[str], walks: tuple[Value, ...]) -> dict[str, str]:
    """The variables among ``names`` that hold the type of a module of ``walks`` (``"type"``:
    ``cls = type(m)``, ``m.__class__``) or its name (``"name"``: ``cls_name = type(m).__name__``)."""
    found = {}
    for name in names:
        value = interp.frame.env.lookup(name)
        how = _type_of_walked(value, walks) if isinstance(value, Ref) else None
        if how is not None:
            found[name] = how
    return found


def _type_of_walked(value: Ref, walks: tuple[Value, ...]) -> str | None:
    """``"type"`` when ``value`` is ``type(m)`` / ``m.__class__`` of a module of ``walks``,
    ``"name"`` when it is their ``__name__``, else None."""
    path, how = value.path, "type"
    if path[-1:] in (("__name__",), ("__qualname__",)):
        path, how = path[:-1], "name"
    event = value.root.event
    if not path and event is not None and event.qname == "builtins.type" and len(event.args) == 1:
        module = event.args[0]  # `type(m)`
    elif path[-1:] == ("__class__",):
        module = Ref(value.root, path[:-1])  # `m.__class__`
    else:
        return None
    same = any(
        isinstance(w, Ref) and isinstance(module, Ref) and (w.root, w.path) == (module.root, module.path) for w in walks
    )
    return how if same else None


def _admitted(interp: Evaluator, test: cst.BaseExpression, subjects: dict[str, str], ref: Ref) -> tuple[bool, bool]:
    """Whether the type tests in ``test`` admit the root of the walk ``ref`` and whether they may
    admit other classes (its submodules'): ``isinstance(m, T)``, ``type(m) in TYPES``,
    ``type(m).__name__ in NAMES``. ``subjects``: the loop variable (``"module"``) and the variables
    that hold its type (``"type"``) or its class name (``"name"``). A root whose class is
    unknown is not admitted."""
    root = _root_class(ref)
    comprehension_types = _comprehension_types(test)
    admits_root = admits_others = False
    for node in _nodes_in(test):
        tested = _type_test(node, subjects)
        if tested is None:
            continue
        how, types = tested
        types = comprehension_types.get(dotted(types), types)
        for option in walk_contents(peek(interp, types)):
            if isinstance(option, Tuple) or is_container(option):
                continue
            passes_root, passes_others = _passes(option, how, root)
            passes_others = passes_others or (how == "isinstance" and _subclassed(interp, option))
            admits_root, admits_others = admits_root or passes_root, admits_others or passes_others
    return admits_root, admits_others


def _type_test(node: cst.CSTNode, subjects: dict[str, str]) -> tuple[str, cst.BaseExpression] | None:
    """How ``node`` tests the type of a subject and the expression it tests against:
    ``("isinstance", T)`` for ``isinstance(m, T)``, ``("type", T)`` for ``type(m) in T`` /
    ``m.__class__ is T``, ``("name", NAMES)`` for ``type(m).__name__ in NAMES``."""
    if isinstance(node, cst.Call) and dotted(node.func) in ("isinstance", "issubclass") and len(node.args) >= 2:
        return ("isinstance", node.args[1].value) if subjects.get(dotted(node.args[0].value)) == "module" else None
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1):
        return None
    operator, right = node.comparisons[0].operator, node.comparisons[0].comparator
    sides = [(node.left, right)]
    if isinstance(operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        sides.append((right, node.left))  # `Model == type(m)`
    elif not isinstance(operator, (cst.In, cst.NotIn)):
        return None
    for subject, types in sides:
        how = _type_of(subject, subjects)
        if how is not None:
            return how, types
    return None


def _type_of(node: cst.BaseExpression, subjects: dict[str, str]) -> str | None:
    """``"type"`` for ``type(m)`` / ``m.__class__``, ``"name"`` for their ``__name__`` /
    ``__qualname__``, where ``m`` is the loop variable; or what a variable holding either is."""
    if isinstance(node, cst.Name):
        how = subjects.get(node.value)
        return how if how != "module" else None
    if isinstance(node, cst.Attribute) and node.attr.value in ("__name__", "__qualname__"):
        return "name" if _type_of(node.value, subjects) == "type" else None
    if isinstance(node, cst.Attribute) and node.attr.value == "__class__":
        return "type" if subjects.get(dotted(node.value)) == "module" else None
    if isinstance(node, cst.Call) and dotted(node.func) == "type" and len(node.args) == 1:
        return "type" if subjects.get(dotted(node.args[0].value)) == "module" else None
    return None


def _passes(option: Value, how: str, root: tuple[Value, str] | None) -> tuple[bool, bool]:
    """Whether a type or class name a test lists admits the root (whose class and its name are
    ``root``) and whether it may admit other modules. ``isinstance`` also admits subclasses: a
    base of the root's class (``nn.Module``) admits the root and its submodules alike."""
    if how == "isinstance" and isinstance(option, Symbol) and option.qname in apis.ROOT_ADMITTING_TYPES:
        return True, True
    if root is None:
        return False, True
    cls, class_name = root
    if how == "name":
        return (True, False) if const(option) == class_name else (False, True)
    if _same_class(option, cls):
        return True, False
    if how == "isinstance" and isinstance(option, Class) and isinstance(cls, Class):
        return any(base is option.info for base in cls.info.mro()), True
    return False, True


def _subclassed(interp: Evaluator, option: Value) -> bool:
    """Does a project class derive from ``option``? Then ``isinstance`` admits the root's
    submodules of those classes too (a model class whose sub-models share its base)."""
    return isinstance(option, Class) and any(
        info is not option.info and option.info in info.mro() for info in interp.classes.values()
    )


def project_instance_test(objects: Value, classes: Value) -> bool | None:
    """``isinstance(x, C)`` decided where the code shows the answer: every object ``x`` may be was
    built from a class of the project (``accelerator = Printer()``) or by calling a library class
    (``blocks = nn.ModuleList(...)``), and ``C`` is a class or a tuple of them. True where each
    object's class is ``C`` or derives from it (a library class by its resolved name), False where
    none does, ``C`` is the project's and each base is known (only a project class can derive from
    one); None (unknown) otherwise."""
    tested = [option for option in walk_contents(classes) if not isinstance(option, Tuple)]
    built = options(objects)
    if not tested or not all(isinstance(c, (Class, Symbol)) for c in tested) or not built:
        return None
    answers = {_instance_of(option, tested) for option in built}
    return answers.pop() if len(answers) == 1 else None


def _instance_of(option: Value, tested: list[Value]) -> bool | None:
    if not isinstance(option, Ref) or option.path:
        return None
    named = {c.qname for c in tested if isinstance(c, Symbol)}
    cls = option.root.cls
    if cls is None:  # the library callable that built it, when it is the class tested
        return True if option.root.qname in named else None
    lineage = list(cls.mro())
    if any(isinstance(c, Class) and c.info is k for c in tested for k in lineage) or named & set(cls.external_bases()):
        return True
    if not named and all(isinstance(base, (Class, Symbol)) for k in lineage for base in k.bases):
        return False
    return None  # a base the analysis does not know may derive from `C`


def _same_class(option: Value, cls: Value) -> bool:
    if isinstance(option, Class) and isinstance(cls, Class):
        return option.info is cls.info
    if isinstance(option, Ref) and isinstance(cls, Ref):  # the same free name: `Model` neither defined nor imported
        return option.root is cls.root and not option.path and not cls.path
    return isinstance(option, Symbol) and isinstance(cls, Symbol) and option.qname == cls.qname


# Class methods that construct an instance of their class: `LlamaForCausalLM.from_pretrained(...)`.
_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "_from_config"})


def _root_class(ref: Ref) -> tuple[Value, str] | None:
    """The class of the root of the walk ``ref`` (``model`` in ``model.modules()``) and its name,
    when the code shows it: a same-file class constructed, a parameter's annotation, an imported
    class called (or its ``from_pretrained``; not an ``Auto...`` factory), a free name called."""
    if len(ref.path) != 1:
        return None
    obj = ref.root
    if obj.cls is not None:
        return Class(obj.cls), obj.cls.name
    declared = obj.declared
    event = obj.event
    if declared is None and obj.kind is ObjKind.NEW and event is not None:
        if event.kind is EventKind.INVOKE:
            declared = event.receiver
        elif obj.qname:
            owner, _, last = obj.qname.rpartition(".")
            declared = Symbol(owner if last in _CONSTRUCTORS else obj.qname)
    if isinstance(declared, Class):
        return declared, declared.info.name
    if isinstance(declared, Symbol) and declared.qname not in apis.ROOT_ADMITTING_TYPES:  # `model: nn.Module`: any
        name = declared.qname.rpartition(".")[2]
        return (declared, name) if name[:1].isupper() and not name.startswith("Auto") else None
    if isinstance(declared, Ref) and not declared.path and declared.root.kind is ObjKind.PARAM and declared.root.label:
        return declared, declared.root.label
    return None


def dtensor_checks(interp: Evaluator, test: cst.BaseExpression) -> tuple[str, ...]:
    """The source of each ``x`` the test checks with ``isinstance(x, T)``, ``T`` naming ``DTensor``
    (however it is spelled or imported)."""
    scope = interp.frame.scope
    if not scope.mentions_dtensor:
        return ()
    found = interp.dtensor_checks_of.get(id(test))
    if found is None:
        code = scope.module.code_for_node
        found = tuple(code(call.args[0].value) for call in _calls_in(test) if _checks_dtensor(call, code))
        interp.dtensor_checks_of[id(test)] = found
    return found


def mentions_dtensor(source: bytes) -> bool:
    """May the module test whether a value is a DTensor (its name, or an attribute only DTensors have)?"""
    return b"DTensor" in source or any(name.encode() in source for name in apis.DTENSOR_ONLY)


def _checks_dtensor(call: cst.Call, code: Callable[[cst.CSTNode], str]) -> bool:
    """``isinstance(x, DTensor)`` (``T`` naming DTensor) or ``hasattr(x, "full_tensor")`` (an
    attribute only DTensors have)."""
    if len(call.args) != 2:
        return False
    kind, function = call.args[1].value, dotted(call.func)
    if function == "hasattr":
        return isinstance(kind, cst.SimpleString) and kind.evaluated_value in apis.DTENSOR_ONLY
    return function == "isinstance" and "DTensor" in code(kind)


# --- how a test combines conditions -----------------------------------------------------------


def _by_arm(
    test: cst.BaseExpression,
    condition: Callable[[cst.BaseExpression], tuple[T, T]],
    join: Callable[[T, T], T],
    nothing: T,
    either: Callable[[T, T], T] | None = None,
) -> tuple[T, T]:
    """What ``test`` establishes in its true and in its false arm, from what ``condition`` says of
    each condition a ``not`` / ``and`` / ``or`` combines: both operands of an ``and`` hold in its
    true arm, both of an ``or`` fail in its false arm; ``either`` says what one of two holding
    establishes (the true arm of an ``or``, the false arm of an ``and``), else nothing."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        true, false = _by_arm(test.expression, condition, join, nothing, either)
        return false, true
    if isinstance(test, cst.BooleanOperation):
        (left_true, left_false), (right_true, right_false) = (
            _by_arm(operand, condition, join, nothing, either) for operand in (test.left, test.right)
        )
        one_of = either or (lambda _first, _second: nothing)
        if isinstance(test.operator, cst.And):
            return join(left_true, right_true), one_of(left_false, right_false)
        return one_of(left_true, right_true), join(left_false, right_false)
    return condition(test)


def _variables(narrowing: dict[object, Value]) -> dict[str, Value]:
    return {key: value for key, value in narrowing.items() if isinstance(key, str)}


def _slots(narrowing: dict[object, Value]) -> dict[Slot, Value]:
    return {key: value for key, value in narrowing.items() if isinstance(key, tuple)}


def _unknown_wrapper(label: str) -> Ref:
    """A DDP or FSDP1 wrapper around a module we do not know."""
    return Ref(Obj(ObjKind.WRAPPER, label, wrapped=UNKNOWN))


def _walked(value: Value) -> bool:
    """A module of a ``modules()`` walk (which may be its root)."""
    return isinstance(value, Ref) and bool(value.path) and is_any_depth(value.path[-1])


def _other_module(value: Value) -> bool:
    return isinstance(value, Ref) and not _walked(value)


def names_in(node: cst.CSTNode) -> set[str]:
    """The names an expression reads, but the loop variables of its comprehensions."""
    found = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        elif isinstance(current, cst.CompFor):
            stack.extend(part for part in child_nodes(current) if part is not current.target)
        elif not isinstance(current, cst.Lambda):
            stack.extend(child_nodes(current))
    return found - set(_comprehension_types(node))


def _comprehension_types(node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """``{t: types}`` for each ``for t in types`` of a comprehension in ``node``: what a type test
    on ``t`` (``any(isinstance(m, t) for t in types)``) tests against."""
    return {
        part.target.value: part.iter
        for part in _nodes_in(node)
        if isinstance(part, cst.CompFor) and isinstance(part.target, cst.Name)
    }


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    return [part for part in _nodes_in(node) if isinstance(part, cst.Call)]


def _nodes_in(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child_nodes(current))
