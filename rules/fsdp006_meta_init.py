from __future__ import annotations

import re
from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    Const,
    Event,
    EventKind,
    ObjKind,
    Params,
    Ref,
    Value,
    canonical,
    framework_owned,
    may_overlap,
    options,
    refs,
    report_node,
    walk_contents,
)
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Severity
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature

# Calls after `to_empty()` that give the parameters real values.
SET_STATE_DICT = f"{apis.STATE_DICT}.set_state_dict"
# Methods named for what initialises a module: `init_weights`, `load_hf`, `from_hf(path)` (into the module), ...
INIT_METHOD = re.compile(r"init|reset|load|restore|materiali[sz]e|copy_|fill_|normal_|uniform_|zero_|apply|^from_")
INIT_CALLS = re.compile(
    r"^torch\.nn\.init\.|^torch\.distributed\.checkpoint\.(load|load_state_dict)$"
    r"|^torch\.distributed\.checkpoint\.state_dict\.set_(model_)?state_dict$"
)


class MetaInit(Rule):
    code = "FSDP006"
    name = "meta-device-init"
    summary = "module built on the meta device is never materialised with `to_empty()`"
    hint = (
        "after sharding, call `model.to_empty(device=...)` and then initialise the parameters "
        "(`model.init_weights()`, `reset_parameters()` on every module, or load a checkpoint)"
    )
    failure = (
        "`RuntimeError: FSDP parameters should be materialized from meta device` at the first forward, or "
        "(after `to_empty()` without init) silent garbage weights and a NaN loss"
    )
    docs = """
## What it does
Two cases of meta-device initialisation:
- **error**, at the meta-device construction itself (inside the helper or method that builds
  it, in whichever file that is): a module built under `with torch.device("meta"):` (or with
  `device="meta"`, after `torch.set_default_device("meta")`, also called by a helper or by a
  context manager given the device, `with init_device("meta"):`, or under accelerate's
  `init_empty_weights()`) is sharded and nothing materialises *that model*: no `to_empty(...)`,
  `load_state_dict(..., assign=True)` or full-state-dict `set_model_state_dict` reaches the object
  built there (directly, through an alias, a helper it is passed to, or another method of the
  class that holds it). A `to_empty()` of another model, or in a helper nothing calls with this
  one, does not count. A module handed to code the analysis does not follow, or held by an object
  of a framework's class (a `LightningModule`, which Lightning materialises itself), is left alone;
- **error**, at the forward: the sharded meta model runs forward (`model(x)`, or a helper that does)
  before the `to_empty()` that materialises it;
- **warning**, at the `to_empty()` call: a sharded module is materialised but nothing initialises it
  afterwards (`init_weights()`, `reset_parameters()`, `.apply(init_fn)`, `torch.nn.init.*`,
  `load_state_dict`, `set_model_state_dict`, `dcp.load`, a method of the module named for loading
  or initialising (`model.load_hf(path)`, `model.from_hf(path)`), or a helper of the file that does;
  a call that passes the module or its parameters to code outside the file is assumed to initialise
  it, and so is the caller of a method or function that materialises a module it did not build:
  `self`, or an argument).

## Where it is reported
The construction is the misuse when nothing on the model's own path materialises it: there is no
wrong order to point at, only a missing step, so a `build_model()` helper that builds on meta is
reported inside, at its construction (the message names where the model is sharded), not at the
caller's `model = build_model()`. When the model is materialised but runs forward first, each step
is right on its own and the order is wrong: the forward is reported, or the call that runs it
(`evaluate(model)`), in the innermost function that also runs the `to_empty()`.

## Known problems
- A `to_empty()` (or `load_state_dict(..., assign=True)`) on a value the analysis cannot identify
  (`getattr(self, name)`, an item of a container it does not follow) is taken to materialise the
  model: it may be it.
- A model materialised in part (`model.layers[0].to_empty(...)`, or one real parameter assigned to
  it: `new.weight = linear.weight`, as a `from_float` conversion does) counts as materialised: which
  parameters a partial materialisation leaves on meta is not decided statically.
- A method of the model's class that nothing in the file calls runs in an order the file does not
  show: its `to_empty()` of the model counts, before or after a forward.

## Why is this bad?
Meta tensors have no storage. Never materialised, the first forward fails with
`RuntimeError: FSDP parameters should be materialized from meta device before training, but the
following were still on meta device: [...]`. `to_empty()` allocates storage but does not fill it:
observed with torch 2.13, every parameter held uninitialised memory (values of 1e24 to 1e36, or
exact zeros, sometimes NaN) and the first loss was NaN. Uninitialised memory differs from run to
run, so the symptom can look like a flaky divergence.
"""
    valid = (
        """
import torch
import torch.distributed.fsdp as fsdp

def shard_norms(model):
    from torch.distributed.fsdp import fully_shard  # looked up at call time: the test's stand-in

    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            fully_shard(module)

def test_shards_each_norm(monkeypatch):
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.LayerNorm(4))
    calls = []
    monkeypatch.setattr(fsdp, "fully_shard", lambda module, **kwargs: calls.append(module))
    shard_norms(model)
    assert len(calls) == 1
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

with torch.device("meta"):
    model = Transformer(args)
for block in model.layers:
    fully_shard(block)
fully_shard(model)
model.to_empty(device="cuda")
model.init_weights()
""",
    )
    invalid = (
        """
import torch
from torch.distributed.fsdp import fully_shard

with torch.device("meta"):
    model = Transformer(args)  # expect: FSDP006
fully_shard(model)
loss = model(tokens).sum()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

with torch.device("meta"):
    model = Transformer(args)
fully_shard(model)
model.to_empty(device="cuda")  # expect: FSDP006
loss = model(tokens).sum()
""",
        """
import torch
from torch.distributed.fsdp import fully_shard

def materialise(module):  # materialises the model it is given; nothing gives it `model`
    module.to_empty(device="cuda")
    module.init_weights()

with torch.device("meta"):
    model = Transformer(args)  # expect: FSDP006
fully_shard(model)
loss = model(tokens).sum()
""",
    )
    requires = (("meta", "to_empty", "init_empty_weights"), ("fully_shard",))
    signature = RuntimeSignature(
        evidence="not_materialized",
        exception=("RuntimeError",),
        message=r"should be materialized from meta device",
        note="or, after to_empty() without init, parameters still holding to_empty()'s memory at the first step",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            yield from _never_materialised(facts, trace)
            for to_empty in trace.methods("to_empty"):
                if _sharded(trace, to_empty) and not _initialised_after(facts, trace, to_empty):
                    yield Finding(
                        to_empty.node,
                        "`to_empty()` allocates uninitialised memory and nothing initialises the parameters "
                        "afterwards: training starts from garbage (NaN loss)",
                        hint="initialise after `to_empty()`: `init_weights()`, `reset_parameters()`, "
                        "`.apply(init_fn)`, or load a checkpoint",
                        severity=Severity.WARNING,
                    )


def _materialised_modules(event: Event) -> Value | None:
    """The module an event materialises: the receiver of ``to_empty()`` or of
    ``load_state_dict(..., assign=True)``, the model given to a full-state-dict ``set_model_state_dict``."""
    if event.kind is EventKind.METHOD and event.name == "to_empty":
        return event.receiver
    if event.kind is EventKind.CALL and event.qname in (apis.SET_MODEL_STATE_DICT, SET_STATE_DICT):
        return event.arg(0, "model") if _loads_full_state(event) else None
    if event.kind is EventKind.METHOD and event.name == "load_state_dict" and event.kwargs.get("assign") == Const(True):
        return event.receiver
    if event.kind is EventKind.STORE and event.args and _real_parameter(event.args[0]):
        return event.receiver  # `new.weight = linear.weight`: the layer built on meta takes a real one
    return None


def _real_parameter(value: Value) -> bool:
    """Is the value a parameter with storage: a new ``nn.Parameter``, or what another module holds
    (``linear.weight``) where that module was not built on the meta device?"""
    return any(
        isinstance(option, Ref)
        and option.root.event is not None
        and (
            option.root.event.qname in _PARAMETER_CLASSES
            if not option.path
            else option.root.kind is ObjKind.NEW and not _on_meta(option.root.event)
        )
        for option in options(value)
    )


_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _loads_full_state(event: Event) -> bool:
    """``set_model_state_dict`` with a full (or rank-0 broadcast) state dict loads with
    ``assign=True`` into meta parameters: it materialises them (observed with torch 2.13)."""
    options = event.kwargs.get("options")
    if options is None:
        return False
    for ref in refs(options):
        creation = ref.root.event
        if creation is not None and creation.qname == apis.STATE_DICT_OPTIONS:
            return any(
                key in creation.kwargs and creation.kwargs[key] != Const(False)
                for key in ("full_state_dict", "broadcast_from_rank0")
            )
    return True  # options built where we cannot see them


def _never_materialised(facts: FileFacts, trace: Trace) -> Iterator[Finding]:
    """Meta-device constructions of sharded modules that nothing materialises, reported at the
    construction itself, wherever it is (the model's own path lacks the step: no order is wrong);
    and forwards that run before the model's materialisation (an order that is wrong)."""
    reported = set()
    built_on_meta = [event for event in trace.events if _constructs(event) and _on_meta(event)]
    for shard in trace.shards:
        for target in shard.targets:
            creation = _meta_creation(target) or _meta_part(built_on_meta, target)
            if creation is None or id(creation) in reported:
                continue
            reported.add(id(creation))
            if trace.handed_off([target], creation.index) is not None or framework_owned(target):
                continue  # e.g. returned to a framework that materialises meta modules itself
            model = [canonical(target), canonical(creation.result)]  # type: ignore[arg-type]
            name = canonical(creation.result).text  # type: ignore[arg-type]
            found = _materialisations(trace, model)
            if found:
                yield from _forward_first(facts, trace, shard, found[0], model, name)
            elif not _materialised_by_sibling(facts, trace, creation):
                yield Finding(
                    creation.node,
                    f"`{name}` is built on the meta device and sharded ({facts.where(shard.node, creation.node)}), "
                    "but never materialised with `to_empty()`: the first forward fails with 'FSDP parameters "
                    "should be materialized from meta device'",
                    related=((shard.node, f"`{name}` is sharded here"),),
                )


def _materialisations(trace: Trace, model: list[Ref]) -> list[Event]:
    """The events of the trace that materialise this model (or a value the trace cannot identify,
    which may be it)."""
    found = []
    for event in trace.events:
        value = _materialised_modules(event)
        if value is not None and (not any(refs(value)) or _overlaps([canonical(r) for r in refs(value)], model)):
            found.append(event)
    return found


def _materialised_by_sibling(facts: FileFacts, trace: Trace, creation: Event) -> bool:
    """Does another method of the instance's class (run in an order the file does not show)
    materialise the object the same construction built (``self.model``, set in ``__init__``)?"""
    if trace.instance is None:
        return False
    return any(
        other is not trace
        and other.instance is not None
        and other.instance.root.cls is trace.instance.root.cls
        and any(_built_by(found, creation) for found in map(_materialised_modules, other.events) if found is not None)
        for other in facts.traces
    )


def _forward_first(
    facts: FileFacts, trace: Trace, shard: Event, materialised: Event, model: list[Ref], name: str
) -> Iterator[Finding]:
    """A forward of the sharded model before its first materialisation: FSDP's pre-forward fails.
    Each step is right on its own, so the order is reported where it is wrong: at the forward, or
    at the call that runs it, in the innermost function that also runs the materialisation."""
    for forward in trace.of_kind(EventKind.INVOKE):
        if forward.index >= materialised.index:
            return
        if (
            forward.index > shard.index
            and not forward.exclusive_with(materialised)
            and _overlaps([canonical(ref) for ref in _modules_of(forward.receiver)], model)
        ):
            reported, later = report_node(forward, materialised), report_node(materialised, forward)
            yield Finding(
                reported,
                f"`{name}` runs forward before it is materialised ({facts.where(later, reported)}): "
                "the forward fails with 'FSDP parameters should be materialized from meta device'",
                hint="materialise the model (`to_empty()`, then initialise it) before its first forward",
                related=((later, f"`{name}` is materialised here"),),
            )
            return


def _built_by(value: Value, creation: Event) -> bool:
    """Is ``value`` a module the same construction site built (or one inside or around it)?"""
    for ref in refs(value):
        obj = ref.root
        while obj is not None:
            if obj.event is not None and obj.event.node is creation.node:
                return True
            obj = obj.parent.root if obj.parent is not None else None
    return False


def _constructs(event: Event) -> bool:
    return isinstance(event.result, Ref) and not event.result.path and event.result.root.event is event


def _meta_part(built_on_meta: list[Event], module: Ref) -> Event | None:
    """The first meta construction of a module inside ``module`` (``nn.Linear(..., device="meta")``
    given to an ``nn.Sequential`` built on the CPU)."""
    whole = canonical(module)
    for creation in built_on_meta:
        if may_overlap(canonical(creation.result), whole):  # type: ignore[arg-type]
            return creation
    return None


def _meta_creation(module: Ref) -> Event | None:
    """The construction on the meta device of the outermost module that contains ``module``."""
    found = None
    obj = module.root
    while obj is not None:
        if obj.event is not None and _on_meta(obj.event):
            found = obj.event
        obj = obj.parent.root if obj.parent is not None else None
    return found


def _on_meta(creation: Event) -> bool:
    if creation.ctx.meta_device:
        return True
    device = creation.kwargs.get("device")
    return device is not None and any(
        isinstance(value, Const) and isinstance(value.value, str) and value.value.startswith("meta")
        for value in walk_contents(device)
    )


def _sharded(trace: Trace, to_empty: Event) -> bool:
    """Is the materialised module sharded, before or after? (A meta skeleton rank 0 fills from a
    gathered state dict, `save_pretrained(path, state_dict=full)`, never trains.)"""
    return any(
        trace.sharded_overlap(ref, to_empty) or trace.sharded_later(ref, to_empty) for ref in refs(to_empty.receiver)
    )


def _initialised_after(facts: FileFacts, trace: Trace, to_empty: Event) -> bool:
    found = list(refs(to_empty.receiver))
    modules = [canonical(ref) for ref in found]
    if not modules or trace.handed_off(modules, to_empty.index, parameters=True) is not None:
        return True  # an object we cannot identify, or one (or its parameters) handed to code we cannot see
    if all(ref.root.event is None and ref.root.kind in (ObjKind.SELF, ObjKind.PARAM) for ref in found):
        return True  # a module the caller built (`self`, an argument): the caller may initialise it
    candidates = [event for event in trace.events[to_empty.index + 1 :] if not event.exclusive_with(to_empty)]
    if trace.instance is not None:  # other methods of the class may run afterwards
        candidates += [
            event
            for other in facts.traces
            if other is not trace and other.instance is not None and other.instance.root.cls is trace.instance.root.cls
            for event in other.events
        ]
    return any(_initialises(event, modules) for event in candidates)


def _initialises(event: Event, modules: list[Ref]) -> bool:
    if event.kind is EventKind.CALL and event.qname and INIT_CALLS.search(event.qname):
        return True
    touched = [canonical(ref) for ref in _modules_of(event.receiver)] if event.receiver is not None else []
    return event.kind is EventKind.METHOD and bool(INIT_METHOD.search(event.name or "")) and _overlaps(touched, modules)


def _modules_of(value) -> Iterator[Ref]:
    """The modules a value is, or whose parameters it holds (``p.normal_()`` for ``p`` in
    ``model.parameters()``)."""
    for option in options(value):
        if isinstance(option, Ref):
            yield option
        elif isinstance(option, Params):
            yield from (source.ref for source in option.sources)


def _overlaps(some: list[Ref], others: list[Ref]) -> bool:
    return any(may_overlap(a, b) for a in some for b in others)
