"""The abstract interpreter: generic Python evaluation of one parsed module into the runs of its
entry points (:class:`~.state.EntryRun`), over the abstract values of :mod:`fsdp2_lint.analysis.model`.

It executes statements in source order: both arms of an ``if`` run, each on its own copy of the
variables, and are joined afterwards (:mod:`.flow`, with what each test establishes from
:mod:`.guards`); loop bodies run once with the loop variable bound to "an element" of the
iterable; calls of functions, classes and methods defined in the same file are expanded in place
with their arguments bound, so their events land in the caller's trace in execution order. What a
call of anything else (torch, the launch environment) does comes from :mod:`.torch_api`.
Everything it does not understand evaluates to ``UNKNOWN``, which no rule reports on: precision
before recall.

Expansion is bounded, so that a file of many mutually calling helpers costs time linear in its
number of functions instead of exponential in the call depth: each entry point (the module body,
and each function analysed on its own) expands at most ``MAX_EXPANSIONS_PER_ENTRY`` calls, and no
call is expanded once the file has run ``MAX_STEPS`` statements. A call past a bound is analysed
like a call to a function of another file (its events are not in the caller's trace), and a
function no call expanded is still analysed as an entry point of its own.
"""

from __future__ import annotations

import builtins
import re

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter import flow, guards, torch_api
from fsdp2_lint.analysis.interpreter.state import (
    TERMINATED,
    Continuation,
    EntryRun,
    Env,
    Frame,
    Slot,
    adopt,
    slot_keys,
)
from fsdp2_lint.analysis.model import (
    ANY,
    ANY_DEPTH,
    UNKNOWN,
    UNKNOWN_KEYWORDS,
    BoundMethod,
    Choice,
    Class,
    ClassInfo,
    Const,
    Context,
    Derived,
    Event,
    Function,
    FunctionInfo,
    Iter,
    Lambda,
    Loaded,
    ModuleIter,
    Obj,
    Params,
    Partial,
    RankDep,
    Ref,
    StateDict,
    Super,
    Symbol,
    Tuple,
    Uniform,
    Value,
    canonical,
    choice,
    const,
    container_items,
    elements,
    is_container,
    key_element,
    options,
    refs,
)
from fsdp2_lint.analysis.syntax import child_nodes, dotted, statements

MAX_CALL_DEPTH = 8
MAX_RECURSION = 2  # a recursive function is expanded one level deep (children, then the module)
MAX_EXPANSIONS_PER_ENTRY = 512  # same-file calls expanded per entry point (FSDP2 repositories need 496 at most)
MAX_STEPS = 200_000  # statements interpreted per file before same-file calls stop being expanded
BUILTIN_NAMES = frozenset(dir(builtins))
CONSTANT_NAMES = {"True": True, "False": False, "None": None}
PROPERTIES = frozenset({"property", "cached_property"})  # methods that run when the attribute is read
CALLED_NAME = re.compile(rb"(?<!def )(?<!class )\b([A-Za-z_]\w*)\s*\(")


