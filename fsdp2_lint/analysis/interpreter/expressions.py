"""Expressions: the half of :class:`~.core.Interpreter` that evaluates names, attributes,
subscripts, literals, collections, comprehensions, operators and comparisons, and iterates
values. Mixed into the interpreter, whose state and calls (:mod:`.calls`) it uses.
"""

from __future__ import annotations

import builtins
from functools import partial

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter import flow, ranks, torch_api, versions
from fsdp2_lint.analysis.interpreter.order import reversed_order
from fsdp2_lint.analysis.interpreter.state import Env, Slot, slot_keys
from fsdp2_lint.analysis.model import (
    ANY,
    ANY_DEPTH,
    UNKNOWN,
    BoundMethod,
    Class,
    Const,
    Derived,
    EventKind,
    Function,
    Iter,
    IterKind,
    Lambda,
    Loaded,
    ModuleIter,
    Obj,
    ObjKind,
    Params,
    Partial,
    RankDep,
    RankKind,
    Ref,
    StateDict,
    Super,
    Symbol,
    Tuple,
    Uniform,
    UniformKind,
    Value,
    choice,
    const,
    container_items,
    elements,
    is_container,
    is_wildcard,
    key_element,
    mapping_items,
    options,
)
from fsdp2_lint.analysis.syntax import child_nodes

BUILTIN_NAMES = frozenset(dir(builtins))
CONSTANT_NAMES = {"True": True, "False": False, "None": None}


