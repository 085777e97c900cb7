"""Abstract interpretation of one parsed module into the traces of :mod:`fsdp2_lint.facts`.

The interpreter executes statements in source order over abstract values (:mod:`fsdp2_lint.values`):
both arms of an ``if`` run, each on its own copy of the variables, and are joined afterwards;
loop bodies run once with the loop variable bound to "an element" of the iterable; calls of
functions, classes and methods defined in the same file are expanded in place with their
arguments bound, so their events land in the caller's trace in execution order. Everything it
does not understand evaluates to ``UNKNOWN``, which no rule reports on: precision before recall.

Expansion is bounded, so that a file of many mutually calling helpers costs time linear in its
number of functions instead of exponential in the call depth: each entry point (the module body,
and each function analysed on its own) expands at most ``MAX_EXPANSIONS_PER_ENTRY`` calls, and no
call is expanded once the file has run ``MAX_STEPS`` statements. A call past a bound is analysed
like a call to a function of another file (its events are not in the caller's trace), and a
function no call expanded is still analysed as an entry point of its own.
"""

from __future__ import annotations

import builtins
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypeVar

import libcst as cst

from fsdp2_lint import names
from fsdp2_lint.facts import Trace, canonical
from fsdp2_lint.syntax import child_nodes, dotted, statements
from fsdp2_lint.values import (
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
    ParamSource,
    Partial,
    RankDep,
    RankGuard,
    Ref,
    StateDict,
    Super,
    Symbol,
    Tuple,
    Uniform,
    Value,
    choice,
    is_any_depth,
    options,
    refs,
    walk_contents,
)

T = TypeVar("T")
K = TypeVar("K")
MAX_CALL_DEPTH = 8
MAX_RECURSION = 2  # a recursive function is expanded one level deep (children, then the module)
MAX_EXPANSIONS_PER_ENTRY = 512  # same-file calls expanded per entry point (FSDP2 repositories need 496 at most)
MAX_STEPS = 200_000  # statements interpreted per file before same-file calls stop being expanded
TERMINATED = object()  # a block that ends in return/raise/break/continue
BUILTIN_NAMES = frozenset(dir(builtins))
CONSTANT_NAMES = {"True": True, "False": False, "None": None}
# Methods of nn.Module (and of FSDP1/DDP wrappers) that return the module itself.
SELF_RETURNING = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "half",
        "bfloat16",
        "double",
        "train",
        "eval",
        "requires_grad_",
        "to_empty",
        "apply",
        "share_memory",
        "type",
        "xpu",
        "npu",
    }
)
SUBMODULE_GETTERS = frozenset(
    {
        "get_decoder",
        "get_encoder",
        "get_input_embeddings",
        "get_output_embeddings",
        "get_base_model",
        "get_model",
        "language_model",
        "get_submodule_by_name",
    }
)
# Method names that, read as an attribute of a module, are methods rather than submodules.
MODULE_METHODS = frozenset(
    {
        "forward",
        "no_sync",
        "generate",
        "state_dict",
        "load_state_dict",
        "parameters",
        "named_parameters",
        "unshard",
        "reshard",
        "clip_grad_norm_",
        "set_requires_gradient_sync",
        "modules",
        "children",
        "named_modules",
        "named_children",
        "zero_grad",
        "step",
    }
)
PROPERTIES = frozenset({"property", "cached_property"})  # methods that run when the attribute is read
# Methods of a state dict and of its tensors whose result holds the same (sharded or full) data.
STATE_PRESERVING = frozenset(
    {"copy", "get", "pop", "cpu", "cuda", "to", "detach", "clone", "contiguous", "float", "half", "bfloat16"}
)
# Types every module passes, the root included (a sharded root is an FSDPModule).
ROOT_ADMITTING_TYPES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", names.FSDP_MODULE})
# Attributes only DDP and FSDP1 wrappers have: `hasattr(model, "no_sync")` rules out FSDP2.
WRAPPER_ONLY = frozenset({"no_sync", "module"})
# Attributes only DTensors have among tensors: `hasattr(v, "full_tensor")` tells a shard from a plain tensor.
DTENSOR_ONLY = frozenset({"full_tensor", "to_local", "placements", "device_mesh", "redistribute"})
CALLED_NAME = re.compile(rb"(?<!def )(?<!class )\b([A-Za-z_]\w*)\s*\(")
# Objects whose `rank` is a matrix rank, not a process rank (`cfg.lora.rank`, `peft_config.rank`).
LOW_RANK_OWNER = re.compile(r"(?<![a-z])(lora|peft|adapter|low_?rank|svd)", re.IGNORECASE)


Slot = tuple[int, tuple[str, ...]]  # a heap key: (id of the owning object, attribute path)


class Env:
    """Variables of one scope; ``parent`` is the enclosing scope (closures, module globals)."""

    __slots__ = ("vars", "parent")

    def __init__(self, parent: Env | None = None, variables: dict[str, Value] | None = None) -> None:
        self.vars: dict[str, Value] = {} if variables is None else variables
        self.parent = parent

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return None

    def branch(self) -> Env:
        return Env(self.parent, dict(self.vars))


@dataclass(frozen=True)
class Continuation:
    """What an ``if`` whose one arm always exits means for the statements after it: they run in
    the other arm (``arms``: with those of ``if``s nested in it that exit the same way), on the
    ranks that arm runs on (``rank_guard``)."""

    arms: tuple[tuple[int, int], ...]
    rank_guard: RankGuard | None
    not_fsdp2: tuple[Ref, ...] = ()
    dtensor_tested: tuple[Value, ...] = ()


def _joined(continuations: list[Continuation]) -> Continuation:
    """The statements after a block in which several ``if``s exit early run in all their other arms."""
    guards = [c.rank_guard for c in continuations if c.rank_guard is not None]
    return Continuation(
        tuple(arm for c in continuations for arm in c.arms),
        guards[-1] if guards else None,
        tuple(ref for c in continuations for ref in c.not_fsdp2),
        tuple(value for c in continuations for value in c.dtensor_tested),
    )


@dataclass
class Frame:
    env: Env
    stack: tuple[cst.CSTNode, ...] = ()
    self_ref: Ref | None = None
    cls: ClassInfo | None = None
    returns: list[Value] = field(default_factory=list)
    global_names: set[str] = field(default_factory=set)
    defaulted: set[str] = field(default_factory=set)  # parameters the call left to their default


