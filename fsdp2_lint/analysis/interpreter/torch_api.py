"""What torch (and the launch environment around it) does, as the interpreter needs to know it.

Everything the interpreter knows about an API lives here, in one of these registries, as a
decorated handler:

- :data:`SYMBOLS`: a call of a resolved name (``torch.distributed.fsdp.fully_shard(...)``), keyed
  by canonical name (:mod:`fsdp2_lint.analysis.apis`); classifier rules (any optimizer class, any
  rank function) follow when no name matches;
- :data:`MODULE_METHODS`: ``module.name(...)`` on an ``nn.Module`` defined outside the file;
- :data:`OPTIMIZER_METHODS`: ``optimizer.name(...)``;
- :data:`VALUE_METHODS`: a method of an abstract torch value (a state dict, parameters, a
  gradient-derived tensor, a loaded checkpoint), keyed by the value's type;
- :data:`CONTEXT_MANAGERS`: what ``with manager:`` (or a decorator that is one) changes in the
  context of the code inside.

Adding a torch API is one handler in one of these registries (and its canonical name in ``apis``
if it is new). The evaluator (:mod:`.core`) asks these registries and knows no torch name itself.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Generic, TypeVar

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter.state import Evaluator, Heap, Slot, owned_by
from fsdp2_lint.analysis.model import (
    ANY,
    ANY_DEPTH,
    UNKNOWN,
    ClassInfo,
    Const,
    Context,
    Derived,
    Event,
    Function,
    FunctionInfo,
    GradTag,
    GuardRanks,
    Iter,
    IterKind,
    Lambda,
    Loaded,
    ModuleIter,
    Obj,
    ObjKind,
    Order,
    Params,
    ParamSource,
    Partial,
    RankDep,
    RankGuard,
    RankKind,
    Ref,
    StateDict,
    Symbol,
    Tuple,
    Uniform,
    UniformKind,
    Value,
    choice,
    const,
    container_items,
    getter_element,
    key_element,
    options,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.syntax import dotted

H = TypeVar("H", bound=Callable)


class Registry(Generic[H]):
    """Handlers by key (a canonical name, a method name, a value type), then classifier rules
    (handlers that return None for what they do not classify), tried in registration order."""

    def __init__(self) -> None:
        self.by_key: dict[object, H] = {}
        self.rules: list[H] = []

    def __call__(self, *keys: object) -> Callable[[H], H]:
        def register(handler: H) -> H:
            for key in keys:
                if key in self.by_key:
                    raise ValueError(f"two handlers for {key!r}")
                self.by_key[key] = handler
            return handler

        return register

    def rule(self, handler: H) -> H:
        self.rules.append(handler)
        return handler


SymbolHandler = Callable[[Evaluator, Event], "Value | None"]
MethodHandler = Callable[[Evaluator, Ref, Event], "Value | None"]
ValueMethodHandler = Callable[[Value, str, Event], "Value | None"]
ManagerHandler = Callable[[Context, Event], Context]

SYMBOLS: Registry[SymbolHandler] = Registry()
MODULE_METHODS: Registry[MethodHandler] = Registry()
OPTIMIZER_METHODS: Registry[MethodHandler] = Registry()
VALUE_METHODS: Registry[ValueMethodHandler] = Registry()
CONTEXT_MANAGERS: Registry[ManagerHandler] = Registry()

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
MODULE_METHOD_NAMES = frozenset(
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
# Methods of a state dict and of its tensors whose result holds the same (sharded or full) data.
STATE_PRESERVING = frozenset(
    {"copy", "get", "pop", "cpu", "cuda", "to", "detach", "clone", "contiguous", "float", "half", "bfloat16"}
)
# Objects whose `rank` is a matrix rank, not a process rank (`cfg.lora.rank`, `peft_config.rank`).
LOW_RANK_OWNER = re.compile(r"(?<![a-z])(lora|peft|adapter|low_?rank|svd)", re.IGNORECASE)


# --- calls of resolved names -------------------------------------------------------------------


def call_symbol(interp: Evaluator, event: Event) -> Value:
    """What the call ``event`` of ``event.qname`` returns."""
    result = _first_answer(SYMBOLS, event.qname, (interp, event))
    return result if result is not None else interp.new_object(event, event.qname)


def _first_answer(registry: Registry, key: object, args: tuple) -> Value | None:
    """What the handler registered under ``key`` says, else the first rule that says something."""
    handler = registry.by_key.get(key)
    result = handler(*args) if handler is not None else None
    for rule in registry.rules if result is None else ():
        result = rule(*args)
        if result is not None:
            break
    return result


@SYMBOLS(apis.FULLY_SHARD, "torch.compile", apis.PARALLELIZE_MODULE)
def _returns_first(interp: Evaluator, event: Event) -> Value:
    """The module given, returned: sharded, compiled or tensor-parallelised in place."""
    return event.arg(0) or UNKNOWN


@SYMBOLS("typing.cast")
def _returns_second(interp: Evaluator, event: Event) -> Value:
    return event.arg(1, "val") or UNKNOWN


@SYMBOLS("copy.deepcopy")
def _copy(interp: Evaluator, event: Event) -> Value:
    """``copy.deepcopy(x)``: a new object of the same kind as ``x``."""
    original = event.arg(0, "x")
    if isinstance(original, Ref) and not original.path:
        return Ref(Obj(ObjKind.NEW, qname=original.root.qname, cls=original.root.cls, node=event.node, event=event))
    return Ref(Obj(ObjKind.NEW, node=event.node, event=event))


@SYMBOLS("functools.partial")
def _partial(interp: Evaluator, event: Event) -> Value:
    if not event.args:
        return UNKNOWN
    return Partial(event.args[0], event.args[1:], tuple(event.kwargs.items()))


@SYMBOLS("torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict")
def _module_container(interp: Evaluator, event: Event) -> Value:
    """``nn.Sequential(a, b)`` / ``nn.ModuleList([a, b])`` / ``nn.ModuleDict({...})``: the modules
    given become its children, so sharding ``a`` shards part of the container."""
    container = interp.new_object(event, event.qname)
    if event.qname == "torch.nn.Sequential":
        children: list[tuple[object, Value]] = list(enumerate(event.args))
    else:
        given = event.arg(0, "modules") or UNKNOWN
        items = container_items(given) or []
        literal = isinstance(given, Tuple) or (
            isinstance(given, Ref) and isinstance(given.root.node, (cst.List, cst.Tuple, cst.Dict))
        )
        # A literal names each child; a comprehension's one element stands for all of them.
        children = [(index if key is None else key, value) for index, (key, value) in enumerate(items)]
        children = children if literal else [(None, value) for _, value in items]
    for key, value in children:
        slot = container.child(key_element(key))  # type: ignore[union-attr]
        for child in refs(value):
            if not child.path and child.root.kind in (ObjKind.NEW, ObjKind.PARAM) and child.root.parent is None:
                if not owned_by(slot, child.root):
                    child.root.parent = slot
    return container


def _wrapper(kind: ObjKind) -> SymbolHandler:
    def make(interp: Evaluator, event: Event) -> Value:
        return Ref(Obj(kind, qname=event.qname, node=event.node, event=event, wrapped=event.arg(0, "module")))

    return make


SYMBOLS(apis.DDP)(_wrapper(ObjKind.DDP))
SYMBOLS(apis.FSDP1)(_wrapper(ObjKind.FSDP1))


def _state_dict_of(position: int, keyword: str) -> SymbolHandler:
    """``get_model_state_dict(model, ...)`` / ``get_optimizer_state_dict(model, optimizers, ...)``."""

    def make(interp: Evaluator, event: Event) -> Value:
        owner = event.arg(position, keyword)
        full = _full_state_dict(event.kwargs.get("options"))
        found: list[Value] = []
        for ref in refs(choice(list(walk_contents(owner)))) if owner is not None else ():
            is_optimizer = ref.root.kind is ObjKind.OPTIMIZER and not ref.path
            found.append(StateDict(ref.root if is_optimizer else ref, event.index, full))
        return choice(found)

    return make


SYMBOLS(apis.GET_MODEL_STATE_DICT)(_state_dict_of(0, "model"))
SYMBOLS(apis.GET_OPTIMIZER_STATE_DICT)(_state_dict_of(1, "optimizers"))


@SYMBOLS(apis.GET_STATE_DICT)
def _get_state_dict(interp: Evaluator, event: Event) -> Value:
    return Tuple((_state_dict_of(0, "model")(interp, event), _state_dict_of(1, "optimizers")(interp, event)))


def _full_state_dict(options_value: Value | None) -> bool | None:
    """Does a ``StateDictOptions`` value ask for full (gathered) tensors? None when unknown."""
    if options_value is None:
        return False
    for ref in refs(options_value):
        event = ref.root.event
        if event is not None and event.qname == apis.STATE_DICT_OPTIONS:
            full = const(event.kwargs.get("full_state_dict", Const(False)))
            return full if isinstance(full, bool) else None
    return None


@SYMBOLS(*apis.LOADERS)
def _loaded(interp: Evaluator, event: Event) -> Value:
    path = event.arg(0, "f") or event.arg(0, "filename") or UNKNOWN
    return Loaded(per_rank=any(isinstance(option, RankDep) for option in walk_contents(path)))


@SYMBOLS("os.environ.get", "os.getenv")
def _environ_get(interp: Evaluator, event: Event) -> Value:
    found = environment_variable(const(event.arg(0) or UNKNOWN))
    return found if found is not None else interp.new_object(event, event.qname)


def environment_variable(key: object) -> Value | None:
    """``os.environ[key]``: a rank or the world size, for the variables launchers set."""
    if key in apis.RANK_ENV_VARS:
        return RankDep(RankKind.RANK)
    return Uniform(UniformKind.SIZE) if key in apis.WORLD_SIZE_ENV_VARS else None


# torch's default device is process state: a heap slot of torch's own, so it outlives the call
# (a helper, a context manager's `__enter__`) that sets it, and each arm of a branch sets its own.
_TORCH = Obj(ObjKind.NEW, "torch")
DEFAULT_DEVICE_IS_META: Slot = (id(_TORCH), ("default_device_is_meta",))


@SYMBOLS("torch.set_default_device")
def _set_default_device(interp: Evaluator, event: Event) -> Value:
    """``torch.set_default_device("meta")``: what is built from now on is on the meta device; a
    device we cannot read (``set_default_device(previous)``) is taken for one that is not."""
    device = event.arg(0, "device") or UNKNOWN
    interp.heap[DEFAULT_DEVICE_IS_META] = choice([Const(_names_meta(option)) for option in options(device)])
    return Const(None)


def default_device_may_be_meta(heap: Heap) -> bool:
    """After ``set_default_device("meta")`` on some path (one arm of an ``if`` is enough)."""
    return Const(True) in options(heap.get(DEFAULT_DEVICE_IS_META, UNKNOWN))


def _names_meta(device: Value) -> bool:
    """``"meta"``, ``"meta:0"``, ``torch.device("meta")``."""
    if isinstance(device, Ref) and device.root.qname == "torch.device" and device.root.event is not None:
        device = device.root.event.arg(0, "type") or UNKNOWN
    return isinstance(const(device), str) and const(device).startswith("meta")


@SYMBOLS.rule
def _optimizer(interp: Evaluator, event: Event) -> Value | None:
    if apis.is_optimizer(event.qname or ""):
        return new_optimizer(interp, event, event.arg(0, "params"), event.qname)
    if apis.is_optimizer_factory(event.qname or ""):
        return new_optimizer(interp, event, _factory_params(event, None), event.qname)
    return None


@SYMBOLS.rule
def _rank_or_world(interp: Evaluator, event: Event) -> Value | None:
    kind = apis.rank_kind_of_call(event.qname or "")
    if kind is not None:
        return RankDep(kind)
    uniform = apis.uniform_kind_of_call(event.qname or "")
    return Uniform(uniform) if uniform is not None else None


@SYMBOLS.rule
def _rank_passed_on(interp: Evaluator, event: Event) -> Value | None:
    """``os.path.join(root, f"rank{rank}.pt")``: a path or a string built from a rank."""
    passes = rank_dependent(event.args, event.kwargs) and _passes_rank_on(event.qname or "")
    return RankDep(RankKind.MIXED) if passes else None


@SYMBOLS.rule
def _gradient_derived(interp: Evaluator, event: Event) -> Value | None:
    """``torch.stack([g.norm() for g in grads])``: computed from gradients."""
    return derived_from(event.args, event.kwargs, event.index)


def is_optimizer_class(info: ClassInfo) -> bool:
    """Does a same-file class build on an optimizer class (its instances are optimizers)?"""
    return any(apis.is_optimizer(base) for base in info.external_bases())


def new_optimizer(
    interp: Evaluator, event: Event, params: Value | None, qname: str | None, cls: ClassInfo | None = None
) -> Ref:
    """The optimizer ``event`` builds over ``params`` (an instance of the same-file ``cls``, if any)."""
    captured = _collect_params(params, event.index) if params is not None else None
    event.result = Ref(Obj(ObjKind.OPTIMIZER, qname=qname, cls=cls, node=event.node, event=event, params=captured))
    return event.result


def _factory_params(event: Event, receiver: Ref | None) -> Value:
    """What an outside optimizer factory optimizes: the parameters it is given, else the modules
    it is given (or the module it is a method of), read when it is called."""
    given = Tuple((*event.args, *event.kwargs.values()))
    if any(isinstance(option, Params) for option in walk_contents(given)):
        return given
    first = walk_contents(event.args[0]) if event.args else ()
    modules = [option for option in first if isinstance(option, Ref) and option.root.kind is not ObjKind.CONTAINER]
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


# --- methods of modules, optimizers and torch values --------------------------------------------


def module_method(interp: Evaluator, ref: Ref, name: str, event: Event) -> Value:
    """``ref.name(...)`` on a module whose class the file does not define."""
    result = _first_answer(MODULE_METHODS, name, (interp, ref, event))
    if result is not None:
        return result
    return interp.new_object(event, None) if event.result is None else event.result


@MODULE_METHODS("parameters", "named_parameters")
def _parameters(interp: Evaluator, ref: Ref, event: Event) -> Value:
    return Params(frozenset({ParamSource(ref, None)}), named=event.name == "named_parameters")


@MODULE_METHODS("modules", "named_modules", "children", "named_children", "values", "items")
def _submodules(interp: Evaluator, ref: Ref, event: Event) -> Value:
    name = event.name or ""
    return ModuleIter(ref, self_included=name.endswith("modules"), named=name.startswith("named_") or name == "items")


@MODULE_METHODS("state_dict")
def _module_state_dict(interp: Evaluator, ref: Ref, event: Event) -> Value:
    return StateDict(ref, event.index)


@MODULE_METHODS(*SELF_RETURNING)
def _returns_module(interp: Evaluator, ref: Ref, event: Event) -> Value:
    functions = event.args and all(isinstance(o, (Function, Lambda, Partial)) for o in options(event.args[0]))
    if event.name == "apply" and functions:
        # fn(m) for every module in the tree, each after its children (the root last)
        every = Ref(ref.root, ref.path + (interp.loop_wildcard(ANY_DEPTH),), Order.REV)
        interp.call_value(event.args[0], (every,), {}, event.node)  # type: ignore[arg-type]
    return ref


@MODULE_METHODS("get_submodule")
def _get_submodule(interp: Evaluator, ref: Ref, event: Event) -> Value | None:
    if not event.args:
        return None
    name = const(event.args[0])
    if isinstance(name, str):
        return Ref(ref.root, ref.path + tuple(name.split(".")))
    return Ref(ref.root, ref.path + (ANY, ANY_DEPTH))  # a computed name: some module below this one


@MODULE_METHODS(*SUBMODULE_GETTERS)
def _some_submodule(interp: Evaluator, ref: Ref, event: Event) -> Value:
    return Ref(ref.root, ref.path + (getter_element(event.name or ""), ANY_DEPTH))


@MODULE_METHODS.rule
def _optimizer_factory_method(interp: Evaluator, ref: Ref, event: Event) -> Value | None:
    """``model.configure_optimizers(...)`` defined elsewhere."""
    if apis.is_optimizer_factory(event.name or ""):
        return new_optimizer(interp, event, _factory_params(event, ref), None)
    return None


@MODULE_METHODS.rule
def _rank_method(interp: Evaluator, ref: Ref, event: Event) -> Value | None:
    """``accelerator.is_main_process()``, ``group.get_world_size()``."""
    kind = apis.rank_kind_of_call(event.name or "")
    if kind is not None:
        return RankDep(kind)
    return Uniform(UniformKind.SIZE) if apis.uniform_kind_of_call(event.name or "") is UniformKind.SIZE else None


def optimizer_method(interp: Evaluator, optimizer: Ref, name: str, event: Event) -> Value | None:
    """``optimizer.name(...)``; None for a method it shares with modules (what it returns is unknown)."""
    return _first_answer(OPTIMIZER_METHODS, name, (interp, optimizer, event))


@OPTIMIZER_METHODS("state_dict")
def _optimizer_state_dict(interp: Evaluator, ref: Ref, event: Event) -> Value:
    return StateDict(ref.root, event.index)


def value_method(receiver: Value, name: str, event: Event) -> Value:
    """``receiver.name(...)`` on a value that is not an object (a state dict, parameters, ...)."""
    result = _first_answer(VALUE_METHODS, type(receiver), (receiver, name, event))
    if result is not None:
        return result
    kind = apis.rank_kind_of_call(name)
    return RankDep(kind) if kind else UNKNOWN


@VALUE_METHODS(StateDict)
def _state_dict_method(state: StateDict, name: str, event: Event) -> Value:  # type: ignore[misc]
    """A state dict stands for its tensors too: copies and moves keep what they hold, and
    ``.full_tensor()`` gathers the full value."""
    if name in ("items", "values"):
        return Iter(IterKind.ITEMS if name == "items" else IterKind.VALUES, (state,))
    if name == "full_tensor":
        return replace(state, full=True)
    return state if name in STATE_PRESERVING or name == "to_local" else UNKNOWN


@VALUE_METHODS(Params)
def _params_method(params: Params, name: str, event: Event) -> Value | None:  # type: ignore[misc]
    """A list's copy holds the same parameters; a tensor's in-place op (`p.mul_(d)`) returns it, and
    `p.detach()` the same tensor (a DTensor while its module is sharded) outside autograd."""
    in_place = name.endswith("_") and not name.startswith("_")
    return params if name in ("copy", "values", "detach") or in_place else None


@VALUE_METHODS(Derived)
def _derived_method(value: Derived, name: str, event: Event) -> Value:  # type: ignore[misc]
    tags = value.tags
    if name == "to_local":
        tags = tags | {GradTag.LOCAL}
    elif name == "full_tensor":
        tags = tags - {GradTag.LOCAL} | {GradTag.FULL}
    elif name == "redistribute":
        tags = tags - {GradTag.LOCAL}
    return Derived(tags, value.steps | {event.index}, value.params)


@VALUE_METHODS(Loaded)
def _loaded_method(loaded: Loaded, name: str, event: Event) -> Value | None:  # type: ignore[misc]
    if name in ("items", "values"):
        return Iter(IterKind.ITEMS if name == "items" else IterKind.VALUES, (loaded,))
    return loaded if name in (*STATE_PRESERVING, "setdefault") else None


def value_attribute(value: Value, name: str) -> Value:
    """``value.name`` on a value that is not an object: ``param.grad`` derives from gradients."""
    if isinstance(value, Params) and name == "grad":
        return Derived(frozenset({GradTag.GRAD}), params=value)
    if isinstance(value, Derived):
        return value
    if isinstance(value, (Params, Loaded, StateDict)) and name == "data":
        return value  # a tensor's data: the same DTensor shard or plain tensor
    return rank_by_name(name, UNKNOWN)


def value_item(value: Value, key: object) -> Value:
    """``value[key]`` on a value that is not an object or a tuple."""
    if isinstance(value, Symbol) and value.qname == "os.environ":
        return environment_variable(key) or UNKNOWN
    if isinstance(value, Symbol) and value.qname in apis.ENUMS:  # ShardingStrategy[args.strategy]
        return Symbol(f"{value.qname}.{key if isinstance(key, str) else ANY}")  # ANY: some member, as getattr gives
    if isinstance(value, StateDict) and key == "param_groups":
        return UNKNOWN  # an optimizer's hyperparameters and parameter ids: no tensor in it
    if isinstance(value, (Params, Loaded, StateDict)):
        return value
    return RankDep(RankKind.MIXED) if isinstance(value, RankDep) else UNKNOWN


def wrapped_module(ref: Ref, name: str) -> Value | None:
    """``wrapper.module``: what a DDP or FSDP1 wrapper wraps."""
    return ref.root.wrapped if ref.root.wrapped is not None and name == "module" and not ref.path else None


# --- context managers and decorators ------------------------------------------------------------


def enter(ctx: Context, manager: Value) -> Context:
    """The context inside ``with manager:``."""
    ctx = ctx.with_(managers=ctx.managers + (manager,))
    for ref in refs(manager):
        event = ref.root.event
        qname = ref.root.qname or ""
        if event is None:
            continue
        handler = CONTEXT_MANAGERS.by_key.get(qname)
        if handler is None and qname.endswith("init_empty_weights"):  # accelerate's, or a copy of it
            handler = CONTEXT_MANAGERS.by_key["init_empty_weights"]
        ctx = handler(ctx, event) if handler is not None else ctx
    return ctx


@CONTEXT_MANAGERS(*apis.GRAD_DISABLING)
def _no_grad(ctx: Context, event: Event) -> Context:
    return ctx.with_(no_grad=True)


@CONTEXT_MANAGERS("torch.set_grad_enabled")
def _set_grad_enabled(ctx: Context, event: Event) -> Context:
    return ctx.with_(no_grad=True) if const(event.arg(0) or UNKNOWN) is False else ctx


@CONTEXT_MANAGERS("torch.enable_grad")
def _enable_grad(ctx: Context, event: Event) -> Context:
    return ctx.with_(no_grad=False)


@CONTEXT_MANAGERS("torch.device")
def _device(ctx: Context, event: Event) -> Context:
    return ctx.with_(meta_device=True) if const(event.arg(0, "type") or UNKNOWN) == "meta" else ctx


@CONTEXT_MANAGERS("init_empty_weights")
def _init_empty_weights(ctx: Context, event: Event) -> Context:
    return ctx.with_(meta_device=True)


def decorated(ctx: Context, decorators: tuple[Value, ...], info: FunctionInfo, depth: int) -> Context:
    """The context of a function body given its decorators (``@torch.no_grad()``, ``@rank_zero_only``)."""
    for decorator, node in zip(decorators, info.node.decorators, strict=True):
        for option in options(decorator):
            qname = option.qname if isinstance(option, Symbol) else ""
            if isinstance(option, Ref):
                qname = option.root.qname or ""
            last = qname.rpartition(".")[2] or dotted(node.decorator).rpartition(".")[2]
            if last in apis.RANK_ZERO_DECORATORS:
                ctx = ctx.with_(rank_guard=RankGuard(node, GuardRanks.ZERO, depth))
            ctx = enter(ctx, option) if isinstance(option, Ref) else ctx
    return ctx


# --- ranks and gradients ------------------------------------------------------------------------


def rank_by_name(name: str, value: Value) -> Value:
    """A variable or attribute named like a rank (``local_rank``, ``is_main_process``) whose value
    is not otherwise known is taken to be one."""
    if (
        value is UNKNOWN
        or (isinstance(value, Ref) and not value.path and value.root.kind is ObjKind.PARAM)
        or (isinstance(value, Ref) and value.path[-1:] == (name,))
        or _position_in_unknown(value)
    ):
        kind = apis.rank_kind_of_name(name)
        if kind is not None:
            return RankDep(kind)
        uniform = apis.uniform_kind_of_name(name) or apis.uniform_kind_of_call(name)
        if uniform is not None:
            return Uniform(uniform)
    return value


def _position_in_unknown(value: Value) -> bool:
    """``rank, world = get_dist_info()``: a numbered part of what a call the run does not see
    into returned (or of a parameter), a value as unknown as the whole."""
    if not isinstance(value, Ref) or value.root.cls is not None or value.root.kind not in (ObjKind.NEW, ObjKind.PARAM):
        return False
    last = value.path[-1] if value.path else ""
    return last[:1] == "[" and last[1:-1].isdigit()


def rank_dependent(args: tuple, kwargs: dict) -> bool:
    return any(isinstance(option, RankDep) for value in (*args, *kwargs.values()) for option in walk_contents(value))


def _passes_rank_on(qname: str) -> bool:
    """Does a call of a rank-dependent value give a rank-dependent result? Path and string
    builders do; torch's operations (a LoRA `rank` in a shape) and type checks do not."""
    if qname.startswith("builtins."):
        return qname in ("builtins.str", "builtins.format", "builtins.repr", "builtins.float")
    return not qname.startswith("torch.")


def derived_from(args: tuple, kwargs: dict, step: int | None = None) -> Derived | None:
    """The gradient-derived tensor computed from these operands, if one of them is one."""
    inputs = [
        option for value in (*args, *kwargs.values()) for option in walk_contents(value) if isinstance(option, Derived)
    ]
    if not inputs:
        return None
    steps = frozenset().union(*(derived.steps for derived in inputs))
    params = [derived.params for derived in inputs if derived.params is not None]
    return Derived(
        frozenset().union(*(d.tags for d in inputs)),
        steps if step is None else steps | {step},
        functools.reduce(operator.or_, params) if params else None,
    )
