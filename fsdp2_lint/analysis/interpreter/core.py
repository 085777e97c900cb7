"""The abstract interpreter: generic Python evaluation of one parsed module into the runs of its
entry points (:class:`~.state.EntryRun`), over the abstract values of :mod:`fsdp2_lint.analysis.model`.

One object, :class:`Interpreter`, evaluates: statements here, expressions in :mod:`.expressions`,
calls in :mod:`.calls`. It executes statements in source order: both arms of an ``if`` run, each
on its own copy of the variables and the heap, and are joined afterwards (:mod:`.flow`, with
what each test establishes from :mod:`.guards`); loop bodies run once with the loop variable bound to "an
element" of the iterable; calls of functions, classes and methods defined in the same file are
expanded in place with their arguments bound, so their events land in the caller's trace in
execution order (bounded: see :mod:`.calls`). What a call of anything else (torch, the launch
environment) does comes from :mod:`.torch_api`. Everything it does not understand evaluates to
``UNKNOWN``, which no rule reports on: precision before recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import libcst as cst

from fsdp2_lint.analysis.interpreter import flow, guards, torch_api
from fsdp2_lint.analysis.interpreter.calls import Calls, is_dataclass, name_unnamed
from fsdp2_lint.analysis.interpreter.expressions import Expressions
from fsdp2_lint.analysis.interpreter.generators import Exiting, Split, Suspended, entered_calls, special_methods
from fsdp2_lint.analysis.interpreter.imports import Imports
from fsdp2_lint.analysis.interpreter.state import (
    TERMINATED,
    Continuation,
    EntryRun,
    Env,
    Frame,
    Heap,
    ModuleScope,
    Slot,
    WatchedDict,
    World,
    adopt,
)
from fsdp2_lint.analysis.interpreter.summaries import Summaries
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Choice,
    Class,
    ClassInfo,
    Const,
    Context,
    Event,
    EventKind,
    Function,
    FunctionInfo,
    Lambda,
    Obj,
    ObjKind,
    Params,
    Ref,
    Tuple,
    Value,
    canonical,
    choice,
    elements,
    is_container,
    key_element,
    mapping_items,
    options,
    refs,
)
from fsdp2_lint.analysis.project import Project, package_of
from fsdp2_lint.analysis.syntax import child_nodes, dotted, statements

# Methods Python calls on an object of the class, which the file makes by calling the class.
CALLED_THROUGH_CLASS = frozenset({"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__"})
CALLED_NAME = re.compile(rb"(?<!def )(?<!class )\b([A-Za-z_]\w*)\s*\(")


class Interpreter(Expressions, Calls, Imports):
    """Interprets one module: statements here, expressions and calls in the classes it joins."""

    def __init__(
        self,
        module: cst.Module,
        source: bytes,
        project: Project | None = None,
        path: Path | None = None,
        relevant: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.source = source
        self.project = project
        self.relevant = relevant or (lambda data: True)
        self.dtensor_checks_of: dict[int, tuple[str, ...]] = {}
        self.settings_compared: dict[int, tuple[int, tuple[Slot, ...], Value]] = {}
        self.properties_read: dict[int, tuple[FunctionInfo, int]] = {}
        self.slots_read: dict[int, tuple[Slot, ...]] = {}  # by id of an attribute read: the heap slots it read
        self.comparisons = 0  # comparisons with a constant evaluated so far
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self.classes: dict[cst.ClassDef, ClassInfo] = {}
        self.class_objs: dict[ClassInfo, Obj] = {}
        self.decorators: dict[FunctionInfo, tuple[Value, ...]] = {}
        self.scopes: list[ModuleScope] = []
        self.scope_of: dict[FunctionInfo, ModuleScope] = {}
        self.module_envs: set[Env] = set()
        self.loaded: dict[Path, ModuleScope | None] = {}
        self.binding_modules = {}
        self.events: list[Event] = []
        self.patched: dict[str, Value] = {}  # torch names a test replaced (`monkeypatch.setattr`), per entry
        self.world = World()  # the version of the heap, the modules' variables and the objects
        self.heap = Heap(self.world)
        self.mutations = 0
        self.ctx = Context()
        name = project.module_name(path) if project is not None and path is not None else ""
        package = package_of(name, path) if path is not None else ""
        self.main = ModuleScope(name, package, module, Env(None, WatchedDict(self.world)), path)
        self.main.mentions_dtensor = guards.mentions_dtensor(source)
        if path is not None:
            self.loaded[path] = self.main
        self.add_scope(self.main)
        self.frame = Frame(self.main.env, self.main)
        self.active: list[FunctionInfo] = []
        self.active_lambdas: list[cst.Lambda] = []
        self.invoked: set[FunctionInfo] = set()
        self.steps = 0
        self.foreign_steps = 0  # statements run in other project modules
        self.value_flow_steps = 0  # of those, this entry point's in modules followed only for the values passed in
        self.foreign_running = 0  # expansions of other modules' code (and their module bodies) in progress
        self.summaries = Summaries()
        self.loops_seen = 0
        self.entering: frozenset[int] = frozenset()  # ids of the calls the `with` item being evaluated enters
        self.suspended: list[Suspended] = []  # generators a `with` entered, stopped at their `yield`
        self.splits: dict[FunctionInfo, Split | None] = {}  # context-manager generators cut at their `yield`

    @property
    def module_env(self) -> Env:
        """The variables of the module the running code belongs to."""
        return self.frame.scope.env

    def add_scope(self, scope: ModuleScope) -> None:
        self.scopes.append(scope)
        self.module_envs.add(scope.env)
        self._collect(statements(scope.module), None, scope)

    def star_count(self) -> int:
        return sum(len(scope.star_imports) for scope in self.scopes)

    def function_value(self, info: FunctionInfo, bound: Ref | None = None, owner: ClassInfo | None = None) -> Function:
        """A function or method as a value, closed over its own module's variables; ``owner``: the
        class it was looked up on, which a class method's ``cls`` is."""
        return Function(info, self.scope_of[info].env, bound, owner)

    # --- entry points ------------------------------------------------------------------------

    def run(self) -> list[EntryRun]:
        """Run the module body, then each function no run has expanded (those the file never
        calls first), each from the heap the module body left."""
        self.exec_block(statements(self.main.module))
        runs = [EntryRun("<module>", self.events)]
        module_heap = self.heap
        called = {match.decode() for match in CALLED_NAME.findall(self.source)}
        functions = list(self.main.functions)
        uncalled = [info for info in functions if not self._called(info, called)]
        for info in uncalled + [info for info in functions if info not in uncalled]:
            if info not in self.invoked:
                runs.append(self._run_root(info, module_heap))
        return runs

    @staticmethod
    def _called(info: FunctionInfo, called: set[str]) -> bool:
        if info.name in CALLED_THROUGH_CLASS and info.cls is not None:
            return info.cls.name in called
        if info.name in ("forward", "__call__"):
            return False  # reached through `module(...)`, which the file may never do
        return info.name in called

    def _run_root(self, info: FunctionInfo, module_heap: Heap) -> EntryRun:
        self.events, self.heap, self.ctx = [], Heap(self.world, module_heap), Context()
        self.patched = {}
        self.summaries.start_entry()
        self.value_flow_steps = 0  # each entry point follows values on its own budget
        self.frame = Frame(self.main.env, self.main)
        instance = Ref(Obj(ObjKind.SELF, "self", cls=info.cls)) if info.cls and not self._is_static(info) else None
        init = info.cls.method("__init__") if info.cls else None
        if init is None and info.cls is not None and is_dataclass(info.cls):
            init = info.cls.method("__post_init__")
        if instance is not None and init is not None and init is not info:
            self.call_function(self.function_value(init, instance), (), {}, None, symbolic=True)
        if instance is not None and info.name in ("forward", "__call__"):  # runs through `module(...)`
            self.ctx = self.ctx.with_(forward_of=(instance,))
        body_start = len(self.events)
        self.call_function(self.function_value(info, instance), (), {}, None, symbolic=True)
        if info is init:
            body_start = len(self.events)  # a constructor runs before any other method can
        exit_ = _exit_of(info)
        if instance is not None and exit_ is not None:  # what a `with` in another file runs next
            self.call_function(self.function_value(exit_, instance), (), {}, None, symbolic=True)
        return EntryRun(info.qualname, self.events, instance=instance, body_start=body_start)

    def _collect(self, body: list[cst.CSTNode], cls: ClassInfo | None, scope: ModuleScope) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                info = FunctionInfo(stmt, cls)
                self.functions[stmt] = info
                self.scope_of[info] = scope
                scope.functions.append(info)
                if cls is not None and not info.decorator_names & {"setter", "deleter"}:
                    cls.methods[info.name] = info  # a property's setter keeps its getter
                self._collect(statements(stmt.body), None, scope)
            elif isinstance(stmt, cst.ClassDef):
                info_cls = ClassInfo(stmt)
                self.classes[stmt] = info_cls
                self._collect(statements(stmt.body), info_cls, scope)
            elif isinstance(stmt, cst.BaseCompoundStatement):
                for block in _blocks(stmt):
                    self._collect(statements(block), cls, scope)

    # --- events ------------------------------------------------------------------------------

    def now(self) -> int:
        """The index of the latest event: what happens now happens after it."""
        return len(self.events) - 1

    def record(self, kind: str, node: cst.CSTNode, **fields: object) -> Event:
        if kind in (EventKind.STORE, EventKind.INPLACE):  # changes an object a summarised call may read
            self.world.changed()
        ctx = self.ctx
        if not ctx.meta_device and torch_api.default_device_may_be_meta(self.heap):
            ctx = ctx.with_(meta_device=True)
        event = Event(len(self.events), kind, node, self.frame.stack, ctx, **fields)
        self.events.append(event)
        return event

    # --- statements --------------------------------------------------------------------------

    def exec_block(self, body: list[cst.CSTNode], exits: list[Continuation] | None = None) -> bool:
        """Run the statements; True when they always exit. ``exits`` collects the ``if``s that exit
        early on some paths, for an enclosing ``if`` to carry past its end; without it, this block
        is where those exits lead (a function or loop body), and their heap writes join here."""
        saved, escaped = self.ctx, len(self.frame.escaped)
        try:
            for stmt in body:
                outcome = self.exec_stmt(stmt)
                if outcome is TERMINATED:
                    return True
                if isinstance(outcome, Continuation):  # after `if ...: return`, the rest is the other arm
                    self.ctx = flow.continued(self.ctx, outcome)
                    if exits is not None:
                        exits.append(outcome)
            return False
        finally:
            self.ctx = saved
            if exits is None:
                flow.rejoin_escaped(self, escaped)

    def exec_stmt(self, stmt: cst.CSTNode) -> object:
        self.steps += 1
        scope = self.frame.scope
        if scope is not self.main:
            self.foreign_steps += 1
            self.value_flow_steps += not scope.relevant
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                if self.exec_small(small) is TERMINATED:
                    return TERMINATED
            return None
        if isinstance(stmt, cst.BaseSmallStatement):  # the body of a one-line `if c: stmt` is its small statements
            return self.exec_small(stmt)
        handler = _STATEMENTS.get(type(stmt))
        return handler(self, stmt) if handler else None

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
            self.frame.returns.append((value, self.ctx))
            self.record(EventKind.RETURN, node, result=value)
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
            outer = self.ctx
            self.ctx = outer.with_(asserted=True)
            try:
                self.eval(node.test)
            finally:
                self.ctx = outer
        return None

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
                    info.attributes.update(self.frame.env.vars)
                finally:
                    self.frame.env = outer
        self.bind(info.name, Class(info))

    def class_namespace(self, info: ClassInfo) -> Obj:
        """The object that holds a class's attributes (what its body assigns, ``Cls.x = ...``)."""
        if info not in self.class_objs:
            self.class_objs[info] = Obj(ObjKind.CLASS, info.name)
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
        """Each item is entered in turn; a generator it enters resumes after the body, and an
        object's ``__exit__`` runs then, the last entered first (:mod:`.generators`)."""
        outer = self.ctx
        ctx = outer
        entered: list[Suspended | Exiting] = []
        for item in node.items:
            mark = len(entered)
            manager = value = self.enter_item(item.item, entered)
            if len(entered) == mark:  # no generator entered: the object's own `__enter__`, if any
                value, exiting = self.enter_object(manager, item.item, node.asynchronous is not None)
                entered.extend([exiting] if exiting is not None else [])
            if item.asname is not None:
                self.assign(item.asname.name, value)
            ctx = torch_api.enter(ctx, manager)
        self.ctx = ctx
        done = self.exec_block(statements(node.body))
        self.ctx = outer
        for generator in reversed(entered):
            self.resume(generator)
        return TERMINATED if done else None

    def enter_item(self, item: cst.BaseExpression, entered: list[Suspended | Exiting]) -> Value:
        """The value a ``with`` item binds; the generators it entered are added to ``entered``."""
        outer, mark = self.entering, len(self.suspended)
        self.entering = entered_calls(item)
        try:
            return self.eval(item)
        finally:
            self.entering = outer
            entered.extend(self.suspended[mark:])
            del self.suspended[mark:]

    def eval_yield(self, node: cst.Yield) -> Value:
        """What a generator yields is what a ``with`` entering it binds; what is sent back is unknown."""
        if isinstance(node.value, cst.From):
            self.eval(node.value.item)
        else:
            self.frame.yielded.append(self.eval(node.value) if node.value is not None else Const(None))
        return UNKNOWN

    def exec_try(self, node: cst.Try | cst.TryStar) -> None:
        self.exec_block(statements(node.body))
        outer = self.ctx
        for arm, handler in enumerate(node.handlers, start=1):
            self.ctx = outer.with_(branches=outer.branches + ((id(node), arm),))
            if handler.type is not None:
                self.eval(handler.type)
            if handler.name is not None:
                self.assign(handler.name.name, UNKNOWN)
            before = dict(self.frame.env.vars) if _catches_import_error(handler) else None
            self.exec_block(statements(handler.body))
            if before is not None:  # `try: from a import f / except ImportError: f = None`: either one
                self._join_alternatives(before)
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
        self.record(EventKind.INPLACE, node, receiver=current, args=(value,))
        merged = mapping_items(value) if isinstance(node.operator, cst.BitOrAssign) else None  # dict |= mapping
        for option in options(current):
            if isinstance(option, Ref) and option.root.kind is ObjKind.CONTAINER:
                option.root.items.extend(merged if merged is not None else ((None, item) for item in elements(value)))
        if isinstance(node.target, cst.Name) and isinstance(current, Params) and isinstance(value, Params):
            self.bind(node.target.value, current | value)
        derived = torch_api.derived_from((current, value), {})
        if isinstance(node.target, cst.Name) and derived is not None:  # total += g.pow(2).sum()
            self.bind(node.target.value, derived)

    # --- binding -----------------------------------------------------------------------------

    def bind(self, name: str, value: Value) -> None:
        env = self.module_env if name in self.frame.global_names else self.frame.env
        env.vars[name] = value
        self.frame.bindings[name] = None  # no fixed site, unless `assign` knows it

    def assign(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            name_unnamed(value, target.value)
            self.bind(target.value, value)
            if len(self.ctx.loops) == self.frame.entry_loops:  # once per call, not once per iteration
                self.frame.bindings[target.value] = target
        elif isinstance(target, (cst.Tuple, cst.List)):
            items = [element.value for element in target.elements]
            starred = any(isinstance(item, cst.StarredElement) for item in items)
            parts = _unpack(value, len(items), None if starred else self.item_of)
            for item, part in zip(items, parts, strict=True):
                self.assign(item.value if isinstance(item, cst.StarredElement) else item, part)
        elif isinstance(target, cst.Attribute):
            self.store(self.eval(target.value), target.attr.value, value, target)
        elif isinstance(target, cst.Subscript):
            base = self.eval(target.value)
            key = self.subscript_key(target)
            for option in options(base):
                if isinstance(option, Ref) and option.root.kind is ObjKind.CONTAINER and not option.path:
                    option.root.items.append((key, value))
            self.store(base, key_element(key), value, target)
        elif isinstance(target, cst.StarredElement):
            self.assign(target.value, UNKNOWN)

    def store(self, owner: Value, element: str, value: Value, node: cst.CSTNode) -> None:
        self.mutations += 1  # a setting read from an attribute is a new atom after it (conditions.py)
        self.record(EventKind.STORE, node, receiver=owner, name=element, args=(value,))
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

    def _join_alternatives(self, before: dict[str, Value]) -> None:
        variables = self.frame.env.vars
        for name, value in list(variables.items()):
            if name in before and before[name] is not value:
                variables[name] = choice([before[name], value])


# --- helpers without interpreter state ---------------------------------------------------------


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def _exit_of(info: FunctionInfo) -> FunctionInfo | None:
    """The ``__exit__`` (``__aexit__``) of the class whose ``__enter__`` (``__aenter__``) ``info`` is."""
    for asynchronous in (False, True):
        enter, exit_ = special_methods(asynchronous)
        if info.name == enter and info.cls is not None:
            return info.cls.method(exit_)
    return None


def _catches_import_error(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
    caught = handler.type
    names = [element.value for element in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
    return any(dotted(name).rpartition(".")[2] in _IMPORT_ERRORS for name in names if name is not None)


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


def _unpack(value: Value, count: int, item_of: Callable[[Value, int], Value] | None) -> list[Value]:
    """The parts ``a, b = value`` binds: a tuple's items, else (``item_of`` given, no starred
    target) what ``value[0]``, ``value[1]`` name: ``model, batch = make_case()`` names parts of
    the one result as ``case = make_case(); model = case[0]`` does."""
    if isinstance(value, Tuple) and len(value.items) == count:
        return list(value.items)
    if isinstance(value, Choice):
        per_option = [_unpack(option, count, item_of) for option in value.options]
        return [choice([parts[i] for parts in per_option]) for i in range(count)]
    if item_of is None or isinstance(value, Tuple) or value is UNKNOWN:
        return [UNKNOWN] * count
    return [item_of(value, index) for index in range(count)]


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
    cst.Yield: Interpreter.eval_yield,
    cst.Lambda: lambda self, node: Lambda(node, self.frame.env),
}
