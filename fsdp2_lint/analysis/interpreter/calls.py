"""Calls: the half of :class:`~.core.Interpreter` that calls values. Same-file functions,
methods, lambdas and constructors are expanded in place with their arguments bound; builtins that
move values around (``list``, ``getattr``, ``map``, ...) are evaluated here; torch's calls are
answered by :mod:`.torch_api`. Mixed into the interpreter, whose state and expressions it uses.

A call of a same-file function is expanded once per distinct input and replayed from its
summary after that (:mod:`.summaries`: what the key holds, which calls are replayed and which
expanded each time, and the bound on both). A call past the bound, deeper than
``MAX_CALL_DEPTH`` or recursing more than ``MAX_RECURSION`` times is analysed like a call to a
function of another file (its events are not in the caller's trace), and a function no call
expanded is still analysed as an entry point of its own. A ``@contextmanager`` generator a
``with`` enters is expanded up to its ``yield`` and resumed at the ``with``'s exit
(:mod:`.generators`): such a call is never summarised. An object whose class defines ``__enter__``
and ``__exit__`` runs the first at the ``with``'s entry and the second at its exit.
"""

from __future__ import annotations

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter import flow, generators, guards, summaries, torch_api, versions
from fsdp2_lint.analysis.interpreter.generators import Exiting, Split, Suspended
from fsdp2_lint.analysis.interpreter.order import reversed_items, reversed_order
from fsdp2_lint.analysis.interpreter.state import Env, Frame, Slot, slot_keys
from fsdp2_lint.analysis.model import (
    ANY,
    UNKNOWN,
    UNKNOWN_KEYWORDS,
    BoundMethod,
    Choice,
    Class,
    ClassInfo,
    Const,
    Context,
    Event,
    EventKind,
    FsdpVersion,
    Function,
    FunctionInfo,
    Iter,
    IterKind,
    Lambda,
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
    Value,
    canonical,
    choice,
    const,
    container_items,
    elements,
    is_container,
    keyword_items,
    mapping_items,
    next_serial,
    options,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted, statements

MAX_CALL_DEPTH = 8
MAX_RECURSION = 2  # a recursive function is expanded one level deep (children, then the module)


class Calls:
    """Evaluates calls; part of :class:`~.core.Interpreter`."""

    def eval_call(self, node: cst.Call) -> Value:
        if not _called_name(node).startswith("assert") or self.ctx.asserted:
            return self._eval_call(node)
        outer = self.ctx
        self.ctx = outer.with_(asserted=True)  # what it is given is computed to be checked
        try:
            return self._eval_call(node)
        finally:
            self.ctx = outer

    def _eval_call(self, node: cst.Call) -> Value:
        if versions.is_version_probe(node):
            return FsdpVersion(self.eval(node.args[0].value))
        if isinstance(node.func, cst.Attribute):
            receiver = self.eval(node.func.value)
            args, kwargs = self.eval_args(node)
            return self.call_method(receiver, node.func.attr.value, args, kwargs, node)
        callee = self.eval(node.func)
        args, kwargs = self.eval_args(node)
        result = self.alternatives(callee, node, lambda option: self.call_value(option, args, kwargs, node))
        type_test = versions.fsdp2_type_test(self, node, args)
        return result if type_test is None else type_test

    def alternatives(self, value: Value, node: cst.CSTNode, call) -> Value:
        """``call`` on each option of ``value``. Exclusive options (one object or another, not a
        loop's elements one after the other) run in exclusive branches: calling
        ``STRATEGIES.get(name, default).parallelize(model)`` runs one strategy, not all in turn. A
        choice of objects is one branch wherever it is called: the strategy that wrapped the model
        is the one that later steps it (``self.strategy.wrap(m)``, ``self.strategy.step(model)``)."""
        opts = options(value)
        if not (isinstance(value, Choice) and not value.sequential and len(opts) > 1):
            return choice([call(option) for option in opts])
        branch = _choice_branch(opts) or id(node)
        outer, results = self.ctx, []
        for index, option in enumerate(opts):
            self.ctx = outer.with_(branches=outer.branches + ((branch, index),))
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
        if not isinstance(callee, (Function, Class, BoundMethod, Partial, Lambda)) and not (
            isinstance(callee, Symbol) and _keeps_settings(callee.qname)
        ):
            self.mutations += 1  # a call we cannot see into may change any setting (conditions.py)
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
        if isinstance(callee, Partial):  # partial(impl, ...) where impl is one function or another
            bound = {**dict(callee.kwargs), **kwargs}
            return self.alternatives(
                callee.func, node, lambda option: self.call_value(option, callee.args + args, bound, node)
            )
        if isinstance(callee, Lambda):
            return self.call_lambda(callee, args, kwargs)
        event = self.record(EventKind.CALL, node, name=dotted(node.func) or None, args=args, kwargs=kwargs)
        return self.new_object(event, None)

    def call_lambda(self, fn: Lambda, args: tuple, kwargs: dict) -> Value:
        """Evaluate a lambda's body with its parameters bound, in the scope it was written in."""
        depth = len(self.active) + len(self.active_lambdas)
        if fn.node in self.active_lambdas or depth >= MAX_CALL_DEPTH or self.summaries.exhausted(self.steps):
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
        self.frame.env = Env(fn.closure if isinstance(fn.closure, Env) else self.frame.scope.env, variables)
        self.active_lambdas.append(fn.node)
        try:
            return self.eval(fn.node.body)
        finally:
            self.frame.env = outer
            self.active_lambdas.pop()

    def call_defined(self, fn: Function, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        """Call a same-file function. A bound one (``step = model.forward; step(x)``) is a method call."""
        if not self.follows(fn, args, kwargs):  # another module's function nothing that matters reaches
            self.mutations += 1
            event = self.record(EventKind.CALL, node, name=fn.info.name, args=args, kwargs=kwargs)
            return self.new_object(event, None)
        event = None
        if fn.bound is not None:
            event = self.record(EventKind.METHOD, node, name=fn.info.name, receiver=fn.bound, args=args, kwargs=kwargs)
        result = self.call_function(fn, args, kwargs, node)
        if result is None:
            if event is None:
                self.record(EventKind.CALL, node, name=fn.info.name, args=args, kwargs=kwargs)
            result = UNKNOWN
        if event is not None:
            event.result = result
        return result

    def new_object(self, event: Event, qname: str | None) -> Value:
        obj = Obj(ObjKind.NEW, qname=qname, node=event.node, event=event)
        event.result = Ref(obj)
        return event.result

    def call_symbol(self, qname: str, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        if qname.startswith("builtins."):
            result = self.call_builtin(qname[9:], args, kwargs, node)
            if result is not None:
                return result
        event = self.record(EventKind.CALL, node, qname=qname, name=qname.rpartition(".")[2], args=args, kwargs=kwargs)
        owners = [(ref.root, ref.root.parent) for value in (*args, *kwargs.values()) for ref in _refs_inside(value)]
        event.result = torch_api.call_symbol(self, event)
        if any(obj.parent is not parent for obj, parent in owners):  # `nn.ModuleList([a, b])` adopts a and b
            self.world.changed()
        return event.result

    def call_builtin(self, name: str, args: tuple, kwargs: dict, node: cst.Call) -> Value | None:
        first = args[0] if args else UNKNOWN
        if name in ("list", "tuple", "set", "sorted", "frozenset", "dict"):
            if args:
                copied = self.materialize(first, node)
                for option in options(copied) if name == "dict" else ():  # dict(base, seed=0)
                    if is_container(option):
                        option.root.items.extend(keyword_items(kwargs))
                return copied
            container = Obj.container(keyword_items(kwargs), node)  # dict(mesh=mesh, ...)
            return Ref(container)
        if name == "filter" and len(args) == 2 and any(isinstance(o, ModuleIter) for o in options(args[1])):
            return flow.filtered_modules(self, first, args[1], node)
        if name in ("iter", "filter") and args:
            return args[-1] if name == "filter" else first
        if name == "next":
            return self.element_of(first, lazy=False)
        if name == "map" and len(args) >= 2:  # run once on an element of each iterable
            elements = tuple(self.element_of(arg, lazy=False) for arg in args[1:])
            container = Obj.container(
                [(None, choice([self.call_value(f, elements, {}, node) for f in options(first)]))], node
            )
            return Ref(container)
        if name == "reversed":
            return choice([reversed_order(option) for option in options(first)])
        if name in ("enumerate", "zip"):
            return Iter(IterKind.ENUMERATE, args[:1]) if name == "enumerate" else Iter(IterKind.ZIP, args)
        attributes = [const(option) for option in options(args[1])] if len(args) >= 2 else []
        if name == "getattr" and attributes and all(isinstance(attribute, str) for attribute in attributes):
            # getattr(self, name) for name in ("actor", "critic"): one of those attributes
            value = choice([self.attribute(args[0], attribute, node) for attribute in attributes])
            return choice([value, args[2]]) if len(args) > 2 else value
        if name == "getattr" and len(args) >= 2 and isinstance(first, Symbol):
            return Symbol(f"{first.qname}.{ANY}")  # getattr(torch.optim, cfg.name): some member
        if name == "setattr" and self.patch_symbol(args):
            return Const(None)
        if name == "setattr" and len(args) == 3 and isinstance(const(args[1]), str):
            self.store(args[0], const(args[1]), args[2], node)
            return Const(None)
        if name == "super":
            frame = self.frame
            return Super(frame.self_ref, frame.cls) if frame.self_ref and frame.cls else UNKNOWN
        if name == "int" and isinstance(first, (RankDep, Uniform)):
            return first
        if name == "isinstance" and len(args) == 2:
            decided = guards.project_instance_test(first, args[1])
            return None if decided is None else Const(decided)
        return None

    def materialize(self, value: Value, node: cst.CSTNode) -> Value:
        results = []
        for option in options(value):
            if isinstance(option, Params):
                results.append(option.materialized(self.now()))
            elif isinstance(option, Ref) and option.root.kind is ObjKind.CONTAINER and not option.path:
                copy = Obj.container(list(option.root.items), node)
                results.append(Ref(copy))
            elif isinstance(option, Ref):
                results.append(ModuleIter(option, self_included=False, named=False))
            elif isinstance(option, (ModuleIter, Tuple, StateDict)):
                results.append(option)
            else:
                element = self.element_of(option, lazy=False)
                container = Obj.container([] if element is UNKNOWN else [(None, element)], node)
                results.append(Ref(container))
        return choice(results)

    def call_method(
        self, receiver: Value, name: str, args: tuple, kwargs: dict, node: cst.Call, attribute_read: bool = False
    ) -> Value:
        """``receiver.name(...)``. ``attribute_read``: the attribute was already read (a bound
        method value), so what it holds must not be looked up again."""
        if name == "setattr" and self.patch_symbol(args):
            return Const(None)
        opts = options(receiver)
        if opts and all(isinstance(option, Symbol) for option in opts):  # `checkpoint.save(...)`, `torch.save(...)`
            targets = [self.resolved(Symbol(apis.canonical(f"{o.qname}.{name}"))) for o in opts]
            return choice([self.call_value(target, args, kwargs, node) for target in targets])
        if name not in _SETTINGS_KEPT_BY:
            self.mutations += 1  # `cfg.update(...)`, `flags.append(...)`: may change a setting
        stored = None if attribute_read else self.stored_attribute(opts, name)
        if stored is not None:  # `self.model(x)`: call what the attribute holds
            return self.alternatives(stored, node, lambda option: self.call_value(option, args, kwargs, node))
        event = self.record(EventKind.METHOD, node, name=name, receiver=receiver, args=args, kwargs=kwargs)
        event.result = self.alternatives(
            receiver, node, lambda option: self.method_of(option, name, args, kwargs, event)
        )
        if event.result is UNKNOWN and torch_api.rank_dependent((receiver, *args), kwargs):  # "{}.pt".format(rank)
            event.result = RankDep(RankKind.MIXED)
        return event.result

    def patch_symbol(self, args: tuple) -> bool:
        """``setattr(fsdp, "fully_shard", fake)`` or ``monkeypatch.setattr(...)`` on a module named by
        a symbol (torch's): code that looks the name up afterwards gets ``fake``, as a test means."""
        if len(args) != 3 or not isinstance(args[0], Symbol) or not isinstance(const(args[1]), str):
            return False
        self.patched[apis.canonical(f"{args[0].qname}.{const(args[1])}")] = args[2]
        return True

    def stored_attribute(self, receivers: tuple[Value, ...], name: str) -> Value | None:
        """The value assigned to ``receiver.name``, when every receiver has one."""
        stored = []
        for receiver in receivers:
            if not isinstance(receiver, Ref):
                return None
            slot = self.stored_slot(receiver, name)
            if slot is None:
                return None
            stored.append(self.heap[slot])
        return choice(stored) if stored else None

    def stored_slot(self, receiver: Ref, name: str) -> Slot | None:
        """The heap slot that holds what was assigned to ``receiver.name``, if anything was."""
        return next((key for key in slot_keys(receiver, name) if key in self.heap), None)

    def method_of(self, receiver: Value, name: str, args: tuple, kwargs: dict, event: Event) -> Value:
        node = event.node
        if isinstance(receiver, Ref):
            cls = receiver.root.cls if not receiver.path else None
            method = cls.method(name) if cls else None
            if method is not None:
                return self.call_function(self.function_value(method, receiver), args, kwargs, node) or UNKNOWN
            if receiver.root.kind is ObjKind.CONTAINER and not receiver.path:
                return self.container_method(receiver, name, args, kwargs)
            if receiver.root.kind is ObjKind.OPTIMIZER and not receiver.path:
                found = torch_api.optimizer_method(self, receiver, name, event)
                if found is not None:
                    return found
            return torch_api.module_method(self, receiver, name, event)
        if isinstance(receiver, Super):
            method = _super_method(receiver, name)
            if method is not None:
                bound = self.function_value(method, receiver.receiver)
                return self.call_function(bound, args, kwargs, node) or UNKNOWN
            return UNKNOWN
        if isinstance(receiver, Class):
            method = receiver.info.method(name)
            if method is None:
                return UNKNOWN
            owned = self.function_value(method, owner=receiver.info)
            return self.call_function(owned, args, kwargs, node) or UNKNOWN
        return torch_api.value_method(receiver, name, event)

    def container_method(self, receiver: Ref, name: str, args: tuple, kwargs: dict) -> Value:
        items = receiver.root.items
        if name == "get" and args:  # the value under the key, or under an unknown one, or the default
            key = const(args[0])
            return self.container_item(
                receiver, None if key is NotImplemented else key, args[1] if len(args) > 1 else Const(None)
            )
        if name in ("append", "add", "insert") and args:
            self.world.changed()
            items.append((None, args[-1]))
        elif name == "extend" and args:
            self.world.changed()
            items.extend((None, item) for item in elements(args[0]))
        elif name == "update" and (args or kwargs):
            self.world.changed()
            items.extend(mapping_items(args[0]) if args else [])
            items.extend(keyword_items(kwargs))
        elif name == "reverse":
            self.world.changed()
            items[:] = reversed_items(items)
        elif name in ("items", "values"):
            return Iter(IterKind.ITEMS, (receiver,)) if name == "items" else receiver
        elif name == "copy":
            return receiver
        return UNKNOWN

    def invoke(self, ref: Ref, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        event = self.record(EventKind.INVOKE, node, receiver=ref, args=args, kwargs=kwargs)
        event.result = self.invoke_forward(ref, args, event)
        return event.result

    def invoke_forward(self, ref: Ref, args: tuple, event: Event) -> Value:
        cls = ref.root.cls if not ref.path else None
        method = cls and (cls.method("__call__") or cls.method("forward"))
        if method is None:
            return self.new_object(event, None)
        outer = self.ctx
        self.ctx = outer.with_(forward_of=outer.forward_of + (canonical(ref),))
        result = self.call_function(self.function_value(method, ref), args, dict(event.kwargs), event.node)
        self.ctx = outer
        return result if result is not None else self.new_object(event, None)

    def construct(self, info: ClassInfo, args: tuple, kwargs: dict, node: cst.Call) -> Value:
        event = self.record(EventKind.CALL, node, name=info.name, args=args, kwargs=kwargs)
        if torch_api.is_optimizer_class(info):
            instance = torch_api.new_optimizer(self, event, event.arg(0, "params"), None, info)
        else:
            obj = Obj(ObjKind.NEW, cls=info, node=node, event=event)
            instance = Ref(obj)
        init = info.method("__init__")
        if init is not None:
            # No frame for the constructor: a caller cannot reorder `__init__` after other
            # methods, so what happens inside it is reported inside it.
            self.call_function(self.function_value(init, instance), args, kwargs, None)
        elif is_dataclass(info):
            self.init_dataclass(info, instance, args, kwargs, node)
        event.result = instance
        return instance

    def init_dataclass(self, info: ClassInfo, instance: Ref, args: tuple, kwargs: dict, node: cst.Call) -> None:
        """The ``__init__`` a dataclass generates: store each field, then run ``__post_init__``."""
        fields = [name for cls in reversed(list(info.mro())) for name in _annotated_fields(cls)]
        for index, name in enumerate(dict.fromkeys(fields)):
            if index < len(args) or name in kwargs:
                self.store(instance, name, args[index] if index < len(args) else kwargs[name], node)
            else:
                default = self.field_default(info, name)
                if default is not None:
                    self.store(instance, name, default, node)
        post_init = info.method("__post_init__")
        if post_init is not None:
            self.call_function(self.function_value(post_init, instance), (), {}, None)

    def field_default(self, info: ClassInfo, name: str) -> Value | None:
        """What a dataclass field declared ``field(default=v)`` or ``field(default_factory=f)``
        holds when the constructor is not given it: ``v``, or what calling ``f`` returns, a new
        object for each instance. None for a plain default, read from the class as it is."""
        declared = self.class_attribute(info, name)
        for ref in refs(declared) if declared is not None else ():
            event = ref.root.event
            if ref.path or event is None or ref.root.qname != DATACLASS_FIELD:
                continue
            if "default" in event.kwargs:
                return event.kwargs["default"]
            factory = event.kwargs.get("default_factory")
            if factory is not None and isinstance(event.node, cst.Call):
                return choice([self.call_value(option, (), {}, event.node) for option in options(factory)])
        return None

    def call_function(
        self, fn: Function, args: tuple, kwargs: dict, node: cst.CSTNode | None, symbolic: bool = False
    ) -> Value | None:
        """Expand a same-file function in place, or replay its summary; None when it is neither
        (recursion, depth, the bounds). ``symbolic``: an entry point's own run, which always happens."""
        info = fn.info
        if not symbolic and (
            self.active.count(info) >= MAX_RECURSION
            or len(self.active) >= MAX_CALL_DEPTH
            or self.past_module_budget(info)
        ):
            return None
        stack = self.frame.stack + ((node,) if node is not None else ())
        split = self.entered_generator(fn, node)
        if split is not None:  # its code after the `yield` runs at the `with`'s exit: never one summary
            return (
                self.enter_generator(fn, args, kwargs, stack, split)
                if self.summaries.may_expand(info, self.steps)
                else None
            )
        token = None if symbolic else self.summary_key(fn, args, kwargs, node)
        summary = self.summaries.table.get(token) if token is not None else None
        if summary is not None:
            self.mutations += 1  # a replayed summary's stores are not seen one by one
            return summaries.replay(self, summary, stack) if self.summaries.may_replay(summary, self.steps) else None
        if not symbolic and not self.summaries.may_expand(info, self.steps):
            return None
        start, before = len(self.events), (self.world.version, self.loops_seen, next_serial())
        result = self.expand(fn, args, kwargs, stack, symbolic)
        if token is not None:
            found = summaries.summarize(self, start, stack, result, before)
            if found is not None:
                self.summaries.table[token] = found
        return result

    def summary_key(self, fn: Function, args: tuple, kwargs: dict, node: cst.CSTNode | None) -> tuple | None:
        return summaries.key(
            fn,
            args,
            kwargs,
            self.ctx,
            (len(self.frame.stack), len(self.active), len(self.active_lambdas)),
            node is not None,
            self.world.version,
            self.star_count(),
            self.module_envs,
        )

    def expand(self, fn: Function, args: tuple, kwargs: dict, stack: tuple, symbolic: bool) -> Value:
        """Run the function's body with its parameters bound, under the frames ``stack``."""
        frame, ctx = self.callee_frame(fn, stack)

        def run() -> None:
            self.bind_parameters(fn, args, kwargs, symbolic)
            self.exec_block(statements(fn.info.node.body))

        self.run_in_frame(fn.info, frame, ctx, run)
        return returned(frame)

    def callee_frame(self, fn: Function, stack: tuple) -> tuple[Frame, Context]:
        """The frame and context a call of ``fn`` under the frames ``stack`` runs in."""
        info = fn.info
        scope = self.scope_of[info]
        closure = fn.closure if isinstance(fn.closure, Env) else scope.env
        frame = Frame(Env(closure), scope, stack, fn.bound, info.cls)
        ctx = torch_api.decorated(self.ctx.in_function(), self._decorators(info), info, len(frame.stack))
        frame.entry_loops, frame.function = len(ctx.loops), info.node
        return frame, ctx

    def run_in_frame(self, info: FunctionInfo, frame: Frame, ctx: Context, run) -> None:
        """``run`` as code of ``info`` in ``frame`` and ``ctx``; then the caller's frame again."""
        self.invoked.add(info)
        self.active.append(info)
        foreign = self.scope_of[info] is not self.main
        self.foreign_running += foreign
        outer_frame, outer_ctx = self.frame, self.ctx
        self.frame, self.ctx = frame, ctx
        try:
            run()
        finally:
            self.frame, self.ctx = outer_frame, outer_ctx
            self.active.pop()
            self.foreign_running -= foreign

    # --- generators entered by a `with` (see :mod:`.generators`) ----------------------------------

    def entered_generator(self, fn: Function, node: cst.CSTNode | None) -> Split | None:
        """Where ``node`` is the call a ``with`` item enters and ``fn`` a context manager written
        as a generator: its body cut at the ``yield``. The call is then no longer entered."""
        if node is None or id(node) not in self.entering:
            return None
        info = fn.info
        if not generators.is_context_manager(info, self._decorators(info)):
            return None
        self.entering = self.entering - {id(node)}
        if info not in self.splits:
            self.splits[info] = generators.split_at_yield(statements(info.node.body))
        return self.splits[info]

    def enter_generator(self, fn: Function, args: tuple, kwargs: dict, stack: tuple, split: Split) -> Value:
        """Run the generator up to its ``yield``; the ``with`` resumes it at its exit. Its value is
        what it yields."""
        frame, ctx = self.callee_frame(fn, stack)

        def run() -> None:
            self.bind_parameters(fn, args, kwargs, False)
            self.exec_block(split.before)

        self.run_in_frame(fn.info, frame, ctx, run)
        self.suspended.append(Suspended(fn.info, frame, ctx, split.after))
        return choice(frame.yielded) if frame.yielded else UNKNOWN

    def resume(self, entered: Suspended | Exiting) -> None:
        """Run a generator's code after its ``yield``, or the ``__exit__`` of an object: a ``with``
        that entered it exits (with no exception: ``None`` for its type, value and traceback)."""
        if isinstance(entered, Exiting):
            self.call_special(entered.manager, entered.name, (Const(None),) * 3, entered.node)
        else:
            self.run_in_frame(entered.info, entered.frame, entered.ctx, lambda: self.exec_block(entered.after))

    def enter_object(self, manager: Value, node: cst.CSTNode, asynchronous: bool) -> tuple[Value, Exiting | None]:
        """``with manager:`` where ``manager`` is an instance of a class of the project that defines
        ``__enter__``: what that returns (the value ``as`` binds), and the exit to run later."""
        enter, exit_ = generators.special_methods(asynchronous)
        if not any(_defined_method(option, enter) for option in options(manager)):
            return manager, None
        return self.call_special(manager, enter, (), node), Exiting(manager, node, exit_)

    def call_special(self, manager: Value, name: str, args: tuple, node: cst.CSTNode) -> Value:
        """The method ``name`` the ``with`` at ``node`` calls on each option of ``manager`` that
        defines it; an option that does not, or whose method is past the bounds, is left as it is
        (``__enter__`` mostly returns ``self``)."""

        def call(option: Value) -> Value:
            method = _defined_method(option, name)
            result = self.call_function(self.function_value(method, option), args, {}, node) if method else None
            return option if result is None else result

        return self.alternatives(manager, node, call)

    def bind_parameters(self, fn: Function, args: tuple, kwargs: dict, symbolic: bool) -> None:
        params = fn.info.node.params
        positional = list(params.posonly_params) + list(params.params)
        if positional and self._decorated(fn.info, "builtins.classmethod"):
            self.bind(positional.pop(0).name.value, _class_of(fn))  # `cls`: `cls(...)` builds one
        elif fn.bound is not None and positional and not self._is_static(fn.info):
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
            name_unnamed(value, name)  # `main(Net())`: the model is `model` in messages
            self.bind(name, value)
        if isinstance(params.star_arg, cst.Param):
            self.bind(params.star_arg.name.value, Tuple(tuple(args[len(positional) :])))
        for param in params.kwonly_params:
            name = param.name.value
            if name not in remaining:
                self.frame.defaulted.add(name)
            self.bind(name, remaining.pop(name) if name in remaining else self._default(param, symbolic))
        if params.star_kwarg is not None:
            container = Obj.container(list(remaining.items()))
            self.bind(params.star_kwarg.name.value, Ref(container))
        self.frame.bindings.clear()  # parameters: bound once per call, at the function's site

    def _default(self, param: cst.Param, symbolic: bool) -> Value:
        if symbolic:
            declared = versions.peek(self, param.annotation.annotation) if param.annotation else None
            unknown = Ref(Obj(ObjKind.PARAM, param.name.value, declared=declared))
            return torch_api.rank_by_name(param.name.value, unknown)
        return self.eval(param.default) if param.default is not None else UNKNOWN

    def _decorators(self, info: FunctionInfo) -> tuple[Value, ...]:
        """The decorators' values; unknown for a function whose ``def`` never ran (nested in a
        function analysed as an entry point), which still leaves their names to match."""
        return self.decorators.get(info) or (UNKNOWN,) * len(info.node.decorators)

    def _is_static(self, info: FunctionInfo) -> bool:
        """Is ``info`` called without an instance (a static or class method)?"""
        return self._decorated(info, "builtins.staticmethod", "builtins.classmethod")

    def _decorated(self, info: FunctionInfo, *qnames: str) -> bool:
        return any(isinstance(d, Symbol) and d.qname in qnames for d in self.decorators.get(info, ()))


# --- helpers without interpreter state ---------------------------------------------------------


def _class_of(fn: Function) -> Class | Value:
    """What a class method's ``cls`` is: the class of the instance it was called on, else the
    class it was looked up on (``Float8Linear.from_float(m)``), else the class that defines it."""
    cls = fn.bound.root.cls if fn.bound is not None and not fn.bound.path else fn.owner or fn.info.cls
    return Class(cls) if cls is not None else UNKNOWN


def _choice_branch(opts: tuple[Value, ...]) -> tuple | None:
    """The branch a choice of objects is, the same in every entry point's run: each object by the
    calls that made it (a method analysed alone runs ``__init__`` again, making its objects anew)."""
    if not any(map(_made, opts)):
        return None
    branch = tuple((tuple(map(id, o.root.event.frames())), o.path) if _made(o) else o for o in opts)
    try:
        hash(branch)
    except TypeError:  # beside a value Python cannot hash: a branch of this call only
        return None
    return branch


def _made(option: Value) -> bool:
    return isinstance(option, Ref) and option.root.event is not None


def returned(frame: Frame) -> Value:
    """What a call returns: its ``return``s' values. A helper that returns True or False, False only
    where a type test proved a module no FSDP2 module (``if isinstance(m, FSDPModule): return
    True`` ... ``return False``), returns that test, as ``return isinstance(m, FSDPModule)`` does:
    where its caller's test of it fails, the module is none either."""
    if not frame.returns:
        return Const(None)
    tested = _type_test_returned(frame.returns)
    return tested if tested is not None else choice([value for value, _ in frame.returns])


def _type_test_returned(returns: list[tuple[Value, Context]]) -> FsdpVersion | None:
    truths = [(const(value), ctx) for value, ctx in returns]
    if not all(truth is True or truth is False for truth, _ in truths) or len({truth for truth, _ in truths}) < 2:
        return None
    true_in = [ctx for truth, ctx in truths if truth is True]
    false_in = [ctx for truth, ctx in truths if truth is False]
    for model in false_in[0].not_fsdp2:
        if all(model in ctx.not_fsdp2 for ctx in false_in):
            itself = all(model in ctx.fsdp2_tested for ctx in true_in)  # True only where it is one
            return FsdpVersion(model, fsdp1_arm=1, fsdp2_arm=0 if itself else None)
    return None


def _called_name(node: cst.Call) -> str:
    """The last name of what is called (``assertLess`` in ``self.assertLess(...)``), else ``""``."""
    func = node.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""


DATACLASS_FIELD = "dataclasses.field"


def is_dataclass(info: ClassInfo) -> bool:
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


def _refs_inside(value: Value):
    return (ref for option in walk_contents(value) for ref in refs(option))


def _defined_method(value: Value, name: str) -> FunctionInfo | None:
    """The method ``name`` of the project's class ``value`` is an instance of, if it defines one."""
    if isinstance(value, Ref) and not value.path and value.root.cls is not None:
        return value.root.cls.method(name)
    return None


def _super_method(value: Super, name: str) -> FunctionInfo | None:
    for cls in list(value.cls.mro())[1:]:
        if name in cls.methods:
            return cls.methods[name]
    return None


def name_unnamed(value: Value, name: str) -> None:
    """Give the objects in ``value`` that have no name yet the name they are first bound to."""
    for ref in refs(value):
        if ref.root.label is None and not ref.path:
            ref.root.label = name


# Calls that change no setting a test reads: torch's API, and builtins that only read.
_READ_ONLY_BUILTINS = frozenset(
    "abs all any bool callable dict enumerate float format frozenset getattr hasattr hash id int isinstance "
    "issubclass iter len list max min next print range repr reversed round set sorted str sum tuple type zip".split()
)


# Methods that change no setting a test reads (torch modules, tensors, optimizers; loggers; reads).
_SETTINGS_KEPT_BY = frozenset(
    "backward barrier buffers children cpu cuda debug detach error exception float get half info item items keys "
    "load_state_dict modules named_buffers named_children named_modules named_parameters numel parameters "
    "register_forward_hook register_forward_pre_hook requires_grad_ reshard set_requires_gradient_sync "
    "state_dict step to to_empty train unshard values view warn warning zero_grad".split()
)


def _keeps_settings(qname: str) -> bool:
    if qname.startswith("builtins."):
        return qname[9:] in _READ_ONLY_BUILTINS
    return qname.startswith("torch.") or qname.startswith(("logging.", "warnings.", "time.", "os.path."))