class Expressions:
    """Evaluates expressions; part of :class:`~.core.Interpreter`."""

    def eval_name(self, node: cst.Name) -> Value:
        name = node.value
        if name in CONSTANT_NAMES:
            return Const(CONSTANT_NAMES[name])
        value = self.frame.env.lookup(name)
        if value is None:
            value = self.unbound(name)
        return torch_api.rank_by_name(name, self.resolved(value))

    def unbound(self, name: str) -> Value:
        scope = self.frame.scope
        for module in scope.star_imports:
            star = self.star_imported(module, name)
            if star is not None:
                return star
        if name in BUILTIN_NAMES:
            return Symbol(f"builtins.{name}")
        # Defined where the file cannot show (a star import, exec, a notebook cell): still one
        # object, so that every mention of the name agrees.
        if name not in scope.free_names:
            scope.free_names[name] = Ref(Obj(ObjKind.PARAM, name))
        return scope.free_names[name]

    def eval_attribute(self, node: cst.Attribute) -> Value:
        value = self.attribute(self.eval(node.value), node.attr.value, node)
        if isinstance(value, RankDep) and torch_api.LOW_RANK_OWNER.search(
            self.frame.scope.module.code_for_node(node.value)
        ):
            return UNKNOWN
        return value

    def attribute(self, base: Value, name: str, node: cst.CSTNode) -> Value:
        results: list[Value] = []
        self.slots_read.pop(id(node), None)
        # Where the base may be None, the code goes on only when it is not (None has no attributes).
        for option in [option for option in options(base) if option != Const(None)] or options(base):
            if isinstance(option, Symbol):
                results.append(self.resolved(Symbol(apis.canonical(f"{option.qname}.{name}"))))
            elif isinstance(option, Ref):
                results.append(self.ref_attribute(option, name, node))
            elif isinstance(option, Class):
                method = option.info.method(name)
                attribute = None if method else self.class_attribute(option.info, name)
                results.append(self.function_value(method, owner=option.info) if method else attribute or UNKNOWN)
            elif isinstance(option, Super):
                results.append(BoundMethod(option, name))
            else:
                results.append(torch_api.value_attribute(option, name))
        value = choice(results)
        if any(isinstance(option, Ref) for option in options(base)):
            self.record(EventKind.ATTR, node, receiver=base, name=name, result=value)
        return value

    def ref_attribute(self, ref: Ref, name: str, node: cst.CSTNode) -> Value:
        wrapped = torch_api.wrapped_module(ref, name)
        if wrapped is not None:
            return wrapped
        slot = self.stored_slot(ref, name)
        if slot is not None:
            self._read_slot(node, slot)
            return self.heap[slot]
        cls = ref.root.cls if not ref.path else None
        method = cls.method(name) if cls else None
        if method is not None and method.is_property:
            self.properties_read[id(node)] = (method, self.comparisons)
            return self.call_function(self.function_value(method, ref), (), {}, node) or UNKNOWN
        if method is not None:
            return self.function_value(method, ref)
        attribute = self.class_attribute(cls, name) if cls else None
        if attribute is not None:  # a class default: a store on the instance would go to its slot
            self._read_slot(node, slot_keys(ref, name)[0])
            return attribute
        if name in torch_api.MODULE_METHOD_NAMES or ref.root.kind is ObjKind.CONTAINER:
            return BoundMethod(ref, name)
        return torch_api.rank_by_name(name, ref.child(name))

    def _read_slot(self, node: cst.CSTNode, slot: Slot) -> None:
        """Note that the attribute read at ``node`` gave what ``slot`` holds: a test of it against a
        constant narrows the slot in its arms (:mod:`.settings`)."""
        self.slots_read[id(node)] = self.slots_read.get(id(node), ()) + (slot,)

    def eval_subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        element = node.slice[0].slice if node.slice else None
        if not isinstance(element, cst.Index):
            steps = [self.eval_slice(part) for part in node.slice]
            if steps == [-1]:  # `[::-1]`
                return choice([reversed_order(option) for option in options(base)])
            return base  # a slice of a container is the same kind of container
        return self.item_of(base, const(self.eval(element.value)))

    def item_of(self, base: Value, key: object) -> Value:
        """``base[key]`` (``key`` NotImplemented when unknown)."""
        results = []
        for option in options(base):
            if is_container(option):
                results.append(self.container_item(option, None if key is NotImplemented else key))
            elif isinstance(option, Ref):
                results.append(option.child(key_element(None if key is NotImplemented else key)))
            elif isinstance(option, Tuple) and isinstance(key, int) and -len(option.items) <= key < len(option.items):
                results.append(option.items[key])
            else:
                results.append(torch_api.value_item(option, key))
        return choice(results)

    def container_item(self, container: Ref, key: object, default: Value | None = None) -> Value:
        """``container[key]`` (``key`` None when unknown), or ``container.get(key, default)``.
        Without an item known to be under the key: the items under unknown keys and the default,
        and for a container that is an attribute (``self.models``, which other methods of the
        class may fill) the element the key names."""
        items = container.root.items
        if key is None:
            return choice([value for _, value in items] + ([default] if default is not None else []))
        exact = [value for k, value in items if k == key]
        if exact:
            return choice(exact + [value for k, value in items if k is None])
        found = [value for k, value in items if k is None]
        if container.root.parent is not None:
            found.append(container.child(key_element(key)))
        elif default is not None:
            found.append(default)
        return choice(found or [value for _, value in items])

    def subscript_key(self, node: cst.Subscript) -> object:
        element = node.slice[0].slice if node.slice else None
        if isinstance(element, cst.Index):
            key = const(self.eval(element.value))
            return None if key is NotImplemented else key
        return None

    def eval_slice(self, part: cst.SubscriptElement) -> object:
        """Evaluate one element of a subscript; the step of a ``[::step]`` slice, else None."""
        piece = part.slice
        if isinstance(piece, cst.Slice) and piece.step is not None and piece.lower is None and piece.upper is None:
            return const(self.eval(piece.step))
        self.eval_children(piece)
        return None

    def eval_children(self, node: cst.CSTNode) -> None:
        for child in child_nodes(node):
            if isinstance(child, cst.BaseExpression):
                self.eval(child)
            else:
                self.eval_children(child)

    def eval_literal(self, node: cst.Integer | cst.Float | cst.SimpleString) -> Value:
        try:
            return Const(literal_value(node))
        except Exception:  # libcst cannot evaluate every literal (e.g. some escapes)
            return UNKNOWN

    def eval_string(self, node: cst.BaseExpression) -> Value:
        parts: list[Value] = []
        for child in _string_expressions(node):
            parts.append(self.eval(child))
        if any(isinstance(part, RankDep) for part in parts):
            return RankDep(RankKind.MIXED)
        if isinstance(node, cst.SimpleString):
            return self.eval_literal(node)
        return UNKNOWN

    def eval_collection(self, node: cst.List | cst.Set | cst.Tuple | cst.Dict) -> Value:
        items: list[tuple[object, Value]] = []
        if isinstance(node, cst.Dict):
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    key = const(self.eval(element.key))
                    items.append((None if key is NotImplemented else key, self.eval(element.value)))
                else:
                    items.extend(mapping_items(self.eval(element.value)))
        else:
            for element in node.elements:
                value = self.eval(element.value)
                if isinstance(element, cst.StarredElement):
                    items.extend((None, item) for item in elements(value))
                else:
                    items.append((None, value))
        if isinstance(node, cst.Tuple):
            return Tuple(tuple(value for _, value in items))
        container = Obj.container(items, node)
        return Ref(container)

    def eval_comprehension(self, node: cst.BaseComp) -> Value:
        outer, outer_ctx = self.frame.env, self.ctx
        self.frame.env = Env(outer)
        lazy = isinstance(node, cst.GeneratorExp)
        try:
            element = self._comprehension_element(node, node.for_in, lazy)
        finally:
            self.frame.env, self.ctx = outer, outer_ctx
        if lazy and not _builds_objects(
            element
        ):  # a generator of parameters or of gradient-derived tensors is still one
            return element if isinstance(element, (Params, Derived)) else UNKNOWN
        container = Obj.container([(None, element)], node)
        return Ref(container)

    def _comprehension_element(self, node: cst.BaseComp, for_in: cst.CompFor | None, lazy: bool) -> Value:
        """What the comprehension produces from ``for_in`` on; its ``if``s are branches (:mod:`.flow`)."""
        if for_in is None:
            if isinstance(node, cst.DictComp):
                self.eval(node.key)
                return self.eval(node.value)
            return self.eval(node.elt)
        self.assign(for_in.target, self.element_of(self.eval(for_in.iter), lazy=lazy))
        rest = partial(self._comprehension_element, node, for_in.inner_for_in, lazy)
        for condition in reversed(for_in.ifs):
            rest = partial(flow.comprehension_condition, self, condition, rest)
        return rest()

    def eval_binary(self, node: cst.BinaryOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(left, RankDep) or isinstance(right, RankDep):
            return RankDep(RankKind.MIXED)
        if isinstance(left, Params) and isinstance(right, Params):
            return left | right
        derived = torch_api.derived_from((left, right), {})
        if derived is not None:
            return derived
        if isinstance(node.operator, cst.BitOr) and is_container(left):  # merged dicts, or a set union
            return Ref(Obj.container(mapping_items(left) + mapping_items(right), node))
        if isinstance(node.operator, cst.Add):
            left_items, right_items = container_items(left), container_items(right)
            if (left_items is None) != (right_items is None):  # [model] + list(model.layers)
                left_items = left_items if left_items is not None else self._iterated(left)
                right_items = right_items if right_items is not None else self._iterated(right)
            if left_items is not None and right_items is not None:
                container = Obj.container(left_items + right_items, node)
                return Ref(container)
        return _tensor_arithmetic(node.operator, left, right)

    def _iterated(self, value: Value) -> list[tuple[object, Value]] | None:
        """The elements of an iterable that is not a literal container, as container items."""
        if not any(isinstance(option, (ModuleIter, Params)) for option in options(value)):
            return None
        return [(None, self.element_of(value, lazy=False))]

    def eval_unary(self, node: cst.UnaryOperation) -> Value:
        value = self.eval(node.expression)
        if isinstance(node.operator, cst.Not):
            if isinstance(value, Uniform) and value.kind is not UniformKind.SIZE:
                return Uniform(UniformKind.SINGLE if value.kind is UniformKind.DIST else UniformKind.DIST)
            if _is_literal(const(value)):  # `not USE_FSDP2` with `USE_FSDP2 = True`
                return Const(not const(value))
            return versions.negate_fsdp_version(value) or ranks.negate_rank(value)
        if isinstance(node.operator, cst.Minus) and isinstance(const(value), (int, float)):
            return Const(-const(value))
        return UNKNOWN

    def eval_boolean(self, node: cst.BooleanOperation) -> Value:
        conjunction = isinstance(node.operator, cst.And)
        left = self.eval(node.left)
        if _is_literal(const(left)):  # `USE_FSDP2 and x`: Python decides on the left side alone
            return left if bool(const(left)) is not conjunction else self.eval(node.right)
        # In a distributed run `dist.is_initialized() and X` is X, and so is `not ... or X`.
        neutral = Uniform(UniformKind.DIST if conjunction else UniformKind.SINGLE)
        right = self.eval(node.right)
        if _is_literal(const(right)) and bool(const(right)) is not conjunction:
            return right  # `not enabled and self.monolith` with `monolith` False: false whatever the left side
        sides = [value for value in (left, right) if value != neutral]
        if len(sides) < 2:
            return sides[0] if sides else neutral
        kinds = {ranks.rank_kind(side) for side in sides} - {None}
        if not kinds:
            return UNKNOWN
        if isinstance(node.operator, cst.And):
            return RankDep(RankKind.ZERO_SUBSET if kinds & {RankKind.ZERO, RankKind.ZERO_SUBSET} else RankKind.SUBSET)
        return UNKNOWN

    def eval_comparison(self, node: cst.Comparison) -> Value:
        left = self.eval(node.left)
        result: Value = UNKNOWN
        for index, target in enumerate(node.comparisons):
            right = self.eval(target.comparator)
            if index == 0:
                operator = target.operator
                result = (
                    ranks.compare_world_size(left, operator, right)
                    or versions.compare_fsdp_version(left, operator, right)
                    or ranks.compare_rank(left, operator, right)
                )
                if len(node.comparisons) == 1:
                    result = _compare_constants(left, operator, right) if result is UNKNOWN else result
                    self.note_settings(node, left, right, result)
        return result

    def note_settings(self, node: cst.Comparison, left: Value, right: Value, result: Value) -> None:
        """Note the settings (attributes nothing is known of: ``cfg.mode``; attributes that hold
        what was stored on the object or a class default, a choice of constants) that an
        undecided comparison with a constant reads, for the arms of the test it is part of
        (:mod:`.settings`)."""
        self.comparisons += 1
        constant, setting = (right, left) if isinstance(right, Const) else (left, right)
        read = node.left if setting is left else node.comparisons[0].comparator
        unknown = tuple(
            slot_keys(Ref(option.root, option.path[:-1]), option.path[-1])[0]
            for option in options(setting)
            if isinstance(option, Ref) and option.path and not any(map(is_wildcard, option.path))
        )
        stored = tuple(slot for slot in self.slots_read.get(id(read), ()) if not any(map(is_wildcard, slot[1])))
        slots = unknown + stored
        if result is UNKNOWN and isinstance(constant, Const) and _is_literal(constant.value) and slots:
            self.settings_compared[id(node)] = (self.comparisons, slots, constant)
        else:
            self.settings_compared.pop(id(node), None)

    def eval_named(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value)
        return value

    def eval_await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    # --- iteration -----------------------------------------------------------------------------

    def element_of(self, value: Value, lazy: bool) -> Value:
        """What one iteration over ``value`` binds. Reading parameters through a loop or a list
        comprehension captures them now; a generator expression stays lazy."""
        results: list[Value] = []
        sequential = False
        for option in options(value):
            if isinstance(option, Params):
                param = Params(option.sources) if lazy else Params(option.materialized(self.now()).sources)
                results.append(Tuple((UNKNOWN, param)) if option.named else param)
            elif isinstance(option, ModuleIter):
                wildcard = self.loop_wildcard(ANY_DEPTH if option.self_included else ANY)
                module = Ref(
                    option.ref.root, option.ref.path + (wildcard,), option.order if option.self_included else None
                )
                results.append(Tuple((UNKNOWN, module)) if option.named else module)
            elif is_container(option):
                sequential = True
                results.extend(item for _, item in option.root.items)
                if not option.root.items and option.root.parent is not None:  # filled by another method
                    results.append(option.child(self.loop_wildcard(ANY)))
            elif isinstance(option, Ref):
                results.append(option.child(self.loop_wildcard(ANY)))
            elif isinstance(option, Tuple):
                sequential = True
                results.extend(option.items)
            elif isinstance(option, Iter):
                results.append(self._iter_element(option, lazy))
            else:
                results.append(UNKNOWN)
        return choice(results, sequential) if results else UNKNOWN

    def loop_wildcard(self, wildcard: str) -> str:
        self.loops_seen += 1
        return f"{wildcard}{self.loops_seen}"

    def _iter_element(self, value: Iter, lazy: bool) -> Value:
        if value.kind is IterKind.ENUMERATE:
            return Tuple((UNKNOWN, self.element_of(value.parts[0], lazy)))
        if value.kind is IterKind.ZIP:
            return Tuple(tuple(self.element_of(part, lazy) for part in value.parts))
        container = value.parts[0]
        if isinstance(container, (StateDict, Loaded)):  # its tensors: the state dict's values
            return container if value.kind is IterKind.VALUES else Tuple((UNKNOWN, container))
        if is_container(container):
            pairs = [Tuple((Const(key), item)) for key, item in container.root.items]
            if not pairs and container.root.parent is not None:  # filled by another method
                pairs.append(Tuple((UNKNOWN, container.child(self.loop_wildcard(ANY)))))
            return choice(pairs)
        return Tuple((UNKNOWN, UNKNOWN))


def literal_value(node: cst.Integer | cst.Float | cst.SimpleString) -> object:
    """What the literal evaluates to: libcst's ``evaluated_value``, which compiles its text
    (``ast.literal_eval``), for the spellings only that compiler reads; numbers, and strings without
    prefix or backslash, are read directly (``int(text, 0)`` reads integer literals as Python does)."""
    text = node.value
    if isinstance(node, cst.Integer):
        return int(text, 0)
    if isinstance(node, cst.Float):
        return float(text)
    if text[0] in "\"'" and "\\" not in text and "\r" not in text:
        quotes = 3 if text[:3] in ('"""', "'''") else 1
        return text[quotes:-quotes]
    return node.evaluated_value


def _string_expressions(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.FormattedString):
        return [part.expression for part in node.parts if isinstance(part, cst.FormattedStringExpression)]
    if isinstance(node, cst.ConcatenatedString):
        return _string_expressions(node.left) + _string_expressions(node.right)
    return []


_CONSTANT_COMPARISONS = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.Is: lambda a, b: a is b,
    cst.IsNot: lambda a, b: a is not b,
}


