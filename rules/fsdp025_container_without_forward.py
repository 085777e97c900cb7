from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Ref, refs
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature
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
`nn.Sequential` (it has a `forward`), and a project subclass of `ModuleList` that defines `forward`.

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
                    )


def _container(facts: FileFacts, module: object) -> str | None:
    """``ModuleList`` / ``ModuleDict`` when every object the argument may be is that container: the
    object itself where the flow knows it, else what the class's methods store in the attribute."""
    objects = [obj for ref in refs(module) for obj in ([ref] if not ref.path else facts.objects_in(ref))]
    kinds = {_kind(obj) for obj in objects}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _kind(obj: Ref) -> str | None:
    return CONTAINERS.get(obj.root.qname or "") if not obj.path and obj.root.cls is None else None