class Interpreter:
    def __init__(self, module: cst.Module, source: bytes) -> None:
        self.module = module
        self.source = source
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self.classes: dict[cst.ClassDef, ClassInfo] = {}
        self.class_objs: dict[ClassInfo, Obj] = {}
        self.decorators: dict[FunctionInfo, tuple[Value, ...]] = {}
        self._collect(statements(module), None)
        self.events: list[Event] = []
        self.heap: dict[Slot, Value] = {}
        self.ctx = Context()
        self.frame = Frame(Env())
        self.module_env = self.frame.env
        self.star_imports: list[str] = []
        self.free_names: dict[str, Value] = {}
        self.active: list[FunctionInfo] = []
        self.active_lambdas: list[cst.Lambda] = []
        self.invoked: set[FunctionInfo] = set()
        self.steps = 0
        self.entry_expansions = 0  # calls the current entry point expanded
        self.loops_seen = 0

    # --- entry points ------------------------------------------------------------------------

    def run(self) -> list[EntryRun]:
        """Run the module body, then each function no run has expanded (those the file never
        calls first), each from the heap the module body left."""
        self.exec_block(statements(self.module))
        runs = [EntryRun("<module>", self.events)]
        module_heap = self.heap
        called = {match.decode() for match in CALLED_NAME.findall(self.source)}
        functions = list(self.functions.values())
        uncalled = [info for info in functions if not self._called(info, called)]
        for info in uncalled + [info for info in functions if info not in uncalled]:
            if info not in self.invoked:
                runs.append(self._run_root(info, module_heap))
        return runs

    @staticmethod
    def _called(info: FunctionInfo, called: set[str]) -> bool:
        if info.name == "__init__" and info.cls is not None:
            return info.cls.name in called
        if info.name in ("forward", "__call__"):
            return False  # reached through `module(...)`, which the file may never do
        return info.name in called

    def _run_root(self, info: FunctionInfo, module_heap: dict) -> EntryRun:
        self.events, self.heap, self.ctx = [], dict(module_heap), Context()
        self.entry_expansions = 0
        self.frame = Frame(self.module_env)
        instance = Ref(Obj("self", "self", cls=info.cls)) if info.cls and not self._is_static(info) else None
        init = info.cls.method("__init__") if info.cls else None
        if init is None and info.cls is not None and _is_dataclass(info.cls):
            init = info.cls.method("__post_init__")
        if instance is not None and init is not None and init is not info:
            self.call_function(Function(init, self.module_env, instance), (), {}, None, symbolic=True)
        if instance is not None and info.name in ("forward", "__call__"):  # runs through `module(...)`
            self.ctx = self.ctx.with_(forward_of=(instance,))
        self.call_function(Function(info, self.module_env, instance), (), {}, None, symbolic=True)
        return EntryRun(info.qualname, self.events, instance=instance)

    def _collect(self, body: list[cst.CSTNode], cls: ClassInfo | None) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                info = FunctionInfo(stmt, cls)
                self.functions[stmt] = info
                if cls is not None and not _decorator_names(info) & {"setter", "deleter"}:
                    cls.methods[info.name] = info  # a property's setter keeps its getter
                self._collect(statements(stmt.body), None)
            elif isinstance(stmt, cst.ClassDef):
                info_cls = ClassInfo(stmt)
                self.classes[stmt] = info_cls
                self._collect(statements(stmt.body), info_cls)
            elif isinstance(stmt, cst.BaseCompoundStatement):
                for block in _blocks(stmt):
                    self._collect(statements(block), cls)

    # --- events ------------------------------------------------------------------------------

    def now(self) -> int:
        """The index of the latest event: what happens now happens after it."""
        return len(self.events) - 1

    def record(self, kind: str, node: cst.CSTNode, **fields: object) -> Event:
        event = Event(len(self.events), kind, node, self.frame.stack, self.ctx, **fields)
        self.events.append(event)
        return event

    # --- statements --------------------------------------------------------------------------

    def exec_block(self, body: list[cst.CSTNode], exits: list[Continuation] | None = None) -> bool:
        """Run the statements; True when they always exit. ``exits`` collects the ``if``s that exit
        early on some paths, for an enclosing ``if`` to carry past its end."""
        saved = self.ctx
        try:
            for stmt in body:
                outcome = self.exec_stmt(stmt)
                if outcome is TERMINATED:
                    return True
                if isinstance(outcome, Continuation):  # after `if ...: return`, the rest is the other arm
                    self.ctx = self.ctx.with_(
                        branches=self.ctx.branches + outcome.arms,
                        rank_guard=outcome.rank_guard or self.ctx.rank_guard,
                        not_fsdp2=self.ctx.not_fsdp2 + outcome.not_fsdp2,
                        dtensor_tested=self.ctx.dtensor_tested + outcome.dtensor_tested,
                    )
                    if exits is not None:
                        exits.append(outcome)
            return False
        finally:
            self.ctx = saved

    def exec_stmt(self, stmt: cst.CSTNode) -> object:
        self.steps += 1
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                if self.exec_small(small) is TERMINATED:
                    return TERMINATED
            return None
        handler = _STATEMENTS.get(type(stmt))
        return handler(self, stmt) if handler else None

    def exec_small(self, node: cst.BaseSmallStatement) -> object:
        if isinstance(node, cst.Expr):
            self.eval(node.value)
        elif isinstance(node, cst.Assign):
            value = self.eval(node.value)
            for target in node.targets:
                self.assign(target.target, value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value))
        elif isinstance(node, cst.AugAssign):
            self.exec_augassign(node)
        elif isinstance(node, cst.Return):
            value = self.eval(node.value) if node.value is not None else Const(None)
            self.frame.returns.append(value)
            self.record("return", node, result=value)
            return TERMINATED
        elif isinstance(node, cst.Raise):
            if node.exc is not None:
                self.eval(node.exc)
            return TERMINATED
        elif isinstance(node, (cst.Continue, cst.Break)):
            return TERMINATED
        elif isinstance(node, cst.Import):
            self.exec_import(node)
        elif isinstance(node, cst.ImportFrom):
            self.exec_import_from(node)
        elif isinstance(node, cst.Global):
            self.frame.global_names.update(item.name.value for item in node.names)
        elif isinstance(node, cst.Assert):
            self.eval(node.test)
        return None

    def exec_import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted(alias.name)
            if alias.asname is not None:
                self.bind(alias.asname.name.value, Symbol(apis.canonical(module)))
            else:
                top = module.split(".")[0]
                self.bind(top, Symbol(top))

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        module = "." * len(node.relative) + (dotted(node.module) if node.module else "")
        if isinstance(node.names, cst.ImportStar):
            self.star_imports.append(apis.canonical(module))
            return
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            self.bind(local, Symbol(apis.canonical(f"{module}.{name}")))

    def exec_function_def(self, node: cst.FunctionDef) -> None:
        info = self.functions[node]
        self.decorators[info] = tuple(self.eval(decorator.decorator) for decorator in node.decorators)
        self.bind(info.name, Function(info, self.frame.env))

    def exec_class_def(self, node: cst.ClassDef) -> None:
        info = self.classes[node]
        info.bases = tuple(self.eval(arg.value) for arg in node.bases if arg.keyword is None)
        namespace = self.class_namespace(info)
        for stmt in statements(node.body):
            if isinstance(stmt, cst.FunctionDef):
                method = self.functions[stmt]
                self.decorators[method] = tuple(self.eval(d.decorator) for d in stmt.decorators)
            elif isinstance(stmt, cst.SimpleStatementLine):  # class attributes: `options = StateDictOptions(...)`
                outer = self.frame.env
                self.frame.env = Env(outer)
                try:
                    for small in stmt.body:
                        if isinstance(small, (cst.Assign, cst.AnnAssign)):
                            self.exec_small(small)
                    for name, value in self.frame.env.vars.items():
                        self.heap[(id(namespace), (name,))] = value
                finally:
                    self.frame.env = outer
        self.bind(info.name, Class(info))

    def class_namespace(self, info: ClassInfo) -> Obj:
        """The object that holds a class's attributes (what its body assigns, ``Cls.x = ...``)."""
        if info not in self.class_objs:
            self.class_objs[info] = Obj("class", info.name)
        return self.class_objs[info]

    def class_attribute(self, info: ClassInfo, name: str) -> Value | None:
        for cls in info.mro():
            value = self.heap.get((id(self.class_namespace(cls)), (name,)))
            if value is not None:
                return value
        return None

    def exec_for(self, node: cst.For) -> None:
        element = self.element_of(self.eval(node.iter), lazy=False)
        self.assign(node.target, element)
        self.loop_body(node, node.body, node.orelse)

    def loop_body(self, node: cst.CSTNode, body: cst.BaseSuite, orelse: cst.Else | None) -> None:
        outer = self.ctx
        self.ctx = outer.with_(loops=outer.loops + (node,))
        self.exec_block(statements(body))
        self.ctx = outer
        if orelse is not None:
            self.exec_block(statements(orelse.body))

    def exec_with(self, node: cst.With) -> object:
        outer = self.ctx
        ctx = outer
        for item in node.items:
            value = self.eval(item.item)
            if item.asname is not None:
                self.assign(item.asname.name, value)
            ctx = torch_api.enter(ctx, value)
        self.ctx = ctx
        done = self.exec_block(statements(node.body))
        self.ctx = outer
        return TERMINATED if done else None

    def exec_try(self, node: cst.Try | cst.TryStar) -> None:
        self.exec_block(statements(node.body))
        outer = self.ctx
        for arm, handler in enumerate(node.handlers, start=1):
            self.ctx = outer.with_(branches=outer.branches + ((id(node), arm),))
            if handler.type is not None:
                self.eval(handler.type)
            if handler.name is not None:
                self.assign(handler.name.name, UNKNOWN)
            self.exec_block(statements(handler.body))
        self.ctx = outer
        for block in (node.orelse, node.finalbody):
            if block is not None:
                self.exec_block(statements(block.body))

    def exec_match(self, node: cst.Match) -> None:
        self.eval(node.subject)
        outer = self.ctx
        for arm, case in enumerate(node.cases):
            self.ctx = outer.with_(branches=outer.branches + ((id(node), arm),))
            self.exec_block(statements(case.body))
        self.ctx = outer

    def exec_augassign(self, node: cst.AugAssign) -> None:
        current = self.eval(node.target)
        value = self.eval(node.value)
        self.record("inplace", node, receiver=current, args=(value,))
        for option in options(current):
            if isinstance(option, Ref) and option.root.kind == "container":
                option.root.items.extend((None, item) for item in elements(value))
        if isinstance(node.target, cst.Name) and isinstance(current, Params) and isinstance(value, Params):
            self.bind(node.target.value, current | value)
        derived = torch_api.derived_from((current, value), {})
        if isinstance(node.target, cst.Name) and derived is not None:  # total += g.pow(2).sum()
            self.bind(node.target.value, derived)

    # --- binding -----------------------------------------------------------------------------

    def bind(self, name: str, value: Value) -> None:
        env = self.module_env if name in self.frame.global_names else self.frame.env
        env.vars[name] = value

    def assign(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            _name_unnamed(value, target.value)
            self.bind(target.value, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            items = [element.value for element in target.elements]
            parts = _unpack(value, len(items))
            for item, part in zip(items, parts, strict=True):
                self.assign(item.value if isinstance(item, cst.StarredElement) else item, part)
        elif isinstance(target, cst.Attribute):
            self.store(self.eval(target.value), target.attr.value, value, target)
        elif isinstance(target, cst.Subscript):
            base = self.eval(target.value)
            key = self.subscript_key(target)
            for option in options(base):
                if isinstance(option, Ref) and option.root.kind == "container" and not option.path:
                    option.root.items.append((key, value))
            self.store(base, key_element(key), value, target)
        elif isinstance(target, cst.StarredElement):
            self.assign(target.value, UNKNOWN)

    def store(self, owner: Value, element: str, value: Value, node: cst.CSTNode) -> None:
        self.record("store", node, receiver=owner, name=element, args=(value,))
        for option in options(owner):
            if isinstance(option, Class):  # `Registry.model = model`
                self.heap[(id(self.class_namespace(option.info)), (element,))] = value
        for ref in refs(owner):
            if is_container(ref):
                if ref.root.parent is not None:  # `self.models[role] = module`: the module is self.models[role]
                    adopt(ref.child(element), value)
                continue
            slot = canonical(ref).child(element)
            self.heap[(id(slot.root), slot.path)] = value
            adopt(slot, value)

    # --- expressions -------------------------------------------------------------------------

    def eval(self, node: cst.BaseExpression | None) -> Value:
        if node is None:
            return UNKNOWN
        handler = _EXPRESSIONS.get(type(node))
        if handler is not None:
            return handler(self, node)
        for child in child_nodes(node):  # anything else: still run the calls inside it
            if isinstance(child, cst.BaseExpression):
                self.eval(child)
        return UNKNOWN

    def eval_name(self, node: cst.Name) -> Value:
        name = node.value
        if name in CONSTANT_NAMES:
            return Const(CONSTANT_NAMES[name])
        value = self.frame.env.lookup(name)
        if value is None:
            value = self.unbound(name)
        return torch_api.rank_by_name(name, value)

    def unbound(self, name: str) -> Value:
        for module in self.star_imports:
            if name in apis.STAR_EXPORTS.get(module, ()):
                return Symbol(f"{module}.{name}")
        if name in BUILTIN_NAMES:
            return Symbol(f"builtins.{name}")
        # Defined where the file cannot show (a star import, exec, a notebook cell): still one
        # object, so that every mention of the name agrees.
        if name not in self.free_names:
            self.free_names[name] = Ref(Obj("param", name))
        return self.free_names[name]

    def eval_attribute(self, node: cst.Attribute) -> Value:
        value = self.attribute(self.eval(node.value), node.attr.value, node)
        if isinstance(value, RankDep) and torch_api.LOW_RANK_OWNER.search(self.module.code_for_node(node.value)):
            return UNKNOWN
        return value

    def attribute(self, base: Value, name: str, node: cst.CSTNode) -> Value:
        results: list[Value] = []
        for option in options(base):
            if isinstance(option, Symbol):
                results.append(Symbol(apis.canonical(f"{option.qname}.{name}")))
            elif isinstance(option, Ref):
                results.append(self.ref_attribute(option, name, node))
            elif isinstance(option, Class):
                method = option.info.method(name)
                attribute = None if method else self.class_attribute(option.info, name)
                results.append(Function(method, self.module_env) if method else attribute or UNKNOWN)
            elif isinstance(option, Super):
                results.append(BoundMethod(option, name))
            else:
                results.append(torch_api.value_attribute(option, name))
        value = choice(results)
        if any(isinstance(option, Ref) for option in options(base)):
            self.record("attr", node, receiver=base, name=name, result=value)
        return value

    def ref_attribute(self, ref: Ref, name: str, node: cst.CSTNode) -> Value:
        wrapped = torch_api.wrapped_module(ref, name)
        if wrapped is not None:
            return wrapped
        stored = self.stored_attribute((ref,), name)
        if stored is not None:
            return stored
        cls = ref.root.cls if not ref.path else None
        method = cls.method(name) if cls else None
        if method is not None and _decorator_names(method) & PROPERTIES:
            return self.call_function(Function(method, self.module_env, ref), (), {}, node) or UNKNOWN
        if method is not None:
            return Function(method, self.module_env, ref)
        attribute = self.class_attribute(cls, name) if cls else None
        if attribute is not None:
            return attribute
        if name in torch_api.MODULE_METHOD_NAMES or ref.root.kind == "container":
            return BoundMethod(ref, name)
        return torch_api.rank_by_name(name, ref.child(name))

    def eval_subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        element = node.slice[0].slice if node.slice else None
        if not isinstance(element, cst.Index):
            for part in node.slice:
                self.eval_children(part.slice)
            return base  # a slice of a container is the same kind of container
        key_value = self.eval(element.value)
        key = const(key_value)
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

    def eval_children(self, node: cst.CSTNode) -> None:
        for child in child_nodes(node):
            if isinstance(child, cst.BaseExpression):
                self.eval(child)
            else:
                self.eval_children(child)

    def eval_literal(self, node: cst.BaseExpression) -> Value:
        try:
            return Const(node.evaluated_value)  # type: ignore[attr-defined]
        except Exception:  # libcst cannot evaluate every literal (e.g. some escapes)
            return UNKNOWN

    def eval_string(self, node: cst.BaseExpression) -> Value:
        parts: list[Value] = []
        for child in _string_expressions(node):
            parts.append(self.eval(child))
        if any(isinstance(part, RankDep) for part in parts):
            return RankDep("mixed")
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
                    items.extend((None, item) for item in elements(self.eval(element.value)))
        else:
            for element in node.elements:
                value = self.eval(element.value)
                if isinstance(element, cst.StarredElement):
                    items.extend((None, item) for item in elements(value))
                else:
                    items.append((None, value))
        if isinstance(node, cst.Tuple):
            return Tuple(tuple(value for _, value in items))
        container = Obj("container", None, node=node)
        container.items = items
        return Ref(container)

    def eval_comprehension(self, node: cst.BaseComp) -> Value:
        outer, outer_ctx = self.frame.env, self.ctx
        self.frame.env = Env(outer)
        lazy = isinstance(node, cst.GeneratorExp)
        for_in: cst.CompFor | None = node.for_in
        try:
            while for_in is not None:
                self.assign(for_in.target, self.element_of(self.eval(for_in.iter), lazy=lazy))
                for condition in for_in.ifs:
                    flow.comprehension_condition(self, condition.test)
                for_in = for_in.inner_for_in
            if isinstance(node, cst.DictComp):
                self.eval(node.key)
                element = self.eval(node.value)
            else:
                element = self.eval(node.elt)
        finally:
            self.frame.env, self.ctx = outer, outer_ctx
        if lazy:  # a generator of parameters or of gradient-derived tensors is still one
            return element if isinstance(element, (Params, Derived)) else UNKNOWN
        container = Obj("container", None, node=node)
        container.items = [(None, element)]
        return Ref(container)

    def eval_binary(self, node: cst.BinaryOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(left, RankDep) or isinstance(right, RankDep):
            return RankDep("mixed")
        if isinstance(left, Params) and isinstance(right, Params):
            return left | right
        derived = torch_api.derived_from((left, right), {})
        if derived is not None:
            return derived
        if isinstance(node.operator, cst.Add):
            left_items, right_items = container_items(left), container_items(right)
            if (left_items is None) != (right_items is None):  # [model] + list(model.layers)
                left_items = left_items if left_items is not None else self._iterated(left)
                right_items = right_items if right_items is not None else self._iterated(right)
            if left_items is not None and right_items is not None:
                container = Obj("container", None, node=node)
                container.items = left_items + right_items
                return Ref(container)
        return UNKNOWN

    def _iterated(self, value: Value) -> list[tuple[object, Value]] | None:
        """The elements of an iterable that is not a literal container, as container items."""
        if not any(isinstance(option, (ModuleIter, Params)) for option in options(value)):
            return None
        return [(None, self.element_of(value, lazy=False))]

    def eval_unary(self, node: cst.UnaryOperation) -> Value:
        value = self.eval(node.expression)
        if isinstance(node.operator, cst.Not):
            if isinstance(value, Uniform) and value.kind != "size":
                return Uniform("single" if value.kind == "dist" else "dist")
            return guards.negate_rank(value)
        if isinstance(node.operator, cst.Minus) and isinstance(const(value), (int, float)):
            return Const(-const(value))
        return UNKNOWN

    def eval_boolean(self, node: cst.BooleanOperation) -> Value:
        conjunction = isinstance(node.operator, cst.And)
        # In a distributed run `dist.is_initialized() and X` is X, and so is `not ... or X`.
        neutral = Uniform("dist" if conjunction else "single")
        sides = [value for value in (self.eval(node.left), self.eval(node.right)) if value != neutral]
        if len(sides) < 2:
            return sides[0] if sides else neutral
        kinds = {guards.rank_kind(side) for side in sides} - {None}
        if not kinds:
            return UNKNOWN
        if isinstance(node.operator, cst.And):
            return RankDep("zero_subset" if kinds & {"zero", "zero_subset"} else "subset")
        return UNKNOWN

    def eval_comparison(self, node: cst.Comparison) -> Value:
        left = self.eval(node.left)
        result: Value = UNKNOWN
        for index, target in enumerate(node.comparisons):
            right = self.eval(target.comparator)
            if index == 0:
                operator = target.operator
                result = guards.compare_world_size(left, operator, right) or guards.compare_rank(left, operator, right)
                if result is UNKNOWN and len(node.comparisons) == 1:
                    result = _compare_constants(left, operator, right)
        return result

    def eval_named(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value)
        return value

    def eval_await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    # --- calls -------------------------------------------------------------------------------

    def eval_call(self, node: cst.Call) -> Value:
        if isinstance(node.func, cst.Attribute):
            receiver = self.eval(node.func.value)
            args, kwargs = self.eval_args(node)
            return self.call_method(receiver, node.func.attr.value, args, kwargs, node)
        callee = self.eval(node.func)
        args, kwargs = self.eval_args(node)
        return self.alternatives(callee, node, lambda option: self.call_value(option, args, kwargs, node))

    def alternatives(self, value: Value, node: cst.Call, call) -> Value:
        """``call`` on each option of ``value``. Exclusive options (one object or another, not a
        loop's elements one after the other) run in exclusive branches: calling
        ``STRATEGIES.get(name, default).parallelize(model)`` runs one strategy, not all in turn."""
        opts = options(value)
        if not (isinstance(value, Choice) and not value.sequential and len(opts) > 1):
            return choice([call(option) for option in opts])
        outer, results = self.ctx, []
        for index, option in enumerate(opts):
            self.ctx = outer.with_(branches=outer.branches + ((id(node), index),))
            try:
                results.append(call(option))
            finally:
                self.ctx = outer
        return choice(results)

    def eval_args(self, node: cst.Call) -> tuple[tuple[Value, ...], dict[str, Value]]:
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        for arg in node.args:
            value = self.eval(arg.value)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif arg.star == "*":
                args.extend(elements(value) if isinstance(value, Tuple) else [UNKNOWN])
            elif arg.star == "**":  # fully_shard(block, **fsdp_kwargs) with a literal dict
                items = container_items(value)
                if items is None:
                    kwargs[UNKNOWN_KEYWORDS] = value  # keywords we cannot name
                for key, item in items or ():
                    if isinstance(key, str):
                        kwargs[key] = item
            else:
                args.append(value)
        return tuple(args), kwargs

    def call_value(self, callee: Value, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        if isinstance(callee, Symbol):
            return self.call_symbol(callee.qname, args, kwargs, node)
        if isinstance(callee, Function):
            return self.call_defined(callee, args, kwargs, node)
        if isinstance(callee, Class):
            return self.construct(callee.info, args, kwargs, node)
        if isinstance(callee, BoundMethod):
            return self.call_method(callee.receiver, callee.name, args, kwargs, node, attribute_read=True)
        if isinstance(callee, Ref):
            return self.invoke(callee, args, kwargs, node)
        if isinstance(callee, (RankDep, Uniform)):  # a flag whose definition we cannot see, called: is_main()
            return callee
        if isinstance(callee, Partial):
            return choice(
                [
                    self.call_value(option, callee.args + args, {**dict(callee.kwargs), **kwargs}, node)
                    for option in options(callee.func)
                ]
            )
        if isinstance(callee, Lambda):
            return self.call_lambda(callee, args, kwargs)
        event = self.record("call", node, name=dotted(node.func) or None, args=args, kwargs=kwargs)
        return self.new_object(event, None)

    def call_lambda(self, fn: Lambda, args: tuple, kwargs: dict) -> Value:
        """Evaluate a lambda's body with its parameters bound, in the scope it was written in."""
        depth = len(self.active) + len(self.active_lambdas)
        if fn.node in self.active_lambdas or depth >= MAX_CALL_DEPTH or not self.within_budget():
            return UNKNOWN
        params = fn.node.params
        positional = list(params.posonly_params) + list(params.params)
        variables: dict[str, Value] = {}
        for index, param in enumerate(positional):
            name = param.name.value
            variables[name] = args[index] if index < len(args) else kwargs.get(name, UNKNOWN)
        for param in params.kwonly_params:
            variables[param.name.value] = kwargs.get(param.name.value, UNKNOWN)
        outer = self.frame.env
        self.frame.env = Env(fn.closure if isinstance(fn.closure, Env) else self.module_env, variables)
        self.active_lambdas.append(fn.node)
        try:
            return self.eval(fn.node.body)
        finally:
            self.frame.env = outer
            self.active_lambdas.pop()

    def call_defined(self, fn: Function, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        """Call a same-file function. A bound one (``step = model.forward; step(x)``) is a method call."""
        event = None
        if fn.bound is not None:
            event = self.record("method", node, name=fn.info.name, receiver=fn.bound, args=args, kwargs=kwargs)
        result = self.call_function(fn, args, kwargs, node)
        if result is None:
            if event is None:
                self.record("call", node, name=fn.info.name, args=args, kwargs=kwargs)
            result = UNKNOWN
        if event is not None:
            event.result = result
        return result

    def new_object(self, event: Event, qname: str | None) -> Value:
        obj = Obj("new", None, qname=qname, node=event.node)
        obj.event = event
        event.result = Ref(obj)
        return event.result

    def call_symbol(self, qname: str, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        if qname.startswith("builtins."):
            result = self.call_builtin(qname[9:], args, kwargs, node)
            if result is not None:
                return result
        event = self.record("call", node, qname=qname, name=qname.rpartition(".")[2], args=args, kwargs=kwargs)
        event.result = torch_api.call_symbol(self, event)
        return event.result

    def call_builtin(self, name: str, args: tuple, kwargs: dict, node: cst.Call) -> Value | None:
        first = args[0] if args else UNKNOWN
        if name in ("list", "tuple", "set", "sorted", "frozenset", "dict"):
            if args:
                return self.materialize(first, node)
            container = Obj("container", None, node=node)
            container.items = list(kwargs.items())  # dict(mesh=mesh, ...)
            return Ref(container)
        if name == "filter" and len(args) == 2 and any(isinstance(o, ModuleIter) for o in options(args[1])):
            return flow.filtered_modules(self, first, args[1], node)
        if name in ("iter", "filter") and args:
            return args[-1] if name == "filter" else first
        if name == "next":
            return self.element_of(first, lazy=False)
        if name == "map" and len(args) >= 2:  # run once on an element of each iterable
            elements = tuple(self.element_of(arg, lazy=False) for arg in args[1:])
            container = Obj("container", None, node=node)
            container.items = [(None, choice([self.call_value(f, elements, {}, node) for f in options(first)]))]
            return Ref(container)
        if name == "reversed":
            return choice([_reversed(option) for option in options(first)])
        if name in ("enumerate", "zip"):
            return Iter(name, args[:1] if name == "enumerate" else args)
        attributes = [const(option) for option in options(args[1])] if len(args) >= 2 else []
        if name == "getattr" and attributes and all(isinstance(attribute, str) for attribute in attributes):
            # getattr(self, name) for name in ("actor", "critic"): one of those attributes
            value = choice([self.attribute(args[0], attribute, node) for attribute in attributes])
            return choice([value, args[2]]) if len(args) > 2 else value
        if name == "getattr" and len(args) >= 2 and isinstance(first, Symbol):
            return Symbol(f"{first.qname}.{ANY}")  # getattr(torch.optim, cfg.name): some member
        if name == "setattr" and len(args) == 3 and isinstance(const(args[1]), str):
            self.store(args[0], const(args[1]), args[2], node)
            return Const(None)
        if name == "super":
            frame = self.frame
            return Super(frame.self_ref, frame.cls) if frame.self_ref and frame.cls else UNKNOWN
        if name == "int" and isinstance(first, (RankDep, Uniform)):
            return first
        return None

    def materialize(self, value: Value, node: cst.CSTNode) -> Value:
        results = []
        for option in options(value):
            if isinstance(option, Params):
                results.append(option.materialized(self.now()))
            elif isinstance(option, Ref) and option.root.kind == "container" and not option.path:
                copy = Obj("container", None, node=node)
                copy.items = list(option.root.items)
                results.append(Ref(copy))
            elif isinstance(option, Ref):
                results.append(ModuleIter(option, self_included=False, named=False))
            elif isinstance(option, (ModuleIter, Tuple, StateDict)):
                results.append(option)
            else:
                container = Obj("container", None, node=node)
                element = self.element_of(option, lazy=False)
                container.items = [] if element is UNKNOWN else [(None, element)]
                results.append(Ref(container))
        return choice(results)

    def call_method(
        self, receiver: Value, name: str, args: tuple, kwargs: dict, node: cst.Call, attribute_read: bool = False
    ) -> Value:
        """``receiver.name(...)``. ``attribute_read``: the attribute was already read (a bound
        method value), so what it holds must not be looked up again."""
        opts = options(receiver)
        if opts and all(isinstance(option, Symbol) for option in opts):
            return choice([self.call_symbol(apis.canonical(f"{o.qname}.{name}"), args, kwargs, node) for o in opts])
        stored = None if attribute_read else self.stored_attribute(opts, name)
        if stored is not None:  # `self.model(x)`: call what the attribute holds
            return self.alternatives(stored, node, lambda option: self.call_value(option, args, kwargs, node))
        event = self.record("method", node, name=name, receiver=receiver, args=args, kwargs=kwargs)
        event.result = self.alternatives(
            receiver, node, lambda option: self.method_of(option, name, args, kwargs, event)
        )
        if event.result is UNKNOWN and torch_api.rank_dependent((receiver, *args), kwargs):  # "{}.pt".format(rank)
            event.result = RankDep("mixed")
        return event.result

    def stored_attribute(self, receivers: tuple[Value, ...], name: str) -> Value | None:
        """The value assigned to ``receiver.name``, when every receiver has one."""
        stored = []
        for receiver in receivers:
            if not isinstance(receiver, Ref):
                return None
            value = next((self.heap[key] for key in slot_keys(receiver, name) if key in self.heap), None)
            if value is None:
                return None
            stored.append(value)
        return choice(stored) if stored else None

    def method_of(self, receiver: Value, name: str, args: tuple, kwargs: dict, event: Event) -> Value:
        node = event.node
        if isinstance(receiver, Ref):
            cls = receiver.root.cls if not receiver.path else None
            method = cls.method(name) if cls else None
            if method is not None:
                return self.call_function(Function(method, self.module_env, receiver), args, kwargs, node) or UNKNOWN
            if receiver.root.kind == "container" and not receiver.path:
                return self.container_method(receiver, name, args)
            if receiver.root.kind == "optimizer" and not receiver.path:
                found = torch_api.optimizer_method(self, receiver, name, event)
                if found is not None:
                    return found
            return torch_api.module_method(self, receiver, name, event)
        if isinstance(receiver, Super):
            method = _super_method(receiver, name)
            if method is not None:
                bound = Function(method, self.module_env, receiver.receiver)
                return self.call_function(bound, args, kwargs, node) or UNKNOWN
            return UNKNOWN
        if isinstance(receiver, Class):
            method = receiver.info.method(name)
            if method is None:
                return UNKNOWN
            return self.call_function(Function(method, self.module_env), args, kwargs, node) or UNKNOWN
        return torch_api.value_method(receiver, name, event)

    def container_method(self, receiver: Ref, name: str, args: tuple) -> Value:
        items = receiver.root.items
        if name == "get" and args:  # the value under the key, or under an unknown one, or the default
            key = const(args[0])
            return self.container_item(
                receiver, None if key is NotImplemented else key, args[1] if len(args) > 1 else Const(None)
            )
        if name in ("append", "add", "insert") and args:
            items.append((None, args[-1]))
        elif name in ("extend", "update") and args:
            items.extend((None, item) for item in elements(args[0]))
        elif name in ("items", "values"):
            return Iter("items", (receiver,)) if name == "items" else receiver
        elif name == "copy":
            return receiver
        return UNKNOWN

    def invoke(self, ref: Ref, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        event = self.record("invoke", node, receiver=ref, args=args, kwargs=kwargs)
        event.result = self.invoke_forward(ref, args, event)
        return event.result

    def invoke_forward(self, ref: Ref, args: tuple, event: Event) -> Value:
        cls = ref.root.cls if not ref.path else None
        method = cls and (cls.method("__call__") or cls.method("forward"))
        if method is None:
            return self.new_object(event, None)
        outer = self.ctx
        self.ctx = outer.with_(forward_of=outer.forward_of + (canonical(ref),))
        result = self.call_function(Function(method, self.module_env, ref), args, dict(event.kwargs), event.node)
        self.ctx = outer
        return result if result is not None else self.new_object(event, None)

    def construct(self, info: ClassInfo, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        event = self.record("call", node, name=info.name, args=args, kwargs=kwargs)
        if any(apis.is_optimizer(base) for base in info.external_bases()):
            instance = torch_api.new_optimizer(self, event, event.arg(0, "params"), None)
            instance.root.cls = info  # type: ignore[union-attr]
        else:
            obj = Obj("new", None, cls=info, node=node)
            obj.event = event
            instance = Ref(obj)
        init = info.method("__init__")
        if init is not None:
            # No frame for the constructor: a caller cannot reorder `__init__` after other
            # methods, so what happens inside it is reported inside it.
            self.call_function(Function(init, self.module_env, instance), args, kwargs, None)
        elif _is_dataclass(info):
            self.init_dataclass(info, instance, args, kwargs, node)
        event.result = instance
        return instance

    def init_dataclass(self, info: ClassInfo, instance: Ref, args: tuple, kwargs: dict, node: cst.Call) -> None:
        """The ``__init__`` a dataclass generates: store each field, then run ``__post_init__``."""
        fields = [name for cls in reversed(list(info.mro())) for name in _annotated_fields(cls)]
        for index, name in enumerate(dict.fromkeys(fields)):
            if index < len(args) or name in kwargs:
                self.store(instance, name, args[index] if index < len(args) else kwargs[name], node)
        post_init = info.method("__post_init__")
        if post_init is not None:
            self.call_function(Function(post_init, self.module_env, instance), (), {}, None)

    def call_function(
        self, fn: Function, args: tuple, kwargs: dict, node: cst.CSTNode | None, symbolic: bool = False
    ) -> Value | None:
        """Expand a same-file function in place; None when it cannot be (recursion, depth, budget).
        ``symbolic``: an entry point's own run, which always happens."""
        info = fn.info
        if not symbolic and (
            self.active.count(info) >= MAX_RECURSION or len(self.active) >= MAX_CALL_DEPTH or not self.within_budget()
        ):
            return None
        self.invoked.add(info)
        self.active.append(info)
        outer_frame, outer_ctx = self.frame, self.ctx
        closure = fn.closure if isinstance(fn.closure, Env) else self.module_env
        self.frame = Frame(
            Env(closure),
            outer_frame.stack + ((node,) if node is not None else ()),
            fn.bound,
            info.cls,
        )
        self.ctx = torch_api.decorated(outer_ctx, self._decorators(info), info, len(self.frame.stack))
        try:
            self.bind_parameters(fn, args, kwargs, symbolic)
            self.exec_block(statements(info.node.body))
            returns = self.frame.returns
        finally:
            self.frame, self.ctx = outer_frame, outer_ctx
            self.active.pop()
        return choice(returns) if returns else Const(None)

    def within_budget(self) -> bool:
        """Whether another call may be expanded; if so, it is counted against the entry point."""
        if self.entry_expansions >= MAX_EXPANSIONS_PER_ENTRY or self.steps > MAX_STEPS:
            return False
        self.entry_expansions += 1
        return True

    def bind_parameters(self, fn: Function, args: tuple, kwargs: dict, symbolic: bool) -> None:
        params = fn.info.node.params
        positional = list(params.posonly_params) + list(params.params)
        if fn.bound is not None and positional and not self._is_static(fn.info):
            self.bind(positional.pop(0).name.value, fn.bound)
        remaining = dict(kwargs)
        for index, param in enumerate(positional):
            name = param.name.value
            if index < len(args):
                value = args[index]
            elif name in remaining:
                value = remaining.pop(name)
            else:
                value = self._default(param, symbolic)
                self.frame.defaulted.add(name)
            _name_unnamed(value, name)  # `main(Net())`: the model is `model` in messages
            self.bind(name, value)
        if isinstance(params.star_arg, cst.Param):
            self.bind(params.star_arg.name.value, Tuple(tuple(args[len(positional) :])))
        for param in params.kwonly_params:
            name = param.name.value
            if name not in remaining:
                self.frame.defaulted.add(name)
            self.bind(name, remaining.pop(name) if name in remaining else self._default(param, symbolic))
        if params.star_kwarg is not None:
            container = Obj("container", None)
            container.items = list(remaining.items())
            self.bind(params.star_kwarg.name.value, Ref(container))

    def _default(self, param: cst.Param, symbolic: bool) -> Value:
        if symbolic:
            return torch_api.rank_by_name(param.name.value, Ref(Obj("param", param.name.value)))
        return self.eval(param.default) if param.default is not None else UNKNOWN

    def _decorators(self, info: FunctionInfo) -> tuple[Value, ...]:
        """The decorators' values; unknown for a function whose ``def`` never ran (nested in a
        function analysed as an entry point), which still leaves their names to match."""
        return self.decorators.get(info) or (UNKNOWN,) * len(info.node.decorators)

    def _is_static(self, info: FunctionInfo) -> bool:
        return any(
            isinstance(d, Symbol) and d.qname in ("builtins.staticmethod", "builtins.classmethod")
            for d in self.decorators.get(info, ())
        )

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
                    option.ref.root, option.ref.path + (wildcard,), option.order if option.self_included else ""
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
        if value.kind == "enumerate":
            return Tuple((UNKNOWN, self.element_of(value.parts[0], lazy)))
        if value.kind == "zip":
            return Tuple(tuple(self.element_of(part, lazy) for part in value.parts))
        container = value.parts[0]
        if isinstance(container, (StateDict, Loaded)):  # its tensors: the state dict's values
            return container if value.kind == "values" else Tuple((UNKNOWN, container))
        if is_container(container):
            pairs = [Tuple((Const(key), item)) for key, item in container.root.items]
            if not pairs and container.root.parent is not None:  # filled by another method
                pairs.append(Tuple((UNKNOWN, container.child(self.loop_wildcard(ANY)))))
            return choice(pairs)
        return Tuple((UNKNOWN, UNKNOWN))


# --- helpers without interpreter state ---------------------------------------------------------


def _blocks(stmt: cst.BaseCompoundStatement) -> list[cst.BaseSuite]:
    if isinstance(stmt, cst.Match):
        return [case.body for case in stmt.cases]
    blocks = [stmt.body]
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        blocks += [handler.body for handler in stmt.handlers]
        blocks += [part.body for part in (stmt.orelse, stmt.finalbody) if part is not None]
    else:
        orelse = getattr(stmt, "orelse", None)
        while isinstance(orelse, cst.If):
            blocks.append(orelse.body)
            orelse = orelse.orelse
        if orelse is not None:
            blocks.append(orelse.body)
    return blocks


def _unpack(value: Value, count: int) -> list[Value]:
    if isinstance(value, Tuple) and len(value.items) == count:
        return list(value.items)
    if isinstance(value, Choice):
        per_option = [_unpack(option, count) for option in value.options]
        return [choice([parts[i] for parts in per_option]) for i in range(count)]
    return [UNKNOWN] * count


def _decorator_names(info: FunctionInfo) -> set[str]:
    """The last component of each decorator's name (``property``, ``setter``, ``no_grad``)."""
    found = set()
    for decorator in info.node.decorators:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        found.add(dotted(target).rpartition(".")[2])
    return found


def _is_dataclass(info: ClassInfo) -> bool:
    for cls in info.mro():
        for decorator in cls.node.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if dotted(target).rpartition(".")[2] == "dataclass":
                return True
    return False


def _annotated_fields(info: ClassInfo) -> list[str]:
    """The fields a dataclass declares in its body (``model: nn.Module``), in order."""
    found = []
    for stmt in statements(info.node.body):
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                annotation = small.annotation.annotation
                base = annotation.value if isinstance(annotation, cst.Subscript) else annotation
                if dotted(base).rpartition(".")[2] != "ClassVar":
                    found.append(small.target.value)
    return found


def _reversed(value: Value) -> Value:
    if isinstance(value, ModuleIter):
        return ModuleIter(value.ref, value.self_included, value.named, "rev" if value.order == "pre" else "pre")
    if isinstance(value, Ref) and value.root.kind == "container" and not value.path:
        copy = Obj("container", None, node=value.root.node)
        copy.items = list(reversed(value.root.items))
        return Ref(copy)
    return value


def _super_method(value: Super, name: str) -> FunctionInfo | None:
    for cls in list(value.cls.mro())[1:]:
        if name in cls.methods:
            return cls.methods[name]
    return None


def _name_unnamed(value: Value, name: str) -> None:
    """Give the objects in ``value`` that have no name yet the name they are first bound to."""
    for ref in refs(value):
        if ref.root.label is None and not ref.path:
            ref.root.label = name


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


def _compare_constants(left: Value, operator: cst.BaseCompOp, right: Value) -> Value:
    """``2 == 1``, ``"fsdp2" != "fsdp1"``, ``None is None``: known when both sides are literals."""
    compare = _CONSTANT_COMPARISONS.get(type(operator))
    a, b = const(left), const(right)
    if compare is None or not all(isinstance(x, (bool, int, float, str, type(None))) for x in (a, b)):
        return UNKNOWN
    return Const(compare(a, b))


_STATEMENTS = {
    cst.FunctionDef: Interpreter.exec_function_def,
    cst.ClassDef: Interpreter.exec_class_def,
    cst.If: flow.exec_if,
    cst.For: Interpreter.exec_for,
    cst.While: flow.exec_while,
    cst.With: Interpreter.exec_with,
    cst.Try: Interpreter.exec_try,
    cst.TryStar: Interpreter.exec_try,
    cst.Match: Interpreter.exec_match,
}


_EXPRESSIONS = {
    cst.Name: Interpreter.eval_name,
    cst.Attribute: Interpreter.eval_attribute,
    cst.Call: Interpreter.eval_call,
    cst.Subscript: Interpreter.eval_subscript,
    cst.Integer: Interpreter.eval_literal,
    cst.Float: Interpreter.eval_literal,
    cst.SimpleString: Interpreter.eval_string,
    cst.FormattedString: Interpreter.eval_string,
    cst.ConcatenatedString: Interpreter.eval_string,
    cst.List: Interpreter.eval_collection,
    cst.Tuple: Interpreter.eval_collection,
    cst.Set: Interpreter.eval_collection,
    cst.Dict: Interpreter.eval_collection,
    cst.ListComp: Interpreter.eval_comprehension,
    cst.SetComp: Interpreter.eval_comprehension,
    cst.DictComp: Interpreter.eval_comprehension,
    cst.GeneratorExp: Interpreter.eval_comprehension,
    cst.BinaryOperation: Interpreter.eval_binary,
    cst.UnaryOperation: Interpreter.eval_unary,
    cst.BooleanOperation: Interpreter.eval_boolean,
    cst.Comparison: Interpreter.eval_comparison,
    cst.IfExp: flow.eval_if_exp,
    cst.NamedExpr: Interpreter.eval_named,
    cst.Await: Interpreter.eval_await,
    cst.Lambda: lambda self, node: Lambda(node, self.frame.env),
}
