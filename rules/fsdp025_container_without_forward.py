from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Event, Ref, refs
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing.builders import code_of
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature
from fsdp2_lint.torch_version import TorchVersions

# torch's module containers that have no `forward` of their own.
CONTAINERS = {"torch.nn.ModuleList": "ModuleList", "torch.nn.ModuleDict": "ModuleDict"}


class ContainerWithoutForward(Rule):
    code = "FSDP025"
    name = "shard-container-without-forward"
    summary = "`fully_shard` on an `nn.ModuleList` / `nn.ModuleDict`, which has no `forward` to hook"
    hint = (
        "shard the modules inside it one by one, `for block in model.layers: fully_shard(block)` "
        "(`.values()` for a `ModuleDict`), or group them, `fully_shard(list(model.layers))`"
    )
    failure = (
        "`ValueError: fully_shard does not support containers that do not implement forward: ModuleList(...)` "
        "at the call"
    )
    docs = """
## What it does
Flags `fully_shard(x)` where `x` is an `nn.ModuleList` or an `nn.ModuleDict`: a container built
in the flow (`blocks = nn.ModuleList(...)`) or stored by the model's class
(`self.layers = nn.ModuleList(...)` in `__init__`, then `fully_shard(model.layers)`). Not flagged:
the modules inside it sharded one by one, a list of modules given as one group
(`fully_shard([model.layers[0], model.layers[1]])`, also `fully_shard(list(model.layers))`), an
`nn.Sequential` (it has a `forward`), a project subclass of `ModuleList` that defines `forward`,
and a container a helper's `isinstance(module, nn.ModuleList)` test sends to a loop over its
modules (the `fully_shard` in its other arm never gets it).

## Why is this bad?
`fully_shard` works through the forward hooks of the module it is given: its pre-forward hook
all-gathers the group's parameters. A `ModuleList` or `ModuleDict` is never called, so those hooks
would never run. Observed with torch 2.13 (CPU/gloo): `fully_shard(model.layers)` raises
`ValueError: fully_shard does not support containers that do not implement forward:
ModuleList(...)` at the call (the same for `ModuleDict`); a subclass that defines `forward`, an
`nn.Sequential`, and a container inside a list of modules are accepted. The check was added to
torch in pytorch/pytorch#168905 (for pytorch/pytorch#167856); older versions, not checked here,
accept the call, so `confirm` reports this rule's fixtures as not reproducible before 2.13.

Use instead:

```python
for block in model.layers:
    fully_shard(block)
fully_shard(model)
```

## Fix safety
`fully_shard(X, ...)` as a statement of its own becomes `for block in X: fully_shard(block, ...)`
(`X.values()` for a `ModuleDict`), with the same arguments: each module inside gets its own group,
as the idiom does, and the call that raised now shards what it names. Safe: the result of the
call is not used, and the loop variable is a name the file does not use. A call whose result is
assigned, or a container given by keyword, is not changed.

## Known problems
A container is recognised only where the analysis knows the object: built in the flow, or stored
as a direct attribute of a model whose class the project defines. `model.encoder.layers` (an
attribute of an attribute) or a container returned by a library is not reported.
"""
    valid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

model = Model()
for block in model.layers:
    fully_shard(block)
fully_shard(model)
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
fully_shard(list(blocks))
trunk = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
fully_shard(trunk)
""",
    )
    invalid = (
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

model = Model()
fully_shard(model.layers)  # expect: FSDP025
fully_shard(model)
""",
        """
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

heads = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})
fully_shard(heads)  # expect: FSDP025
""",
    )
    fix_offer = FixOffer(
        summary="`fully_shard(X, ...)` → `for block in X: fully_shard(block, ...)` (`X.values()` for a `ModuleDict`)",
        applicabilities=(Applicability.SAFE,),
        safety="the modules inside get a group each, with the call's arguments; its result was not used",
    )
    requires = (("fully_shard",), ("ModuleList", "ModuleDict"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("ValueError",),
        message=r"fully_shard does not support containers that do not implement forward",
        torch_versions=TorchVersions(
            since="2.13",
            why="the container check (pytorch/pytorch#168905) is checked on 2.13 only; older torch not checked",
        ),
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        reported: set[int] = set()
        for trace in facts.traces:
            for shard in trace.shards:
                module = shard.arg(0, "module")
                container = _container(facts, module) if module is not None else None
                if container is not None and id(shard.node) not in reported:
                    reported.add(id(shard.node))
                    name = facts.name_as_written(next(iter(refs(module))), shard.node)
                    yield Finding(
                        shard.node,
                        f"`{name}` is an `nn.{container}`, which has no `forward`, so `fully_shard`'s hooks "
                        f"would never run: `ValueError: fully_shard does not support containers that do not "
                        f"implement forward`",
                        fix=_shard_each(facts, shard, container),
                    )


def _container(facts: FileFacts, module: object) -> str | None:
    """``ModuleList`` / ``ModuleDict`` when every object the argument may be is that container: the
    object itself where the flow knows it, else what the class's methods store in the attribute."""
    objects = [obj for ref in refs(module) for obj in ([ref] if not ref.path else facts.objects_in(ref))]
    kinds = {_kind(obj) for obj in objects}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _kind(obj: Ref) -> str | None:
    return CONTAINERS.get(obj.root.qname or "") if not obj.path and obj.root.cls is None else None


def _shard_each(facts: FileFacts, shard: Event, container: str) -> Rewrite | None:
    """``fully_shard(X, **kw)`` alone on its line -> ``for block in X: fully_shard(block, **kw)``."""
    call = shard.node
    found = facts.statement_of(call)
    if found is None or not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None:
        return None
    line = found[0]
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    if not (isinstance(line.body[0], cst.Expr) and line.body[0].value is call) or call.args[0].star:
        return None
    source = facts.text_of(call).source
    name = next((n for n in ("block", "child", "submodule") if not re.search(rb"\b%s\b" % n.encode(), source)), None)
    if name is None:
        return None
    items = code_of(call.args[0].value) + (".values()" if container == "ModuleDict" else "")
    rest = "".join(", " + code_of(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for arg in call.args[1:])
    loop = cst.parse_statement(f"for {name} in {items}:\n    {code_of(call.func)}({name}{rest})\n")
    loop = loop.with_changes(leading_lines=line.leading_lines)
    body = loop.body.with_changes(header=line.trailing_whitespace)  # the line's comment stays on the `for` line
    return Rewrite(f"shard each module of the {container}", {line: loop.with_changes(body=body)})
