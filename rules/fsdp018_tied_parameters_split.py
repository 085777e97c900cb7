from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import (
    ANY_DEPTH,
    Event,
    EventKind,
    Ref,
    Value,
    canonical,
    const,
    getter_element,
    is_exact,
    may_contain,
    refs,
)
from fsdp2_lint.analysis.trace import Trace, plain_attribute
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing.builders import code_of
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature
from fsdp2_lint.torch_version import TorchVersions


class TiedParametersSplit(Rule):
    code = "FSDP018"
    name = "tied-parameters-split"
    summary = (
        "tied (shared) parameters are sharded in different `fully_shard` groups, or a tie made on the meta "
        "device is broken by `to_empty()` before sharding"
    )
    hint = (
        "shard the two modules that share the parameter in one group, `fully_shard([model.emb, model.head])`, "
        "or leave both to the root's group"
    )
    failure = (
        "`ValueError: Parameter '...' is shared with a parameter already managed by another FSDP group` "
        "at the first forward; a tie broken by `to_empty()` fails silently: the two modules train separate copies"
    )
    docs = """
## What it does
Flags a `fully_shard` call that puts one of two modules sharing a parameter in its own group
without the other: the file ties them (`model.head.weight = model.emb.weight`, in the flow or
in a same-file constructor, `tie_weights()` method or helper that the flow runs, including the
script's own `model.tie_weights()` after construction), then calls `fully_shard(model.emb)` (or
`fully_shard(model.head)`, or a block that holds one of them, or a loop over a literal list,
`for m in [model.emb, *model.layers, model.head]: fully_shard(m)`, where each item is a group of
its own) while the other module stays in another group (the root's, or its own). A tie under
`if config.tie_word_embeddings:` counts when the flag is True or not known, and not when the
config the constructor is given sets it False. A Hugging Face model loaded with
`tie_word_embeddings=True` given explicitly (`AutoModelForCausalLM.from_pretrained(...,
tie_word_embeddings=True)`, or `from_config` of a config that sets it True) ties its input and
output embeddings: a call that shards `model.get_input_embeddings()` or `model.model.embed_tokens`
(`transformer.wte`) without `model.get_output_embeddings()` or `model.lm_head`, or the reverse,
is flagged. Not flagged: `fully_shard([model.emb, model.head])`, a call on a module holding
both, the tied modules left to the root's group, weights that are not tied (a `tie_weights()`
that nothing calls, a config flag set False, a tied parameter replaced by a copy of its own before
the call).

Also flagged, at the `to_empty()` call: a model built on the meta device (`with
torch.device("meta"):`) whose constructor (or a method or helper it runs) ties two of its modules,
materialised by `model.to_empty(...)` before any `fully_shard` group holds both tied modules, with
nothing tying them again afterwards. Not flagged: `to_empty()` after `fully_shard(model)` (or a
group holding both), a tie made again after `to_empty()` (`model.tie_weights()`,
`model.head.weight = model.emb.weight`), a tie made after `to_empty()`, a model with no tie.

A number is no tie: a value read from a config the model keeps (`self.norm = RMSNorm(dim,
eps=model_args.norm_eps)` with `self.model_args = model_args`), an instance of a project class
that is no `nn.Module` or that declares the attribute `int`, `float`, `bool` or `str`
(`norm_eps: float`), is stored on each module as a plain value, not shared as a parameter; so is
anything stored under a name that holds settings (`config`, `cfg`, `args`, `hparams`, `settings`,
or one ending in them: `model_cfg`, `mtp_config`, `self._compile_cfg = config.compile_cfg`).

## Why is this bad?
`fully_shard` replaces each parameter of its group by a sharded DTensor. Tied parameters are one
`nn.Parameter` owned by two modules; when the modules land in different groups, the first group
takes the parameter and the tie is broken (`model.head.weight is model.emb.weight` is `False`
after `fully_shard(model.emb)`). With torch 2.13 the lazy initialisation at the **first
forward** raises `ValueError: Parameter 'emb.weight' is shared with a parameter already managed
by another FSDP group. For shared/tied parameters, use fully_shard([module_a, module_b]) to place
them in the same FSDP group.` (checked on torch 2.13.0, CPU/gloo, 2 ranks; `fully_shard` itself
does not raise). Torch 2.11 does not raise (checked on an H100 with NCCL, 2026-11-26; 2.12 not
checked): the tie is silently broken and the two copies train separately, so the rule runs for
every version and `confirm` reports its bad fixtures as not reproducible before 2.13.

`to_empty()` gives each registered name of each module a new tensor of its own, so on an
unsharded model the two names of a tied parameter end up with two tensors: with torch 2.13 the tie
breaks silently (`model.head.weight is model.emb.weight` is `False` afterwards, the later
`fully_shard` raises nothing, and the two modules train separate copies; checked on torch 2.13.0,
CPU/gloo, 2 ranks). `init_weights()` or `reset_parameters()` do not tie them again. Once a
`fully_shard` group holds both modules the tie is one DTensor, which `to_empty()` keeps.

Use instead:

```python
fully_shard([model.emb, model.head], mesh=mesh)  # one group: the tie stays one parameter
fully_shard(model, mesh=mesh)
```

or, after meta-device construction:

```python
model.to_empty(device="cuda")
model.tie_weights()  # to_empty() gave each name a tensor of its own
```

## Known problems
Only ties the file shows are seen, and a library model's only where `tie_word_embeddings=True`
is written: a Hugging Face model loaded with the checkpoint's default (True for GPT-2, False for
Llama 2: it differs by checkpoint) is taken as untied, and only the names above are known as its
embeddings (`fully_shard(model.model)`, which holds Llama's `embed_tokens` but not `lm_head`, is
not reported). A tie or a `fully_shard` call whose module path is not known exactly (a loop over
`model.modules()`, or over blocks that may or may not hold a tied module) is not reported. A tie
and a split that each run under a condition of their own (`if tie:` around the tie, `if not
tie:` around the calls) are taken to be exclusive and not reported, even where the two tests are
unrelated. After `to_empty()`, any store of the tied attribute on one of the two modules counts as
tying them again, as does any `tie_weights()` call on the model and handing the model to code the
file does not show; a `fully_shard` group that may hold both tied modules (a module whose path is
not known exactly) counts as keeping the tie. A Hugging Face model built on the meta device is not
checked for this. A config whose class the analysis does not see (made by a call it does not
follow) is not known to hold plain values: a value read from it and stored on another module of
the model reads as a tie.
"""
    valid = (
        """
from torch.distributed.fsdp import fully_shard

model.head.weight = model.emb.weight
fully_shard([model.emb, model.head])
fully_shard(model)
""",
        """
from torch.distributed.fsdp import fully_shard

model.head.weight = model.emb.weight
for block in model.layers:
    fully_shard(block)
fully_shard(model)  # emb and head stay together in the root's group
""",
        """
from torch.distributed.fsdp import fully_shard

fully_shard(model.emb)  # not tied
fully_shard(model.head)
fully_shard(model)
""",
        """
from transformers import AutoModelForCausalLM
from torch.distributed.fsdp import fully_shard

model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
fully_shard([model.get_input_embeddings(), model.get_output_embeddings()])
fully_shard(model)
""",
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight


with torch.device("meta"):
    model = LM()
model.to_empty(device="cuda")
model.head.weight = model.emb.weight  # tied again
model.apply(init_weights)
fully_shard(model)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import fully_shard

model.head.weight = model.emb.weight
fully_shard(model.emb)  # expect: FSDP018
fully_shard(model)
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight


model = LM()
fully_shard(model.head)  # expect: FSDP018
fully_shard(model)
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class LM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.dim)
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)

    def tie_weights(self):
        self.lm_head.weight = self.embed_tokens.weight