def const(value: Value) -> object:
    return value.value if isinstance(value, Const) else NotImplemented


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
        self.heap: dict[tuple[int, tuple[str, ...]], Value] = {}
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

    def run(self) -> list[Trace]:
        self.exec_block(statements(self.module))
        traces = [Trace("<module>", self.events)]
        module_heap = self.heap
        called = {match.decode() for match in CALLED_NAME.findall(self.source)}
        functions = list(self.functions.values())
        uncalled = [info for info in functions if not self._called(info, called)]
        for info in uncalled + [info for info in functions if info not in uncalled]:
            if info not in self.invoked:
                traces.append(self._run_root(info, module_heap))
        _share_class_sharding(traces)
        return traces

    @staticmethod
    def _called(info: FunctionInfo, called: set[str]) -> bool:
        if info.name == "__init__" and info.cls is not None:
            return info.cls.name in called
        if info.name in ("forward", "__call__"):
            return False  # reached through `module(...)`, which the file may never do
        return info.name in called

    def _run_root(self, info: FunctionInfo, module_heap: dict) -> Trace:
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
        return Trace(info.qualname, self.events, instance=instance)

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
                self.bind(alias.asname.name.value, Symbol(names.canonical(module)))
            else:
                top = module.split(".")[0]
                self.bind(top, Symbol(top))

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        module = "." * len(node.relative) + (dotted(node.module) if node.module else "")
        if isinstance(node.names, cst.ImportStar):
            self.star_imports.append(names.canonical(module))
            return
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            self.bind(local, Symbol(names.canonical(f"{module}.{name}")))

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

    def exec_taken_arm(self, node: cst.If, taken: bool) -> object:
        """An ``if`` whose test is a constant (``if algo == 1:`` with ``algo`` bound to 2, ``if
        False:``): only one arm runs, unconditionally."""
        if taken:
            body = statements(node.body)
        elif isinstance(node.orelse, cst.If):
            return self.exec_if(node.orelse)
        elif node.orelse is not None:
            body = statements(node.orelse.body)
        else:
            return None
        exits: list[Continuation] = []
        if self.exec_block(body, exits):
            return TERMINATED
        return _joined(exits) if exits else None

    def class_attribute(self, info: ClassInfo, name: str) -> Value | None:
        for cls in info.mro():
            value = self.heap.get((id(self.class_namespace(cls)), (name,)))
            if value is not None:
                return value
        return None

    def exec_if(self, node: cst.If) -> object:
        test = self.eval(node.test)
        # A constant test decides the arm, unless a default decided it: the function is written
        # for the callers that pass the argument too (`if path is not None: save(path)`).
        if isinstance(const(test), (bool, type(None))) and not _names_in(node.test) & self.frame.defaulted:
            return self.exec_taken_arm(node, bool(const(test)))
        then_guard, else_guard = _rank_guards(node, _rank_kind(test), len(self.frame.stack))
        then_narrowing, else_narrowing = self.narrowing(node.test)
        type_facts = self.tensor_narrowing(node.test)
        arm_slots = self.slot_narrowing(node.test)
        not_fsdp2 = self.proved_not_fsdp2(node.test)
        dtensor_tested = self.dtensor_tested(node.test)
        base, outer = self.frame.env, self.ctx
        arms: list[tuple[Env, bool, list[Continuation]]] = []
        for arm, (guard, narrowing) in enumerate(((then_guard, then_narrowing), (else_guard, else_narrowing))):
            exits: list[Continuation] = []
            self.frame.env = base.branch()
            self.frame.env.vars.update(type_facts[arm])  # still true after the `if`: never undone
            self.frame.env.vars.update(narrowing)
            saved = self.narrow_slots(arm_slots[arm])
            self.ctx = outer.with_(
                branches=outer.branches + ((id(node), arm),),
                rank_guard=guard or outer.rank_guard,
                not_fsdp2=outer.not_fsdp2 + not_fsdp2[arm],
                dtensor_tested=outer.dtensor_tested + dtensor_tested[arm],
            )
            if arm == 0:
                done = self.exec_block(statements(node.body), exits)
            elif isinstance(node.orelse, cst.If):  # `elif`
                outcome = self.exec_if(node.orelse)
                done = outcome is TERMINATED
                exits.extend([outcome] if isinstance(outcome, Continuation) else [])
            elif node.orelse is not None:
                done = self.exec_block(statements(node.orelse.body), exits)
            else:
                done = False
            self.restore_slots(arm_slots[arm], saved)
            arms.append((self.frame.env, done, exits))
        self.frame.env, self.ctx = base, outer
        (then_env, then_done, then_exits), (else_env, else_done, else_exits) = arms
        if then_done and else_done:
            return TERMINATED
        if then_done or else_done:
            base.vars.clear()
            base.vars.update((else_env if then_done else then_env).vars)
            arm = 1 if then_done else 0
            self.narrow_slots(arm_slots[arm])  # the rest of the block runs in that arm
            inner = _joined(else_exits if then_done else then_exits)
            return Continuation(
                ((id(node), arm), *inner.arms),
                inner.rank_guard or (else_guard if then_done else then_guard),
                not_fsdp2[arm] + inner.not_fsdp2,
                dtensor_tested[arm] + inner.dtensor_tested,
            )
        for env, narrowing in ((then_env, then_narrowing), (else_env, else_narrowing)):
            _undo_narrowing(env, narrowing, base)  # what the test said holds only inside the arm
        merged = dict(else_env.vars)
        for name, value in then_env.vars.items():
            other = else_env.vars.get(name)
            merged[name] = value if other is None or other == value else choice([value, other])
        base.vars.clear()
        base.vars.update(merged)
        if then_exits or else_exits:  # the rest never follows the arms that exited in either branch
            return Continuation(_joined(then_exits + else_exits).arms, None)
        return None

    def exec_for(self, node: cst.For) -> None:
        element = self.element_of(self.eval(node.iter), lazy=False)
        self.assign(node.target, element)
        self.loop_body(node, node.body, node.orelse)

    def exec_while(self, node: cst.While) -> None:
        self.eval(node.test)
        inside, _ = self.narrowing(node.test)  # `while hasattr(model, "module"): model = model.module`
        slots, _ = self.slot_narrowing(node.test)
        before = Env(None, dict(self.frame.env.vars))
        self.frame.env.vars.update(inside)
        saved = self.narrow_slots(slots)
        self.loop_body(node, node.body, node.orelse)
        self.restore_slots(slots, saved)
        _undo_narrowing(self.frame.env, inside, before)

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
            ctx = _enter(ctx, value)
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
                option.root.items.extend((None, item) for item in _elements(value))
        if isinstance(node.target, cst.Name) and isinstance(current, Params) and isinstance(value, Params):
            self.bind(node.target.value, current | value)
        derived = _derived_from((current, value), {})
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
            self.store(base, _key_element(key), value, target)
        elif isinstance(target, cst.StarredElement):
            self.assign(target.value, UNKNOWN)

    def store(self, owner: Value, element: str, value: Value, node: cst.CSTNode) -> None:
        self.record("store", node, receiver=owner, name=element, args=(value,))
        for option in options(owner):
            if isinstance(option, Class):  # `Registry.model = model`
                self.heap[(id(self.class_namespace(option.info)), (element,))] = value
        for ref in refs(owner):
            if _is_container(ref):
                if ref.root.parent is not None:  # `self.models[role] = module`: the module is self.models[role]
                    _adopt(ref.child(element), value)
                continue
            slot = canonical(ref).child(element)
            self.heap[(id(slot.root), slot.path)] = value
            _adopt(slot, value)

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
            value = self._unbound(name)
        return _rank_by_name(name, value)

    def _unbound(self, name: str) -> Value:
        for module in self.star_imports:
            if name in names.STAR_EXPORTS.get(module, ()):
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
        if isinstance(value, RankDep) and LOW_RANK_OWNER.search(self.module.code_for_node(node.value)):
            return UNKNOWN
        return value

    def attribute(self, base: Value, name: str, node: cst.CSTNode) -> Value:
        results: list[Value] = []
        for option in options(base):
            if isinstance(option, Symbol):
                results.append(Symbol(names.canonical(f"{option.qname}.{name}")))
            elif isinstance(option, Ref):
                results.append(self.ref_attribute(option, name, node))
            elif isinstance(option, Class):
                method = option.info.method(name)
                attribute = None if method else self.class_attribute(option.info, name)
                results.append(Function(method, self.module_env) if method else attribute or UNKNOWN)
            elif isinstance(option, Super):
                results.append(BoundMethod(option, name))
            elif isinstance(option, Params) and name == "grad":
                results.append(Derived(frozenset({"grad"})))
            elif isinstance(option, Derived):
                results.append(option)
            else:
                results.append(_rank_by_name(name, UNKNOWN))
        value = choice(results)
        if any(isinstance(option, Ref) for option in options(base)):
            self.record("attr", node, receiver=base, name=name, result=value)
        return value

    def ref_attribute(self, ref: Ref, name: str, node: cst.CSTNode) -> Value:
        if ref.root.wrapped is not None and name == "module" and not ref.path:
            return ref.root.wrapped
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
        if name in MODULE_METHODS or ref.root.kind == "container":
            return BoundMethod(ref, name)
        return _rank_by_name(name, ref.child(name))

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
            if _is_container(option):
                results.append(self.container_item(option, None if key is NotImplemented else key))
            elif isinstance(option, Ref):
                results.append(option.child(_key_element(None if key is NotImplemented else key)))
            elif isinstance(option, Tuple) and isinstance(key, int) and -len(option.items) <= key < len(option.items):
                results.append(option.items[key])
            elif isinstance(option, Symbol) and option.qname == "os.environ" and key in names.RANK_ENV_VARS:
                results.append(RankDep("rank"))
            elif isinstance(option, Symbol) and option.qname == "os.environ" and key in names.WORLD_SIZE_ENV_VARS:
                results.append(Uniform("size"))
            elif isinstance(option, (Params, Loaded, StateDict)):
                results.append(option)
            elif isinstance(option, RankDep):
                results.append(RankDep("mixed"))
            else:
                results.append(UNKNOWN)
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
            found.append(container.child(_key_element(key)))
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
                    items.extend((None, item) for item in _elements(self.eval(element.value)))
        else:
            for element in node.elements:
                value = self.eval(element.value)
                if isinstance(element, cst.StarredElement):
                    items.extend((None, item) for item in _elements(value))
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
                    self.eval(condition.test)
                    self.frame.env.vars.update(self.tensor_narrowing(condition.test)[0])
                    self.frame.env.vars.update(self.narrowing(condition.test)[0])
                    tested = self.dtensor_tested(condition.test)[0]
                    self.ctx = self.ctx.with_(dtensor_tested=self.ctx.dtensor_tested + tested) if tested else self.ctx
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
        derived = _derived_from((left, right), {})
        if derived is not None:
            return derived
        if isinstance(node.operator, cst.Add):
            left_items, right_items = _container_items(left), _container_items(right)
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
            return _negate_rank(value)
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
        kinds = {_rank_kind(side) for side in sides} - {None}
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
                result = _compare_world_size(left, operator, right) or _compare_rank(left, operator, right)
                if result is UNKNOWN and len(node.comparisons) == 1:
                    result = _compare_constants(left, operator, right)
        return result

    def eval_if_exp(self, node: cst.IfExp) -> Value:
        """Like an ``if`` statement: each arm is a branch, run on the ranks its test selects."""
        guards = _rank_guards(node, _rank_kind(self.eval(node.test)), len(self.frame.stack))
        results = []
        base, outer = self.frame.env, self.ctx
        narrowings = zip(self.tensor_narrowing(node.test), self.narrowing(node.test), strict=True)
        tests = (self.slot_narrowing(node.test), self.proved_not_fsdp2(node.test), self.dtensor_tested(node.test))
        arms = zip(narrowings, *tests, guards, strict=True)
        for index, ((facts, narrowing), slots, not_fsdp2, dtensor_tested, guard) in enumerate(arms):
            self.frame.env = Env(base, {**facts, **narrowing}) if facts or narrowing else base
            self.ctx = outer.with_(
                branches=outer.branches + ((id(node), index),),
                rank_guard=guard or outer.rank_guard,
                not_fsdp2=outer.not_fsdp2 + not_fsdp2,
                dtensor_tested=outer.dtensor_tested + dtensor_tested,
            )
            saved = self.narrow_slots(slots)
            results.append(self.eval(node.body if index == 0 else node.orelse))
            self.restore_slots(slots, saved)
            self.frame.env, self.ctx = base, outer
        return choice(results)

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
                args.extend(_elements(value) if isinstance(value, Tuple) else [UNKNOWN])
            elif arg.star == "**":  # fully_shard(block, **fsdp_kwargs) with a literal dict
                items = _container_items(value)
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
        special = _SYMBOL_CALLS.get(qname)
        if special is not None:
            event.result = special(self, event)
            return event.result
        if names.is_optimizer(qname):
            return self.new_optimizer(event, event.arg(0, "params"), qname)
        if names.is_optimizer_factory(qname):
            return self.new_optimizer(event, _factory_params(event, None), qname)
        kind = names.rank_kind_of_call(qname)
        if kind is not None:
            event.result = RankDep(kind)
            return event.result
        uniform = names.uniform_kind_of_call(qname)
        if uniform is not None:
            event.result = Uniform(uniform)
            return event.result
        if _rank_dependent(args, kwargs) and _passes_rank_on(qname):  # os.path.join(root, f"rank{rank}.pt")
            event.result = RankDep("mixed")
            return event.result
        derived = _derived_from(args, kwargs, event.index)
        if derived is not None:  # torch.stack([g.norm() for g in grads])
            event.result = derived
            return event.result
        return self.new_object(event, qname)

    def new_optimizer(self, event: Event, params: Value | None, qname: str | None) -> Value:
        obj = Obj("optimizer", None, qname=qname, node=event.node)
        obj.event = event
        obj.params = _collect_params(params, event.index) if params is not None else None
        event.result = Ref(obj)
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
            return self.filtered_modules(first, args[1], node)
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
            return choice([self.call_symbol(names.canonical(f"{o.qname}.{name}"), args, kwargs, node) for o in opts])
        stored = None if attribute_read else self.stored_attribute(opts, name)
        if stored is not None:  # `self.model(x)`: call what the attribute holds
            return self.alternatives(stored, node, lambda option: self.call_value(option, args, kwargs, node))
        event = self.record("method", node, name=name, receiver=receiver, args=args, kwargs=kwargs)
        event.result = self.alternatives(
            receiver, node, lambda option: self.method_of(option, name, args, kwargs, event)
        )
        if event.result is UNKNOWN and _rank_dependent((receiver, *args), kwargs):  # "{}.pt".format(rank)
            event.result = RankDep("mixed")
        return event.result

    def stored_attribute(self, receivers: tuple[Value, ...], name: str) -> Value | None:
        """The value assigned to ``receiver.name``, when every receiver has one."""
        stored = []
        for receiver in receivers:
            if not isinstance(receiver, Ref):
                return None
            value = next((self.heap[key] for key in _slot_keys(receiver, name) if key in self.heap), None)
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
            if receiver.root.kind == "optimizer" and not receiver.path and name == "state_dict":
                return StateDict(receiver.root, event.index)
            return self.module_method(receiver, name, args, event)
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
        if isinstance(receiver, StateDict):
            return _state_dict_method(receiver, name)
        if isinstance(receiver, Params) and name in ("copy", "values"):
            return receiver
        if isinstance(receiver, Derived):
            return _derived_method(receiver, name, event.index)
        if isinstance(receiver, Loaded) and name in ("items", "values"):
            return Iter(name, (receiver,))
        if isinstance(receiver, Loaded) and name in (*STATE_PRESERVING, "setdefault"):
            return receiver
        kind = names.rank_kind_of_call(name)
        return RankDep(kind) if kind else UNKNOWN

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
            items.extend((None, item) for item in _elements(args[0]))
        elif name in ("items", "values"):
            return Iter("items", (receiver,)) if name == "items" else receiver
        elif name == "copy":
            return receiver
        return UNKNOWN

    def module_method(self, ref: Ref, name: str, args: tuple, event: Event) -> Value:
        if name == "parameters":
            return Params(frozenset({ParamSource(ref, None)}))
        if name == "named_parameters":
            return Params(frozenset({ParamSource(ref, None)}), named=True)
        if name in ("modules", "named_modules"):
            return ModuleIter(ref, self_included=True, named=name == "named_modules")
        if name in ("children", "named_children"):
            return ModuleIter(ref, self_included=False, named=name == "named_children")
        if name == "values":
            return ModuleIter(ref, self_included=False, named=False)
        if name == "items":
            return ModuleIter(ref, self_included=False, named=True)
        if name == "state_dict":
            return StateDict(ref, event.index)
        if name == "apply" and args and all(isinstance(o, (Function, Lambda, Partial)) for o in options(args[0])):
            # fn(m) for every module in the tree, each after its children (the root last)
            every = Ref(ref.root, ref.path + (self.loop_wildcard(ANY_DEPTH),), "rev")
            self.call_value(args[0], (every,), {}, event.node)  # type: ignore[arg-type]
            return ref
        if name in SELF_RETURNING:
            return ref
        if name == "get_submodule" and args and isinstance(const(args[0]), str):
            return Ref(ref.root, ref.path + tuple(const(args[0]).split(".")))
        if name == "get_submodule" and args:  # a computed name: some module below this one
            return Ref(ref.root, ref.path + (ANY, ANY_DEPTH))
        if name in SUBMODULE_GETTERS:
            return Ref(ref.root, ref.path + (ANY, ANY_DEPTH))
        if names.is_optimizer_factory(name):  # model.configure_optimizers(...) defined elsewhere
            return self.new_optimizer(event, _factory_params(event, ref), None)
        kind = names.rank_kind_of_call(name)
        if kind is not None:
            return RankDep(kind)
        if names.uniform_kind_of_call(name) == "size":  # group.get_world_size()
            return Uniform("size")
        return self.new_object(event, None) if event.result is None else event.result

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
        if any(names.is_optimizer(base) for base in info.external_bases()):
            instance = self.new_optimizer(event, event.arg(0, "params"), None)
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
        self.ctx = _decorated(outer_ctx, self._decorators(info), info, len(self.frame.stack))
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
            return _rank_by_name(param.name.value, Ref(Obj("param", param.name.value)))
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

    # --- iteration and narrowing -------------------------------------------------------------

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
            elif _is_container(option):
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
        if _is_container(container):
            pairs = [Tuple((Const(key), item)) for key, item in container.root.items]
            if not pairs and container.root.parent is not None:  # filled by another method
                pairs.append(Tuple((UNKNOWN, container.child(self.loop_wildcard(ANY)))))
            return choice(pairs)
        return Tuple((UNKNOWN, UNKNOWN))

    def narrowing(self, test: cst.BaseExpression) -> tuple[dict[str, Value], dict[str, Value]]:
        """Variables a condition restricts, for the true and the false arm.

        Two narrowings matter to rules: a loop variable over ``m.modules()`` (which includes
        ``m`` itself) that is filtered by a condition no longer includes the root, unless the
        condition is a type check that the root's own class passes; and a model tested for
        being a DDP/FSDP1 wrapper (``hasattr(model, "no_sync")``, ``isinstance(model, DDP)``)
        or an FSDP2 module (``isinstance(model, FSDPModule)``) is, in the arm that rules
        that out, not an FSDP2 module.
        """
        wrapper_true, wrapper_false = (_variables(found) for found in self._wrapper_narrowing(test))
        loop_true, loop_false = self._loop_narrowing(test)
        return {**wrapper_true, **loop_true}, {**wrapper_false, **loop_false}

    def tensor_narrowing(self, test: cst.BaseExpression) -> tuple[dict[str, Value], dict[str, Value]]:
        """State-dict tensors a DTensor test (``isinstance(v, DTensor)``, ``hasattr(v,
        "full_tensor")``) proves plain, for the true and the false arm: a plain tensor of a
        sharded state dict (a buffer) holds its full value. Unlike the other narrowings this
        stays true after the ``if`` until the variable is assigned again."""
        return _by_arm(test, self._tensor_narrowing, _merged, {})

    def _tensor_narrowing(self, test: cst.BaseExpression) -> tuple[dict[str, Value], dict[str, Value]]:
        name = self.dtensor_test_subject(test)
        value = self.frame.env.lookup(name) if name is not None else None
        if value is None or not any(isinstance(o, StateDict) for o in options(value)):
            return {}, {}
        plain = choice([replace(o, full=True) if isinstance(o, StateDict) else o for o in options(value)])
        return {}, {name: plain}

    def dtensor_test_subject(self, test: cst.BaseExpression) -> str | None:
        """``x`` when the test is ``isinstance(x, DTensor)`` or ``hasattr(x, "full_tensor")``."""
        if not (isinstance(test, cst.Call) and len(test.args) == 2 and isinstance(test.args[0].value, cst.Name)):
            return None
        kind, function = test.args[1].value, dotted(test.func)
        if function == "hasattr":
            is_dtensor_test = isinstance(kind, cst.SimpleString) and kind.evaluated_value in DTENSOR_ONLY
        else:
            is_dtensor_test = function == "isinstance" and any(
                isinstance(option, Symbol) and option.qname == names.DTENSOR
                for option in walk_contents(self._peek(kind))
            )
        return test.args[0].value.value if is_dtensor_test else None

    def dtensor_tested(self, test: cst.BaseExpression) -> tuple[tuple[Value, ...], tuple[Value, ...]]:
        """The values the test requires to be DTensors, in the true and in the false arm."""
        return _by_arm(test, self._dtensor_tested, operator.add, ())

    def _dtensor_tested(self, test: cst.BaseExpression) -> tuple[tuple[Value, ...], tuple[Value, ...]]:
        name = self.dtensor_test_subject(test)
        value = self.frame.env.lookup(name) if name is not None else None
        return ((value,), ()) if value is not None else ((), ())

    def slot_narrowing(self, test: cst.BaseExpression) -> tuple[dict[Slot, Value], dict[Slot, Value]]:
        """The same type-guard narrowing for attributes (``hasattr(self.model, "no_sync")``),
        as heap slots for the true and the false arm."""
        true, false = self._wrapper_narrowing(test)
        return _slots(true), _slots(false)

    def narrow_slots(self, slots: dict[Slot, Value]) -> dict[Slot, Value | None]:
        saved = {slot: self.heap.get(slot) for slot in slots}
        self.heap.update(slots)
        return saved

    def restore_slots(self, slots: dict[Slot, Value], saved: dict[Slot, Value | None]) -> None:
        for slot, value in slots.items():
            if self.heap.get(slot) is not value:
                continue  # assigned meanwhile
            if saved[slot] is None:
                del self.heap[slot]
            else:
                self.heap[slot] = saved[slot]  # type: ignore[assignment]

    def proved_not_fsdp2(self, test: cst.BaseExpression) -> tuple[tuple[Ref, ...], tuple[Ref, ...]]:
        """The modules the test proves are no FSDP2 modules, in the true and in the false arm:
        those the type-guard narrowing rebinds, as they are before it."""
        found = []
        for narrowed in self._wrapper_narrowing(test):
            values = (self.frame.env.lookup(key) if isinstance(key, str) else self.heap.get(key) for key in narrowed)
            found.append(tuple(canonical(ref) for value in values if value is not None for ref in refs(value)))
        return found[0], found[1]

    def _wrapper_narrowing(self, test: cst.BaseExpression) -> tuple[dict[object, Value], dict[object, Value]]:
        return _by_arm(test, self._wrapper_type_test, _merged, {})

    def _wrapper_type_test(self, test: cst.BaseExpression) -> tuple[dict[object, Value], dict[object, Value]]:
        if not (isinstance(test, cst.Call) and len(test.args) >= 2):
            return {}, {}
        tested = test.args[0].value
        name = tested.value if isinstance(tested, cst.Name) else self._slot_of(tested)
        if name is None:
            return {}, {}
        function, kind = dotted(test.func), test.args[1].value
        if function == "hasattr" and isinstance(kind, cst.SimpleString) and kind.evaluated_value in WRAPPER_ONLY:
            return {name: _unknown_wrapper(dotted(tested))}, {}
        if function != "isinstance":
            return {}, {}
        types = {option.qname for option in walk_contents(self._peek(kind)) if isinstance(option, Symbol)}
        if names.FSDP_MODULE in types:
            return {}, {name: UNKNOWN}
        if types & {names.DDP, names.FSDP1}:
            return {name: _unknown_wrapper(dotted(tested))}, {}
        return {}, {}

    def _slot_of(self, node: cst.BaseExpression) -> Slot | None:
        """The heap slot of ``name.attr`` when ``name`` holds one known object."""
        if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)):
            return None
        owner = self.frame.env.lookup(node.value.value)
        if not isinstance(owner, Ref) or owner.root.kind == "container":
            return None
        slot = canonical(owner).child(node.attr.value)
        return (id(slot.root), slot.path)

    def filtered_modules(self, predicate: Value, modules: Value, node: cst.Call) -> Value:
        """``filter(lambda m: isinstance(m, Block), model.modules())``: like a filtered loop, the
        root is left out unless the predicate is a type test its class passes."""
        element = self.element_of(modules, lazy=False)
        kept = []
        for option in options(element):
            if isinstance(option, Ref) and option.path and is_any_depth(option.path[-1]):
                if not (isinstance(predicate, Lambda) and self._lambda_admits_root(predicate.node, option)):
                    option = Ref(option.root, option.path[:-1] + (ANY, ANY_DEPTH))
            kept.append(option)
        container = Obj("container", None, node=node)
        container.items = [(None, choice(kept))]
        return Ref(container)

    def _lambda_admits_root(self, fn: cst.Lambda, module: Ref) -> bool:
        params = fn.params.params
        return len(params) == 1 and self._type_test_admits_root(fn.body, params[0].name.value, module)

    def _loop_narrowing(self, test: cst.BaseExpression) -> tuple[dict[str, Value], dict[str, Value]]:
        loop_modules = {  # `m` in `for m in model.modules()` (of one model, or of one of several)
            name: options(value)
            for name, value in self.frame.env.vars.items()
            if any(_walked(o) for o in options(value)) and not any(_other_module(o) for o in options(value))
        }
        if not loop_modules:
            return {}, {}
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        inner = test.expression if negated else test
        narrowed: dict[str, Value] = {}
        for name in _names_in(inner) & loop_modules.keys():
            found = loop_modules[name]
            if not any(self._type_test_admits_root(inner, name, o) for o in found if isinstance(o, Ref)):
                narrowed[name] = choice(
                    [Ref(o.root, o.path[:-1] + (ANY, ANY_DEPTH)) if _walked(o) else o for o in found]
                )
        return ({}, narrowed) if negated else (narrowed, {})

    def _type_test_admits_root(self, test: cst.BaseExpression, name: str, ref: Ref) -> bool:
        root_cls = ref.root.cls if len(ref.path) == 1 else None
        comprehension_types = _comprehension_types(test)
        for call in _calls_in(test):
            if dotted(call.func) not in ("isinstance", "issubclass") or len(call.args) < 2:
                continue
            if dotted(call.args[0].value) != name:
                continue
            types = call.args[1].value
            types = comprehension_types.get(dotted(types), types)
            for option in walk_contents(self._peek(types)):
                if isinstance(option, Symbol) and option.qname in ROOT_ADMITTING_TYPES:
                    return True
                if isinstance(option, Class) and root_cls is not None and any(c is option.info for c in root_cls.mro()):
                    return True
        return False

    def _peek(self, node: cst.BaseExpression) -> Value:
        """Evaluate a side-effect-free name or attribute (a type in an isinstance test)."""
        if isinstance(node, cst.Name):
            return self.frame.env.lookup(node.value) or self._unbound(node.value)
        if isinstance(node, cst.Attribute):
            base = self._peek(node.value)
            if isinstance(base, Symbol):
                return Symbol(names.canonical(f"{base.qname}.{node.attr.value}"))
            return UNKNOWN
        if isinstance(node, cst.Tuple):
            return Tuple(tuple(self._peek(element.value) for element in node.elements))
        return UNKNOWN


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