# Values that are never None: a state dict, parameters, what torch.load read, a tuple, a callable.
_NEVER_NONE = (StateDict, Params, Loaded, Tuple, Function, Class, BoundMethod, Partial, Lambda)


def _is_literal(value: object) -> bool:
    return isinstance(value, (bool, int, float, str, type(None)))


def _compare_constants(left: Value, operator: cst.BaseCompOp, right: Value) -> Value:
    """``2 == 1``, ``"fsdp2" != "fsdp1"``, ``None is None``: known when both sides are literals;
    ``state is None`` is False when ``state`` holds a value that is never None (a state dict a
    caller passed in)."""
    if isinstance(operator, (cst.Is, cst.IsNot)) and Const(None) in (left, right):
        other = right if left == Const(None) else left
        if all(isinstance(option, _NEVER_NONE) for option in options(other)):
            return Const(isinstance(operator, cst.IsNot))
    compare = _CONSTANT_COMPARISONS.get(type(operator))
    if compare is None:
        return UNKNOWN
    # A choice of constants compares as each of them (`mode` is None, "full" or what a test proved).
    results = {
        compare(a, b) if _is_literal(a) and _is_literal(b) else UNKNOWN
        for a in map(const, options(left))
        for b in map(const, options(right))
    }
    return Const(results.pop()) if len(results) == 1 and UNKNOWN not in results else UNKNOWN


def _builds_objects(element: Value) -> bool:
    """Does a generator yield objects built for each item (`Block(d) for _ in range(n)`)? Given to
    `nn.ModuleList(...)` it holds them like the list comprehension it stands for."""
    found = list(options(element))
    return bool(found) and all(
        isinstance(option, Ref) and not option.path and option.root.kind is ObjKind.NEW and option.root.node is not None
        for option in found
    )


_ELEMENTWISE = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)


def _tensor_arithmetic(operator: cst.BaseBinaryOp, left: Value, right: Value) -> Value:
    """``ema_v * decay + (1 - decay) * model_v``: elementwise arithmetic of parameters (or state
    dict tensors) with each other or with numbers is a tensor of the same kind (a DTensor while
    one operand is one), so the result stands for its tensor operands; anything else is unknown."""
    if not isinstance(operator, _ELEMENTWISE):
        return UNKNOWN
    tensors = [option for option in (left, right) if isinstance(option, (Params, StateDict))]
    others = [option for option in (left, right) if not isinstance(option, (Params, StateDict))]
    if not tensors or any(option != UNKNOWN and not isinstance(const(option), (int, float)) for option in others):
        return UNKNOWN
    return choice(tensors)
