from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    ClassInfo,
    Event,
    EventKind,
    Obj,
    ObjKind,
    Ref,
    Value,
    canonical,
    is_exact,
    may_contain,
    may_overlap,
    options,
    refs,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace, plain_class
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# torch.nn modules without submodules: sharding one alone is the whole story.
LEAF_MODULES = frozenset(
    f"torch.nn.{name}"
    for name in (
        "Linear",
        "Embedding",
        "EmbeddingBag",
        "LayerNorm",
        "RMSNorm",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "Bilinear",
        "GroupNorm",
        "BatchNorm1d",
        "BatchNorm2d",
        "Parameter",
    )
)

# torch.nn modules without parameters (activations, dropout, reshaping).
PARAMETER_FREE = frozenset(
    f"torch.nn.{name}"
    for name in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "Softmax", "Dropout", "Identity", "Flatten")
)


NOT_MODULES = frozenset({"Parameter", "Buffer", "ParameterList", "ParameterDict", "Tensor"})

# How the names of other libraries' layer classes end (`te.LayerNormLinear`, `ColumnParallelLinear`).
LAYER_NAME_ENDINGS = ("Linear", "Embedding", "Norm", "Conv1d", "Conv2d", "Conv3d")


class OnlyRootSharded(Rule):
    code = "FSDP034"
    name = "only-root-sharded"
    severity = Severity.WARNING
    summary = "only the root is sharded: one all-gather holds the whole model, so peak memory is the unsharded model"
    hint = "shard each block first (`for block in model.layers: fully_shard(block)`), then the root"
    failure = "trains, but every forward all-gathers all parameters at once: no memory saving, no overlap"
    docs = """
## What it does
Warns when a file shards a model it trains (an optimizer is built over it) with
`fully_shard(model)` and shards nothing inside that model: no per-block `fully_shard` on it
anywhere in the file's flow. The question is asked per model object: a second model sharded per
block (in the same function, another function, another method of the class or a helper module)
does not hide a model sharded only at its root; a module the model holds under a second name
(`self.draft = draft`, then `wrapper.draft = draft`) is part of it under either name. Not reported
for a model without blocks: a module
without submodules (an `nn.Linear`, or a project class that stores none), a module of a class
named as layers are (`te.LayerNormLinear`, a `ColumnParallelLinear`: a name ending in `Linear`,
`Embedding`, `Norm` or `Conv1d`/`2d`/`3d`), an `nn.Sequential` or
project class whose submodules are such layers and at most one module built the same way (a
test's toy MLP, or a model wrapping one), wherever the project builds it, or such a module a
function converts (`convert_to_float8_training(linear)`) or copies (`copy.deepcopy`). Nor for a
parity test: the same run trains an unsharded copy of the model beside the sharded one
(`dist_model = copy.deepcopy(ref_model)`, an optimizer over each), so each rank holds the whole
model anyway. Nor for a submodule sharded alone, or for a module sharding itself in one of its
methods (the per-block half of a bottom-up plan).

## Why is this bad?
`fully_shard` groups the parameters of each call into one all-gather. With only the root sharded
there is one group holding every parameter: each forward all-gathers the entire model at once, so
peak memory is the unsharded model and communication cannot overlap computation, which defeats the
point of FSDP. The `fully_shard` docs ask for bottom-up application: each transformer block, then
the root.

## Known problems
Which model a `fully_shard` call shards is known when the file shows where the module comes from.
When it does not, the call counts for every model it may be part of, and the warning is not
given: a call on a module made from the model (`get_decoder_layers(model)`), on a parameter of the
same function (`apply_fsdp(model, blocks)`), or in a function the file never calls whose module
comes from its caller while the model leaves the function (returned, stored, passed on). So two
models both loaded from outside values in separate functions, each sharded at its root only, are
not reported. Conversely a module that such a function makes from its parameter and shards
together with its own blocks counts as a separate model (`layer = model.get_layer(i)`, then
`fully_shard(layer.mlp)` and `fully_shard(layer)`), though it may be a block of this one.

How a model is built is known from the project modules the analysis follows: a model class in a
module of plain `nn` code that no rule reads is unknown, and taken to have blocks. A parity test
whose reference the file cannot tie to the sharded model (two instances built by separate calls,
rather than one copied) is reported. A layer rebuilt by a class method (`Float8Linear.from_float`
building `cls(...)` from an `nn.Linear`) is a layer: a project class built on a torch layer has
only the submodules it stores.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

for block in model.layers:
    fully_shard(block)
fully_shard(model)
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

head = torch.nn.Linear(16, 16)
fully_shard(head)
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

toy = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))  # no blocks
fully_shard(toy)
optimizer = torch.optim.SGD(toy.parameters(), lr=0.1)
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard as FSDP

class Trainer:
    def __init__(self, model):
        self.model = FSDP(model)  # expect: FSDP034
        self.optimizer = torch.optim.AdamW(self.model.parameters())
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

blocks = [torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()) for _ in range(8)]
model = torch.nn.Sequential(*blocks)
fully_shard(model)  # expect: FSDP034
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    )
    signature = RuntimeSignature(
        evidence="single_param_group",
        note="at the first forward, the model's outermost group holds the parameters of all its modules",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for shard in trace.shards:
                root = _lone_root(shard)
                if (
                    root is not None
                    and _has_blocks(trace, root)
                    and _trained(trace, root)
                    and not _reference_trained_unsharded(trace, root)
                    and not _sharded_elsewhere(trace, shard, root)
                    and not _fsdp1_blocks(trace, shard, root)
                    and not _blocks_may_be_sharded(facts.traces, trace, shard, root)
                ):
                    yield Finding(
                        shard.node,
                        f"only the root `{canonical(root).text}` is sharded: one all-gather holds the whole model, "
                        "so peak memory is the unsharded model",
                    )


def _lone_root(shard: Event) -> Ref | None:
    """The single whole model this call shards. A submodule sharded alone (``layer.mlp.experts``)
    or a module sharding itself inside its own method (``fully_shard(self)``, the per-block half
    of a bottom-up plan) is not a root."""
    if len(shard.targets) != 1:
        return None
    (root,) = shard.targets
    if root.path or root.root.kind is ObjKind.SELF:
        return None
    if not is_exact(canonical(root)):
        return None
    return root


def _blocks_may_be_sharded(traces: list[Trace], trace: Trace, root_shard: Event, root: Ref) -> bool:
    """May a ``fully_shard`` call of the file's runs shard a module inside this model, or around
    it (then this is one of its blocks: ``fully_shard(model.block0)``, then ``fully_shard(model)``)?
    Asked per model object: the blocks of another model the file builds do not count, while a call
    on a module whose origin the runs do not show (a helper's parameter, ``get_layers(model)``)
    does whenever it may be part of this one."""
    whole = canonical(root)
    if any(assumed != whole and may_overlap(whole, assumed) for assumed in trace.assumed_sharded):
        return True  # another method of the class shards a part of `self.model`, or around it
    origins = _Origins()
    for other in traces:
        sharded = [canonical(target) for shard in other.shards for target in shard.targets]
        for shard in other.shards:
            if other is not trace and shard.node is root_shard.node:
                continue  # this call, reached from another entry point: the same statement, not a block
            if not shard.targets and (other is trace or origins.outside_or_escaping(trace, whole.root)):
                return True  # sharding a value the analysis does not know
            for target in map(canonical, shard.targets):
                if target != whole and other.inside_through_alias(whole, target):
                    return True  # a block of a module the model also holds (`wrapper.draft = draft`)
                if target.root is whole.root:
                    if target != whole and may_overlap(whole, target):
                        return True
                elif other is not trace and _same_class_instances(target.root, whole.root):
                    continue  # the class's other methods: `trace.assumed_sharded`, by path
                elif origins.related(trace, target.root, whole.root) and not _own_plan(target, sharded, other is trace):
                    return True
    return False


def _same_class_instances(a: Obj, b: Obj) -> bool:
    return a.kind is b.kind is ObjKind.SELF and a.cls is b.cls


def _own_plan(target: Ref, sharded: list[Ref], same_run: bool) -> bool:
    """Is ``target`` part of a per-block plan of its own run: a block of a module the run shards
    too, or a module whose blocks it shards (``for b in teacher.layers: fully_shard(b)``, then
    ``fully_shard(teacher)``)? It belongs to that model, not to a model another call shards. Not
    for a parameter of a function the file never calls: its caller may run it on each block of
    this model (a per-layer callback)."""
    if not same_run and target.root.kind in _FROM_OUTSIDE:
        return False
    return any(
        other.root is target.root and len(other.path) != len(target.path) and may_overlap(other, target)
        for other in sharded
    )


# Kinds of objects that come from code the run does not show.
_FROM_OUTSIDE = frozenset({ObjKind.PARAM, ObjKind.SELF, ObjKind.WRAPPER})


class _Origins:
    """The objects each object was made from: itself, its owner, and what the call that created
    it was given (``get_layers(model)`` is made from ``model``), transitively."""

    def __init__(self) -> None:
        self._origins: dict[int, frozenset[int]] = {}
        self._outside: dict[int, bool] = {}
        self._escaping: dict[int, bool] = {}

    def related(self, trace: Trace, candidate: Obj, model: Obj) -> bool:
        """May ``candidate`` be (part of) ``model``? Yes if one was made from the other, or if both
        come from outside the run, or one does and the model escapes to code the run does not show."""
        if id(model) in self.of(candidate) or id(candidate) in self.of(model):
            return True
        return self.outside(candidate) and self.outside_or_escaping(trace, model)

    def outside_or_escaping(self, trace: Trace, model: Obj) -> bool:
        if id(model) not in self._escaping:
            self._escaping[id(model)] = trace.handed_off([Ref(model)], -1) is not None
        return self.outside(model) or self._escaping[id(model)]

    def outside(self, obj: Obj) -> bool:
        if id(obj) not in self._outside:
            self.of(obj)
        return self._outside[id(obj)]

    def of(self, obj: Obj) -> frozenset[int]:
        if id(obj) in self._origins:
            return self._origins[id(obj)]
        found: dict[int, Obj] = {}
        pending = [obj]
        while pending and len(found) < _MAX_ORIGINS:
            current = pending.pop()
            if id(current) in found:
                continue
            found[id(current)] = current
            pending.extend(_made_from(current))
        self._origins[id(obj)] = frozenset(found)
        # Origins cut short may hide one from outside: assume one.
        self._outside[id(obj)] = bool(pending) or any(each.kind in _FROM_OUTSIDE for each in found.values())
        return self._origins[id(obj)]


_MAX_ORIGINS = 64


def _made_from(obj: Obj) -> Iterator[Obj]:
    if obj.parent is not None:
        yield obj.parent.root
    values: list[Value] = [item for _, item in obj.items]
    if obj.wrapped is not None:
        values.append(obj.wrapped)
    if obj.event is not None:
        # A method's receiver (`model.get_submodule(name)`); not what is called (`RewardModel()`).
        if obj.event.receiver is not None and obj.event.kind is not EventKind.INVOKE:
            values.append(obj.event.receiver)
        values.extend((*obj.event.args, *obj.event.kwargs.values()))
    for value in values:
        for option in walk_contents(value):
            if isinstance(option, Ref):
                yield option.root


def _sharded_elsewhere(trace: Trace, shard: Event, root: Ref) -> bool:
    """Was the model built by, or given before the root call to, code outside this file whose
    name says it shards or parallelises (``apply_fsdp_to_blocks(model)``)? It may have sharded
    the blocks. torch's own APIs are known not to (``parallelize_module`` is tensor parallelism)."""
    if root.root.event is not None and _may_shard(root.root.event):
        return True
    whole = canonical(root)
    return any(
        _may_shard(event)
        and any(
            may_overlap(canonical(ref), whole)
            for value in (*event.args, *event.kwargs.values())
            for option in walk_contents(value)
            for ref in refs(option)
        )
        for event in trace.events[: shard.index]
        if event.kind in (EventKind.CALL, EventKind.METHOD)
    )


def _fsdp1_blocks(trace: Trace, shard: Event, root: Ref) -> bool:
    """Are blocks inside the root already wrapped in FSDP1's FullyShardedDataParallel? They are
    sharded, by the wrong API: FSDP017 reports that mix."""
    whole = canonical(root)
    return any(
        may_contain(whole, canonical(wrapped)) and canonical(wrapped) != whole
        for event in trace.calls(apis.FSDP1)
        if event.index < shard.index
        for wrapped in refs(event.arg(0, "module") or UNKNOWN)
    )


def _may_shard(event: Event) -> bool:
    return apis.is_sharding_helper(event.qname or event.name or "")


def _trained(trace: Trace, module: Ref) -> bool:
    """Does the same code build an optimizer over the module? (Tests and tools that shard a
    small model root-only without training it are left alone.)"""
    whole = canonical(module)
    return any(
        may_overlap(canonical(source.ref), whole)
        for optimizer in trace.optimizers
        if optimizer.result.root.params is not None  # type: ignore[union-attr]
        for source in optimizer.result.root.params.sources  # type: ignore[union-attr]
    )


def _reference_trained_unsharded(trace: Trace, module: Ref) -> bool:
    """Does the run also train an unsharded copy of the same model (``dist = deepcopy(ref)``,
    an optimizer over each)? Each rank holds that whole reference anyway: a parity test, where
    sharding the copy per block would save nothing."""
    whole = canonical(module)
    lineage = _lineage(whole)
    sharded = [canonical(target) for shard in trace.shards for target in shard.targets]
    return any(
        reference.root is not whole.root
        and _lineage(reference) == lineage
        and not any(may_overlap(reference, target) for target in sharded)
        for optimizer in trace.optimizers
        if optimizer.result.root.params is not None  # type: ignore[union-attr]
        for reference in (canonical(source.ref) for source in optimizer.result.root.params.sources)  # type: ignore[union-attr]
    )


def _lineage(module: Ref) -> Ref:
    """The module a ``copy.deepcopy`` chain starts from (the module itself if no copy)."""
    for _ in range(_MAX_DEPTH):
        creation = module.root.event
        if module.path or creation is None or creation.qname != "copy.deepcopy" or not creation.args:
            break
        original = creation.args[0]
        if not isinstance(original, Ref):
            break
        module = canonical(original)
    return module


def _has_blocks(trace: Trace, module: Ref) -> bool:
    """Has the module blocks to shard one by one? Not a torch.nn leaf, nor a module whose
    submodules are leaves and at most one module built the same way (a test's toy MLP, a model
    wrapping one), wherever its class is defined: the runs follow the code that builds it into
    the project's other modules."""
    return _Structure(trace).shape(module.root) is None


# How a module is built, as far as a per-block plan goes (None: it may have blocks, or the runs
# do not show how it is built).
_LEAF = 0  # no submodules: sharding it alone is all there is to do
_FLAT = 1  # submodules that hold no two blocks between them: none to shard one by one
_MAX_DEPTH = 8


class _Structure:
    """The submodules of the modules a run builds: what ``nn.Sequential`` is given, what the
    constructor of a project class stores on ``self``."""

    def __init__(self, trace: Trace) -> None:
        self._stored: dict[int, list[Value]] = {}
        for store in trace.of_kind(EventKind.STORE):
            for owner in refs(store.receiver):
                if not owner.path:
                    self._stored.setdefault(id(owner.root), []).append(store.args[0])

    def shape(self, obj: Obj, depth: int = 0) -> int | None:
        original = _lineage(Ref(obj))  # a copy is built as its original
        if original.path:
            return None
        obj = original.root
        if obj.qname in LEAF_MODULES | PARAMETER_FREE or _named_like_a_layer(obj):
            return _LEAF
        if depth > _MAX_DEPTH:
            return None
        children = self._children(obj)
        if children is None:
            return self._converted(obj, depth)
        shapes = [self._value_shape(child, depth + 1) for child in children]
        if None in shapes:
            return None
        if not shapes:
            return _LEAF
        return _FLAT if shapes.count(_FLAT) <= 1 else None

    def _children(self, obj: Obj) -> list[Value] | None:
        creation = obj.event
        if obj.qname == "torch.nn.Sequential" and creation is not None and not creation.kwargs:
            layers = [option for arg in creation.args for option in options(arg)]
            if all(isinstance(layer, Ref) and _may_be_submodule(layer) for layer in layers):
                return list(creation.args)
            return None  # an `OrderedDict` of layers, a starred list: not known one by one
        if obj.cls is not None and (obj.cls.method("__init__") is not None or _layer_class(obj.cls)):
            return [value for value in self._stored.get(id(obj), []) if any(map(_may_be_submodule, refs(value)))]
        return None

    def _value_shape(self, value: Value, depth: int) -> int | None:
        """The worst shape among the modules a value may be; an option that is no module (``None``
        for an absent layer) adds none."""
        shapes: list[int | None] = []
        for option in options(value):
            if isinstance(option, Ref) and _may_be_submodule(option):
                shapes.append(None if option.path else self.shape(option.root, depth))
            elif option is UNKNOWN:
                shapes.append(None)
        return None if None in shapes else max(shapes, default=_LEAF)

    def _converted(self, obj: Obj, depth: int) -> int | None:
        """``convert_to_float8_training(nn.Linear(16, 16))``: a function (not a class) given a
        module returns that module converted, built as before."""
        creation = obj.event
        if creation is None or creation.kind is not EventKind.CALL or not creation.args:
            return None
        if not (obj.qname or "").rpartition(".")[2][:1].islower():
            return None
        modules = options(creation.args[0])
        if not all(isinstance(module, Ref) and not module.path for module in modules):
            return None
        shapes = [self.shape(module.root, depth) for module in modules]  # type: ignore[union-attr]
        return None if None in shapes else max(shapes, default=None)


def _named_like_a_layer(obj: Obj) -> bool:
    """Is the module an instance of a class named as layers are (`te.LayerNormLinear(...)`, a
    `ColumnParallelLinear` of the project)? Such a layer holds parameters, not blocks, whatever
    else its constructor stores."""
    name = obj.cls.name if obj.cls is not None else obj.qname or ""
    return obj.kind is ObjKind.NEW and name.endswith(LAYER_NAME_ENDINGS)


def _layer_class(cls: ClassInfo) -> bool:
    """Does the project class build on a torch layer (``class LoRALinear(nn.Linear)``)? Its
    submodules are then only those it stores."""
    return any(base in LEAF_MODULES | PARAMETER_FREE for base in cls.external_bases())


def _may_be_submodule(value: Ref) -> bool:
    """Could this stored object be a submodule? Not a container, an optimizer, a parameter or
    buffer, or a tensor torch makes (``torch.zeros(...)``); a module passed in, or made by a call
    the run does not see into (``AutoModel.from_pretrained(name)``), may be."""
    obj = value.root
    if value.path and obj.qname in LEAF_MODULES:
        return False  # `new.weight = linear.weight`: what a torch layer holds are its tensors
    if value.path or obj.kind in _MODULE_KINDS:
        return True
    if obj.kind is not ObjKind.NEW:
        return False
    if obj.cls is not None:
        return not plain_class(obj.cls)  # a config object stored on the model is no submodule
    qname = obj.qname or ""
    last = qname.rpartition(".")[2]
    return last not in NOT_MODULES and (last[:1].isupper() or not qname.startswith("torch."))


_MODULE_KINDS = frozenset({ObjKind.PARAM, ObjKind.SELF, ObjKind.DDP, ObjKind.FSDP1, ObjKind.WRAPPER})