def _elements(value: Value) -> list[Value]:
    items = _container_items(value)
    if items is not None:
        return [item for _, item in items]
    if isinstance(value, Params):
        return [value]
    return [UNKNOWN]


def _container_items(value: Value) -> list[tuple[object, Value]] | None:
    if isinstance(value, Ref) and value.root.kind == "container" and not value.path:
        return list(value.root.items)
    if isinstance(value, Tuple):
        return [(None, item) for item in value.items]
    return None


def _unpack(value: Value, count: int) -> list[Value]:
    if isinstance(value, Tuple) and len(value.items) == count:
        return list(value.items)
    if isinstance(value, Choice):
        per_option = [_unpack(option, count) for option in value.options]
        return [choice([parts[i] for parts in per_option]) for i in range(count)]
    return [UNKNOWN] * count


def _key_element(key: object) -> str:
    return ANY if key is None else f"[{key!r}]" if isinstance(key, str) else f"[{key}]"


def _slot_keys(ref: Ref, name: str) -> list[Slot]:
    """The heap keys of ``ref.name``, from its outermost owner (where stores go) to the object
    itself (where stores went before it became part of another object: an attribute set in a
    constructor, read after the instance was stored as ``self.checkpointer``)."""
    root, path = ref.root, ref.path + (name,)
    keys = [(id(root), path)]
    while root.parent is not None:
        owner = root.parent
        root, path = owner.root, owner.path + path
        keys.append((id(root), path))
    return keys[::-1]