model = LM(config)
model.tie_weights()
for module in [model.embed_tokens, model.lm_head]:
    fully_shard(module)  # expect: FSDP018
fully_shard(model)
""",
        """
from transformers import AutoModelForCausalLM
from torch.distributed.fsdp import fully_shard

model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
fully_shard(model.get_input_embeddings())  # expect: FSDP018
fully_shard(model)
""",
        """
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight


with torch.device("meta"):
    model = LM()
model.to_empty(device="cuda")  # expect: FSDP018
model.apply(init_weights)
fully_shard(model)
""",
    )
    fix_offer = FixOffer(
        summary="`fully_shard(model.emb, **kw)` then `fully_shard(model.head, **kw)` → "
        "`fully_shard([model.emb, model.head], **kw)`",
        applicabilities=(Applicability.SAFE,),
        safety="offered only where the two calls that split the tie are adjacent statements of their own, "
        "each given one module (neither inside the other) and the same keyword arguments, written alike, "
        "and neither result is used: the two modules then get the one group torch asks for, with the "
        "arguments each had, at the same point of the program (nothing runs between the two calls). "
        "Calls that are not adjacent, that differ in an argument, or whose result is assigned get no fix",
    )
    requires = (("fully_shard",),)
    signature = RuntimeSignature(
        evidence="tie_broken",  # the meta-init shape is silent; the split raises
        exception=("ValueError",),
        message=r"is shared with a parameter already managed by another FSDP group",
        torch_versions=TorchVersions(
            since="2.13",
            why="fully_shard's duplicate-parameter check; torch 2.11 has none and the tie breaks silently "
            "(an H100 run, 2026-11-26); 2.12 not checked. The meta-init tie that to_empty() breaks is "
            "silent in 2.13 too (tie_broken evidence); older versions not checked",
        ),
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            ties = [*_ties(trace), *_library_ties(trace)]
            if not ties:
                continue
            reported: set[int] = set()  # each tie once, at the first call that splits it
            for shard in trace.shards:
                for tie in ties:
                    if id(tie) in reported or tie.event.index > shard.index or tie.event.exclusive_with(shard):
                        continue
                    if _correlated(tie.event, shard) or _untied(trace, tie, shard):
                        continue
                    split = _splits(shard, tie)
                    if split is not None:
                        alone, other = split
                        reported.add(id(tie))
                        yield Finding(
                            shard.node,
                            _message(tie, alone, other),
                            fix=_group_adjacent(facts, trace, shard, tie, other),
                        )
                        break
            yield from _broken_by_to_empty(trace, ties)


def _broken_by_to_empty(trace: Trace, ties: list[_Tie]) -> Iterator[Finding]:
    """``to_empty()`` on an unsharded module holding a tie made on the meta device, with nothing
    tying the two again afterwards: ``to_empty()`` gives each name a tensor of its own."""
    for to_empty in trace.methods("to_empty"):
        modules = [canonical(ref) for ref in refs(to_empty.receiver)]
        if not modules or trace.handed_off(modules, to_empty.index) is not None:
            continue  # code this trace does not show may tie them again
        for tie in ties:
            if tie.library or not tie.event.ctx.meta_device or tie.event.index > to_empty.index:
                continue
            if tie.event.exclusive_with(to_empty) or not any(_holds_both(m, tie) for m in modules):
                continue
            if _sharded_whole(trace, tie, to_empty) or _tied_again(trace, tie, to_empty, modules):
                continue
            yield Finding(
                to_empty.node,
                f"`to_empty()` gives `{tie.owner.text}.{tie.name}` a tensor of its own: its tie to "
                f"`{tie.source.text}.{tie.name}`, made on the meta device, breaks and nothing ties them again, "
                "so the two modules train separate copies",
                hint="tie the weights again after `to_empty()` (`model.tie_weights()`, "
                "`model.head.weight = model.emb.weight`), or call `to_empty()` after `fully_shard(model)`",
                related=((tie.event.node, "tied here, on the meta device"),),
            )
            break  # one finding per call


def _holds_both(module: Ref, tie: _Tie) -> bool:
    return _holds(module, tie.owner) and _holds(module, tie.source)


def _sharded_whole(trace: Trace, tie: _Tie, to_empty: Event) -> bool:
    """Does a ``fully_shard`` group that may hold both tied modules run between the tie and
    ``to_empty()``? The tie is then one DTensor, which ``to_empty()`` keeps."""
    return any(
        tie.event.index < shard.index < to_empty.index
        and any(
            any(may_contain(canonical(t), tie.owner) for t in group)
            and any(may_contain(canonical(t), tie.source) for t in group)
            for group in shard.groups
        )
        for shard in trace.shards
    )


def _tied_again(trace: Trace, tie: _Tie, to_empty: Event, modules: list[Ref]) -> bool:
    """After ``to_empty()``: a store of the tied attribute on one of the two modules (the same
    tie made again, in the flow or a same-file ``tie_weights()``), or a ``tie_weights()`` call on
    the model whose code the file does not show (a Hugging Face model's)."""
    for event in trace.events[to_empty.index + 1 :]:
        if event.exclusive_with(to_empty):
            continue
        if event.kind is EventKind.STORE and event.name == tie.name:
            if any(canonical(receiver) in (tie.owner, tie.source) for receiver in refs(event.receiver)):
                return True
        if event.kind is EventKind.METHOD and event.name == "tie_weights":
            if any(canonical(receiver) in modules for receiver in refs(event.receiver)):
                return True
    return False


def _message(tie: _Tie, alone: Ref, other: Ref) -> str:
    if tie.library:
        model = canonical(Ref(alone.root)).text
        return (
            f"`{model}` is loaded with `tie_word_embeddings=True`: its {alone.path[-1]} share `{tie.name}` with "
            f"its {other.path[-1]}, which this call leaves in another `fully_shard` group"
        )
    return (
        f"`{alone.text}` shares `{tie.name}` with `{other.text}`, which this call leaves in another `fully_shard` group"
    )


@dataclass(frozen=True)
class _Tie:
    event: Event
    owner: Ref  # the module given the other's parameter (`model.head`)
    source: Ref  # the module whose parameter it is (`model.emb`)
    name: str
    library: bool = False  # a Hugging Face model's own tie: `owner` and `source` stand for its embeddings


# Tensor attributes: storing one shares data between two parameters, not the parameter itself.
_NOT_TIES = frozenset({"data", "grad"})
# Attributes that hold a module's settings (a Hugging Face model's `config`, a `model_cfg`): nothing
# under them is a parameter.
_SETTINGS = frozenset({"config", "cfg", "conf", "hparams", "args", "settings"})


def _setting(name: str) -> bool:
    return name.rsplit("_", 1)[-1] in _SETTINGS  # `config`, `model_cfg`, `train_args`


def _ties(trace: Trace) -> Iterator[_Tie]:
    """``a.x = b.y`` where ``b.y`` is an attribute of another module of the same model (a
    parameter taken from one module and stored on another), with both paths known."""
    for store in trace.of_kind(EventKind.STORE):
        if not store.name or not store.name.isidentifier() or store.name in _NOT_TIES or not store.args:
            continue  # `x[i] = ...`, `p.data = q.data` (a copy into another parameter, not a tie)
        if _setting(store.name):
            continue  # `self._compile_cfg = config.compile_cfg`: a setting, not a parameter
        for receiver in refs(store.receiver):
            owner = canonical(receiver)
            if not owner.path or not is_exact(owner):
                continue
            for value in refs(store.args[0]):
                if plain_attribute(value):
                    continue  # a config's `norm_eps`, a declared `eps: float`: a number, not a parameter
                shared = canonical(value)
                if shared.root is not owner.root or len(shared.path) < 2 or not is_exact(shared):
                    continue
                if not shared.path[-1].isidentifier() or shared.path[-1] in _NOT_TIES:
                    continue
                if any(map(_setting, shared.path[:-1])):
                    continue  # `self.llm.config.hidden_size`: a setting a module carries, not a parameter
                source = Ref(shared.root, shared.path[:-1])
                if source.path[: len(owner.path)] == owner.path or owner.path[: len(source.path)] == source.path:
                    continue  # one module inside the other: same subtree, no split possible
                yield _Tie(store, owner, source, store.name)


_HF_LOADERS = frozenset({"from_pretrained", "from_config", "_from_config"})
_TIE_FLAG = "tie_word_embeddings"


def _library_ties(trace: Trace) -> Iterator[_Tie]:
    """``AutoModelForCausalLM.from_pretrained(..., tie_word_embeddings=True)`` (or ``from_config``
    of a config with the flag set True): the loaded model's input and output embeddings are tied.
    The flag left to the checkpoint's default, or not known, is no tie."""
    for load in trace.of_kind(EventKind.CALL):
        qname = load.qname or ""
        if load.name not in _HF_LOADERS or not qname.startswith("transformers.") or "Config." in qname:
            continue  # not a Hugging Face model (`AutoConfig.from_pretrained` loads a config)
        loaded = [ref for ref in refs(load.result) if not ref.path] if load.result is not None else []
        if len(loaded) != 1 or not _ties_embeddings(trace, load):
            continue
        root = loaded[0].root
        yield _Tie(load, Ref(root, (_OUTPUT,)), Ref(root, (_INPUT,)), "weight", library=True)


def _ties_embeddings(trace: Trace, load: Event) -> bool:
    """Is ``tie_word_embeddings`` given True: to the loader, or to the config it is given (when
    the config was made, or set on it before the load)?"""
    if _TIE_FLAG in load.kwargs:
        return const(load.kwargs[_TIE_FLAG]) is True
    config = load.kwargs.get("config") or (load.arg(0) if load.name != "from_pretrained" else None)
    if config is None:
        return False
    stores = [
        store
        for store in trace.of_kind(EventKind.STORE)
        if store.index < load.index and store.name == _TIE_FLAG and store.args and _same(store.receiver, config)
    ]
    if stores:
        return const(stores[-1].args[0]) is True
    made = trace.obtained(config, load)
    return made is not None and _TIE_FLAG in made.kwargs and const(made.kwargs[_TIE_FLAG]) is True


def _same(value: Value | None, other: Value) -> bool:
    """Is ``value`` certainly the object ``other`` is (one object, known the same way)?"""
    mine, theirs = list(refs(value)) if value is not None else [], list(refs(other))
    return len(mine) == len(theirs) == 1 and mine[0].root is theirs[0].root and mine[0].path == theirs[0].path


# A library model's class is not in the project: its two tied modules are known by name, through
# the getters or the attributes the common causal LMs give them (Llama, Qwen, Mistral:
# `model.embed_tokens`; GPT-2: `transformer.wte`; all: a top-level `lm_head`).
_INPUT, _OUTPUT = "input embeddings", "output embeddings"
_ROLES = {
    getter_element("get_input_embeddings"): _INPUT,
    getter_element("get_output_embeddings"): _OUTPUT,
    "embed_tokens": _INPUT,
    "wte": _INPUT,
}


def _as_tied(target: Ref, tie: _Tie) -> Ref | None:
    """``target`` as the tie names its modules; for a library model, the embeddings it is, the
    whole model, or None for a module whose contents are not known."""
    if not tie.library or not target.path:
        return target
    if target.path == ("lm_head",):
        return Ref(target.root, (_OUTPUT,))
    path = target.path[:-1] if target.path[-1] == ANY_DEPTH else target.path  # a getter's module
    role = _ROLES.get(path[-1]) if path and is_exact(Ref(target.root, path[:-1])) else None
    return Ref(target.root, (role,)) if role is not None else None


def _untied(trace: Trace, tie: _Tie, shard: Event) -> bool:
    """Is one of the two tied parameters replaced between the tie and the call
    (``model.lm_head.weight = nn.Parameter(...clone())`` after a tied load)?"""
    for store in trace.of_kind(EventKind.STORE):
        if tie.event.index < store.index < shard.index and store.name == tie.name:
            stored = [_as_tied(canonical(receiver), tie) for receiver in refs(store.receiver)]
            if any(module in (tie.owner, tie.source) for module in stored):
                return True
    return False


def _correlated(tie: Event, shard: Event) -> bool:
    """Do the tie and the call each run under a condition of its own (``if tie_embeddings:`` around
    the tie, ``if not tie_embeddings:`` around the call)? The two tests are usually the same
    setting, so the code splits the modules only when they are not tied: not reported."""
    tie_only = set(tie.ctx.branches) - set(shard.ctx.branches)
    shard_only = set(shard.ctx.branches) - set(tie.ctx.branches)
    return bool(tie_only) and bool(shard_only)


def _holds(target: Ref, module: Ref) -> bool:
    """Certainly: ``target`` is ``module`` or one of its ancestors."""
    return is_exact(target) and module.path[: len(target.path)] == target.path


def _splits(shard: Event, tie: _Tie) -> tuple[Ref, Ref] | None:
    """The tied module one of the call's groups holds without the other, and that other; each
    iteration of a loop over a literal list makes a group of its own."""
    for group in shard.groups:
        targets = [_as_tied(canonical(t), tie) for t in group]
        if any(t is None or t.root is not tie.owner.root for t in targets):
            continue
        for alone, other in ((tie.owner, tie.source), (tie.source, tie.owner)):
            if any(_holds(t, alone) for t in targets) and not any(may_contain(t, other) for t in targets):
                return alone, other
    return None


def _group_adjacent(facts: FileFacts, trace: Trace, shard: Event, tie: _Tie, tied: Ref) -> Rewrite | None:
    """``fully_shard(a, **kw)`` directly followed (or preceded) by ``fully_shard(b, **kw)``, each a
    statement of its own with one module, written with the same keyword arguments -> one
    ``fully_shard([a, b], **kw)`` where the first was. ``b`` must hold ``tied``, the module the
    call leaves in another group; ``a`` and ``b`` must be distinct modules
    known exactly, neither inside the other (``fully_shard(model.emb)`` then ``fully_shard(model)``
    is no pair: the root's call must stay)."""
    found = _alone(facts, shard.node)
    if found is None:
        return None
    line, block = found
    body = list(block.body)
    index = body.index(line)
    for neighbour in (body[index - 1] if index else None, body[index + 1] if index + 1 < len(body) else None):
        if neighbour is None:
            continue
        call = _call_of(neighbour)
        other = next((s for s in trace.shards if s.node is call), None) if call is not None else None
        if other is None or not _pair(facts, shard, other):
            continue
        neighbour_module = _as_tied(canonical(other.targets[0]), tie)
        if neighbour_module is None or not _holds(neighbour_module, tied):
            continue
        first, second = (line, neighbour) if body.index(neighbour) > index else (neighbour, line)
        if _has_comment(second):
            return None  # the removed line's comment would be lost
        calls = [_call_of(first), _call_of(second)]
        grouped = cst.List([cst.Element(c.args[0].value) for c in calls])
        args = [calls[0].args[0].with_changes(value=grouped), *calls[0].args[1:]]
        merged = first.with_changes(body=[first.body[0].with_changes(value=calls[0].with_changes(args=args))])
        return Rewrite(
            "shard the two tied modules in one group",
            {first: merged, second: cst.RemoveFromParent()},
        )
    return None


def _alone(facts: FileFacts, call: cst.CSTNode) -> tuple[cst.SimpleStatementLine, cst.CSTNode] | None:
    """The statement line ``call`` is, alone (``fully_shard(x, ...)`` whose result is not used), in
    the linted file, and its block."""
    if not facts.text.layout.holds(call):
        return None
    found = facts.statement_of(call)
    if found is None or _call_of(found[0]) is not call:
        return None
    return found  # type: ignore[return-value]


def _call_of(statement: cst.CSTNode) -> cst.Call | None:
    """The call a statement line consists of: ``f(x, k=v)`` alone, its first argument positional,
    the rest keywords, no starred argument."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    expr = statement.body[0]
    call = expr.value if isinstance(expr, cst.Expr) else None
    if not isinstance(call, cst.Call) or not call.args:
        return None
    head, *rest = call.args
    if head.keyword is not None or head.star or any(a.keyword is None or a.star for a in rest):
        return None
    return call


def _pair(facts: FileFacts, shard: Event, other: Event) -> bool:
    """Two calls of the same function with the same keyword arguments as written, each on one module
    known exactly, the two modules of one model and neither inside the other."""
    a, b = _call_of(facts.statement_of(shard.node)[0]), _call_of(facts.statement_of(other.node)[0])
    if a is None or b is None or code_of(a.func) != code_of(b.func) or _keywords(a) != _keywords(b):
        return False
    if len(shard.targets) != 1 or len(other.targets) != 1:
        return False
    x, y = canonical(shard.targets[0]), canonical(other.targets[0])
    if not (is_exact(x) and is_exact(y)) or x.root is not y.root or not x.path or not y.path:
        return False
    shorter = min(len(x.path), len(y.path))
    return x.path[:shorter] != y.path[:shorter]


def _keywords(call: cst.Call) -> list[tuple[str, str]]:
    return sorted((arg.keyword.value, code_of(arg.value)) for arg in call.args[1:] if arg.keyword is not None)


def _has_comment(statement: cst.SimpleStatementLine) -> bool:
    return statement.trailing_whitespace.comment is not None or any(
        line.comment is not None for line in statement.leading_lines
    )