def _by_arm(
    test: cst.BaseExpression,
    condition: Callable[[cst.BaseExpression], tuple[T, T]],
    join: Callable[[T, T], T],
    nothing: T,
) -> tuple[T, T]:
    """What ``test`` establishes in its true and in its false arm, from what ``condition`` says of
    each condition a ``not`` / ``and`` / ``or`` combines: both operands of an ``and`` hold in its
    true arm, both of an ``or`` fail in its false arm."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        true, false = _by_arm(test.expression, condition, join, nothing)
        return false, true
    if isinstance(test, cst.BooleanOperation):
        (left_true, left_false), (right_true, right_false) = (
            _by_arm(operand, condition, join, nothing) for operand in (test.left, test.right)
        )
        if isinstance(test.operator, cst.And):
            return join(left_true, right_true), nothing
        return nothing, join(left_false, right_false)
    return condition(test)


def _merged(first: dict[K, Value], second: dict[K, Value]) -> dict[K, Value]:
    return {**first, **second}


def _is_container(value: Value) -> bool:
    return isinstance(value, Ref) and value.root.kind == "container" and not value.path


def _adopt(slot: Ref, value: Value) -> None:
    """Make the objects in ``value`` that belong to nothing yet parts of ``slot`` (an attribute,
    or a key of a container that is itself an attribute, ``self.models["actor"]``), so that they
    are the same modules as what ``slot`` names from its outermost owner."""
    for stored in refs(value):
        if stored.path or stored.root.kind not in ("new", "param", "container") or stored.root.parent is not None:
            continue
        if _owned_by(slot, stored.root):
            continue
        stored.root.parent = slot
        if stored.root.kind == "container":
            for key, item in stored.root.items:
                if key is not None:
                    _adopt(stored.child(_key_element(key)), item)


def _owned_by(slot: Ref, obj: Obj) -> bool:
    """Would making ``obj`` a child of ``slot`` create a cycle?"""
    owner: Obj | None = slot.root
    while owner is not None:
        if owner is obj:
            return True
        owner = owner.parent.root if owner.parent is not None else None
    return False


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


def _variables(narrowing: dict[object, Value]) -> dict[str, Value]:
    return {key: value for key, value in narrowing.items() if isinstance(key, str)}


def _slots(narrowing: dict[object, Value]) -> dict[Slot, Value]:
    return {key: value for key, value in narrowing.items() if isinstance(key, tuple)}


def _undo_narrowing(env: Env, narrowing: dict[str, Value], base: Env) -> None:
    for name, value in narrowing.items():
        if env.vars.get(name) is not value:
            continue  # reassigned in the arm
        if name in base.vars:
            env.vars[name] = base.vars[name]
        else:
            del env.vars[name]


def _unknown_wrapper(label: str) -> Ref:
    """A DDP or FSDP1 wrapper around a module we do not know."""
    obj = Obj("wrapper", label)
    obj.wrapped = UNKNOWN
    return Ref(obj)


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


def _factory_params(event: Event, receiver: Ref | None) -> Value:
    """What an outside optimizer factory optimizes: the parameters it is given, else the modules
    it is given (or the module it is a method of), read when it is called."""
    given = Tuple((*event.args, *event.kwargs.values()))
    if any(isinstance(option, Params) for option in walk_contents(given)):
        return given
    first = walk_contents(event.args[0]) if event.args else ()
    modules = [option for option in first if isinstance(option, Ref) and option.root.kind != "container"]
    modules = modules or ([receiver] if receiver is not None else [])
    return choice([Params(frozenset({ParamSource(module, None)})) for module in modules])


def _collect_params(value: Value, index: int) -> Params | None:
    """All parameters an optimizer receives: directly, in lists, in param-group dicts."""
    found: Params | None = None
    for option in walk_contents(value):
        if isinstance(option, Params):
            params = option.materialized(index)
            found = params if found is None else found | params
    return found


def _name_unnamed(value: Value, name: str) -> None:
    """Give the objects in ``value`` that have no name yet the name they are first bound to."""
    for ref in refs(value):
        if ref.root.label is None and not ref.path:
            ref.root.label = name


def _walked(value: Value) -> bool:
    """A module of a ``modules()`` walk (which may be its root)."""
    return isinstance(value, Ref) and bool(value.path) and is_any_depth(value.path[-1])


def _other_module(value: Value) -> bool:
    return isinstance(value, Ref) and not _walked(value)


def _names_in(node: cst.CSTNode) -> set[str]:
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


def _string_expressions(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.FormattedString):
        return [part.expression for part in node.parts if isinstance(part, cst.FormattedStringExpression)]
    if isinstance(node, cst.ConcatenatedString):
        return _string_expressions(node.left) + _string_expressions(node.right)
    return []


def _rank_by_name(name: str, value: Value) -> Value:
    """A variable or attribute named like a rank (``local_rank``, ``is_main_process``) whose value
    is not otherwise known is taken to be one."""
    if (
        value is UNKNOWN
        or (isinstance(value, Ref) and not value.path and value.root.kind == "param")
        or (isinstance(value, Ref) and value.path[-1:] == (name,))
    ):
        kind = names.rank_kind_of_name(name)
        if kind is not None:
            return RankDep(kind)
        uniform = names.uniform_kind_of_name(name) or names.uniform_kind_of_call(name)
        if uniform is not None:
            return Uniform(uniform)
    return value


def _state_dict_method(state: StateDict, name: str) -> Value:
    """A state dict stands for its tensors too: copies and moves keep what they hold, and
    ``.full_tensor()`` gathers the full value."""
    if name in ("items", "values"):
        return Iter(name, (state,))
    if name == "full_tensor":
        return replace(state, full=True)
    return state if name in STATE_PRESERVING or name == "to_local" else UNKNOWN


def _derived_from(args: tuple, kwargs: dict, step: int | None = None) -> Derived | None:
    inputs = [
        option for value in (*args, *kwargs.values()) for option in walk_contents(value) if isinstance(option, Derived)
    ]
    if not inputs:
        return None
    steps = frozenset().union(*(derived.steps for derived in inputs))
    return Derived(frozenset().union(*(d.tags for d in inputs)), steps if step is None else steps | {step})


def _derived_method(value: Derived, name: str, step: int) -> Value:
    tags = value.tags
    if name == "to_local":
        tags = tags | {"local"}
    elif name in ("full_tensor", "redistribute"):
        tags = tags - {"local"}
    return Derived(tags, value.steps | {step})


def _passes_rank_on(qname: str) -> bool:
    """Does a call of a rank-dependent value give a rank-dependent result? Path and string
    builders do; torch's operations (a LoRA `rank` in a shape) and type checks do not."""
    if qname.startswith("builtins."):
        return qname in ("builtins.str", "builtins.format", "builtins.repr", "builtins.float")
    return not qname.startswith("torch.")


def _rank_dependent(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(option, RankDep) for value in (*args, *kwargs.values()) for option in walk_contents(value))


def _rank_kind(value: Value) -> str | None:
    """The rank kind of a value; for alternatives, the kind of the rank-dependent one when the
    others are constants (``return 0 if not dist.is_initialized() else dist.get_rank()``)."""
    if isinstance(value, RankDep):
        return value.kind
    if isinstance(value, Choice):
        kinds = {option.kind for option in value.options if isinstance(option, RankDep)}
        if len(kinds) == 1 and all(isinstance(option, (RankDep, Const)) for option in value.options):
            return kinds.pop()
    return None


def _negate_rank(value: Value) -> Value:
    kind = _rank_kind(value)
    negated = {"zero": "nonzero", "nonzero": "zero", "rank": "zero", "mixed": "mixed"}.get(kind or "")
    return RankDep(negated) if negated else UNKNOWN


def _compare_world_size(left: Value, operator: cst.BaseCompOp, right: Value) -> Uniform | None:
    """``world_size > 1`` and the like: is the job distributed?"""
    if right == Uniform("size") and left != Uniform("size"):
        left, right = right, left
        operator = _MIRRORED.get(type(operator), operator)
    number = const(right)
    if left != Uniform("size") or not isinstance(number, int) or number not in (1, 2):
        return None
    distributed = {
        (cst.GreaterThan, 1): True,
        (cst.NotEqual, 1): True,
        (cst.GreaterThanEqual, 2): True,
        (cst.Equal, 1): False,
        (cst.LessThanEqual, 1): False,
        (cst.LessThan, 2): False,
    }.get((type(operator), number))
    return None if distributed is None else Uniform("dist" if distributed else "single")


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


def _compare_rank(left: Value, operator: cst.BaseCompOp, right: Value) -> Value:
    if _rank_kind(right) == "rank" and _rank_kind(left) != "rank":
        left, right = right, left
        operator = _MIRRORED.get(type(operator), operator)
    if _rank_kind(left) != "rank":
        return RankDep("mixed") if _rank_kind(left) or _rank_kind(right) else UNKNOWN
    if isinstance(operator, (cst.Is, cst.IsNot)):  # `rank is not None`: was a rank given? (every rank agrees)
        return UNKNOWN
    number = const(right)
    if isinstance(operator, (cst.In, cst.NotIn)):
        members = [const(item) for item in _elements(right)]
        kind = "zero" if 0 in members and all(m in (0, -1) for m in members) else "mixed"
        return RankDep(kind if isinstance(operator, cst.In) else _negate_rank(RankDep(kind)).kind)  # type: ignore[union-attr]
    if not isinstance(number, int) or isinstance(number, bool):
        return RankDep("mixed")
    distributed = {  # rank -1 stands for "not launched distributed" (RANK unset)
        (cst.NotEqual, -1): True,
        (cst.GreaterThan, -1): True,
        (cst.GreaterThanEqual, 0): True,
        (cst.Equal, -1): False,
        (cst.LessThan, 0): False,
        (cst.LessThanEqual, -1): False,
    }.get((type(operator), number))
    if distributed is not None:
        return Uniform("dist" if distributed else "single")
    zero_test = {
        cst.Equal: number == 0,
        cst.LessThan: number == 1,
        cst.LessThanEqual: number == 0,
    }.get(type(operator))
    nonzero_test = {
        cst.NotEqual: number == 0,
        cst.GreaterThan: number == 0,
        cst.GreaterThanEqual: number == 1,
    }.get(type(operator))
    if zero_test:
        return RankDep("zero")
    if nonzero_test:
        return RankDep("nonzero")
    return RankDep("mixed")


_MIRRORED = {
    cst.LessThan: cst.GreaterThan(),
    cst.GreaterThan: cst.LessThan(),
    cst.LessThanEqual: cst.GreaterThanEqual(),
    cst.GreaterThanEqual: cst.LessThanEqual(),
}


def _rank_guards(node: cst.If | cst.IfExp, kind: str | None, depth: int) -> tuple[RankGuard | None, RankGuard | None]:
    """The ranks that run the true and the false arm of an ``if`` whose test has the given rank kind."""
    arms = {
        "zero": ("zero", "nonzero"),
        "rank": ("nonzero", "zero"),
        "nonzero": ("nonzero", "zero"),
        "zero_subset": ("zero", None),
        "subset": ("subset", None),
        "mixed": ("subset", "subset"),
    }.get(kind or "", (None, None))
    return tuple(  # type: ignore[return-value]
        RankGuard(node.test, ranks, depth, (id(node), arm)) if ranks else None for arm, ranks in enumerate(arms)
    )


def _enter(ctx: Context, manager: Value) -> Context:
    """The context inside ``with manager:``."""
    ctx = ctx.with_(managers=ctx.managers + (manager,))
    for ref in refs(manager):
        event = ref.root.event
        qname = ref.root.qname or ""
        if event is None:
            continue
        if qname in names.GRAD_DISABLING or (
            qname == "torch.set_grad_enabled" and const(event.arg(0) or UNKNOWN) is False
        ):
            ctx = ctx.with_(no_grad=True)
        elif qname == "torch.enable_grad":
            ctx = ctx.with_(no_grad=False)
        elif (qname == "torch.device" and const(event.arg(0, "type") or UNKNOWN) == "meta") or qname.endswith(
            "init_empty_weights"
        ):
            ctx = ctx.with_(meta_device=True)
    return ctx


def _decorated(ctx: Context, decorators: tuple[Value, ...], info: FunctionInfo, depth: int) -> Context:
    """The context of a function body given its decorators (``@torch.no_grad()``, ``@rank_zero_only``)."""
    for decorator, node in zip(decorators, info.node.decorators, strict=True):
        for option in options(decorator):
            qname = option.qname if isinstance(option, Symbol) else ""
            if isinstance(option, Ref):
                qname = option.root.qname or ""
            last = qname.rpartition(".")[2] or dotted(node.decorator).rpartition(".")[2]
            if last in names.RANK_ZERO_DECORATORS:
                ctx = ctx.with_(rank_guard=RankGuard(node, "zero", depth))
            ctx = _enter(ctx, option) if isinstance(option, Ref) else ctx
    return ctx


def _share_class_sharding(traces: list[Trace]) -> None:
    """A method that no code in the file calls runs at an order we cannot see, so modules that
    other methods of its class shard (``self.model``) are taken as sharded from its start, and
    attributes they set to an optimizer over sharded parameters (``self.optimizer``) as holding one."""
    sharded: dict[ClassInfo, list[tuple[Trace, tuple[str, ...]]]] = {}
    optimizers: dict[ClassInfo, list[tuple[Trace, tuple[str, ...]]]] = {}
    for trace in traces:
        instance = trace.instance
        if instance is None:
            continue
        for shard in trace.shards:
            for target in shard.targets:
                target = canonical(target)
                if target.root is instance.root:
                    sharded.setdefault(instance.root.cls, []).append((trace, target.path))
        for store in trace.of_kind("store"):
            for owner in refs(store.receiver):
                owner = canonical(owner)
                if owner.root is instance.root and any(trace.sharded_optimizer(ref) for ref in refs(store.args[0])):
                    optimizers.setdefault(instance.root.cls, []).append((trace, owner.path + (store.name,)))
    for trace in traces:
        instance = trace.instance
        if instance is None:
            continue
        paths = {path for owner, path in sharded.get(instance.root.cls, ()) if owner is not trace}
        trace.assumed_sharded = [Ref(instance.root, path) for path in sorted(paths)]
        paths = {path for owner, path in optimizers.get(instance.root.cls, ()) if owner is not trace}
        trace.assumed_optimizers = [Ref(instance.root, path) for path in sorted(paths)]


def _symbol_returns_first(interp: Interpreter, event: Event) -> Value:
    return event.arg(0) or UNKNOWN


def _wrapper(kind: str):
    def make(interp: Interpreter, event: Event) -> Value:
        obj = Obj(kind, None, qname=event.qname, node=event.node)
        obj.event = event
        obj.wrapped = event.arg(0, "module")
        return Ref(obj)

    return make


def _state_dict_of(position: int, keyword: str):
    """``get_model_state_dict(model, ...)`` / ``get_optimizer_state_dict(model, optimizers, ...)``."""

    def make(interp: Interpreter, event: Event) -> Value:
        owner = event.arg(position, keyword)
        full = _full_state_dict(event.kwargs.get("options"))
        found: list[Value] = []
        for ref in refs(choice(list(walk_contents(owner)))) if owner is not None else ():
            is_optimizer = ref.root.kind == "optimizer" and not ref.path
            found.append(StateDict(ref.root if is_optimizer else ref, event.index, full))
        return choice(found)

    return make


def _get_state_dict(interp: Interpreter, event: Event) -> Value:
    return Tuple((_state_dict_of(0, "model")(interp, event), _state_dict_of(1, "optimizers")(interp, event)))


def _full_state_dict(options_value: Value | None) -> bool | None:
    """Does a ``StateDictOptions`` value ask for full (gathered) tensors? None when unknown."""
    if options_value is None:
        return False
    for ref in refs(options_value):
        event = ref.root.event
        if event is not None and event.qname == names.STATE_DICT_OPTIONS:
            full = const(event.kwargs.get("full_state_dict", Const(False)))
            return full if isinstance(full, bool) else None
    return None


def _loaded(interp: Interpreter, event: Event) -> Value:
    path = event.arg(0, "f") or event.arg(0, "filename") or UNKNOWN
    return Loaded(per_rank=any(isinstance(option, RankDep) for option in walk_contents(path)))


def _environ_get(interp: Interpreter, event: Event) -> Value:
    key = const(event.arg(0) or UNKNOWN)
    if key in names.RANK_ENV_VARS:
        return RankDep("rank")
    return Uniform("size") if key in names.WORLD_SIZE_ENV_VARS else interp.new_object(event, event.qname)


def _set_default_device(interp: Interpreter, event: Event) -> Value:
    """``torch.set_default_device("meta")``: what the rest of the block builds is on the meta device."""
    device = const(event.arg(0, "device") or UNKNOWN)
    if isinstance(device, str):
        interp.ctx = interp.ctx.with_(meta_device=device.startswith("meta"))
    return Const(None)


def _copy(interp: Interpreter, event: Event) -> Value:
    """``copy.deepcopy(x)``: a new object of the same kind as ``x``."""
    original = event.arg(0, "x")
    obj = Obj("new", None, node=event.node)
    obj.event = event
    if isinstance(original, Ref) and not original.path:
        obj.qname, obj.cls = original.root.qname, original.root.cls
    return Ref(obj)


def _partial(interp: Interpreter, event: Event) -> Value:
    if not event.args:
        return UNKNOWN
    return Partial(event.args[0], event.args[1:], tuple(event.kwargs.items()))


def _module_container(interp: Interpreter, event: Event) -> Value:
    """``nn.Sequential(a, b)`` / ``nn.ModuleList([a, b])`` / ``nn.ModuleDict({...})``: the modules
    given become its children, so sharding ``a`` shards part of the container."""
    container = interp.new_object(event, event.qname)
    if event.qname == "torch.nn.Sequential":
        children: list[tuple[object, Value]] = list(enumerate(event.args))
    else:
        given = event.arg(0, "modules") or UNKNOWN
        items = _container_items(given) or []
        literal = isinstance(given, Tuple) or (
            isinstance(given, Ref) and isinstance(given.root.node, (cst.List, cst.Tuple, cst.Dict))
        )
        # A literal names each child; a comprehension's one element stands for all of them.
        children = [(index if key is None else key, value) for index, (key, value) in enumerate(items)]
        children = children if literal else [(None, value) for _, value in items]
    for key, value in children:
        slot = container.child(_key_element(key))  # type: ignore[union-attr]
        for child in refs(value):
            if not child.path and child.root.kind in ("new", "param") and child.root.parent is None:
                if not _owned_by(slot, child.root):
                    child.root.parent = slot
    return container


def _symbol_returns_second(interp: Interpreter, event: Event) -> Value:
    return event.arg(1, "val") or UNKNOWN


_SYMBOL_CALLS = {
    names.FULLY_SHARD: _symbol_returns_first,
    "torch.compile": _symbol_returns_first,
    "typing.cast": _symbol_returns_second,
    "copy.deepcopy": _copy,
    "functools.partial": _partial,
    **{f"torch.nn.{name}": _module_container for name in ("Sequential", "ModuleList", "ModuleDict")},
    names.DDP: _wrapper("ddp"),
    names.FSDP1: _wrapper("fsdp1"),
    names.GET_MODEL_STATE_DICT: _state_dict_of(0, "model"),
    names.GET_OPTIMIZER_STATE_DICT: _state_dict_of(1, "optimizers"),
    names.GET_STATE_DICT: _get_state_dict,
    "os.environ.get": _environ_get,
    **{loader: _loaded for loader in names.LOADERS},
    "os.getenv": _environ_get,
    "torch.set_default_device": _set_default_device,
}

_STATEMENTS = {
    cst.FunctionDef: Interpreter.exec_function_def,
    cst.ClassDef: Interpreter.exec_class_def,
    cst.If: Interpreter.exec_if,
    cst.For: Interpreter.exec_for,
    cst.While: Interpreter.exec_while,
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
    cst.IfExp: Interpreter.eval_if_exp,
    cst.NamedExpr: Interpreter.eval_named,
    cst.Await: Interpreter.eval_await,
    cst.Lambda: lambda self, node: Lambda(node, self.frame.env),
}


def interpret(module: cst.Module, source: bytes) -> list[Trace]:
    return Interpreter(module, source).run()
