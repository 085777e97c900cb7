from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import canonical, may_overlap, refs, report_node
from fsdp2_lint.rule import Finding, Rule, RuntimeSignature


class Fsdp1AndFsdp2Mixed(Rule):
    code = "FSDP017"
    name = "fsdp1-and-fsdp2-mixed"
    summary = "one model uses both FSDP1 `FullyShardedDataParallel` and FSDP2 `fully_shard`"
    hint = "use one implementation for the whole model: `fully_shard` on every block, then on the root"
    failure = (
        "FSDP1 blocks under an FSDP2 root train silently wrong values; FSDP2 blocks under an FSDP1 root fail with "
        "`mixed torch.Tensor and DTensor`"
    )
    docs = """
## What it does
Flags a model (or part of one) that is wrapped with FSDP1 `FullyShardedDataParallel(...)` and also
sharded with FSDP2 `fully_shard(...)`, in either order. Reported at the second of the two calls.

## Why is this bad?
The two implementations do not compose. Observed with torch 2.13 on two ranks: with FSDP1 blocks
inside an FSDP2 root, `fully_shard(root)` takes FSDP1's already flattened and sharded parameters
into its own group and shards them again. Nothing raises; with `use_orig_params=True` the loss is
wrong from the first step (3.565 instead of 3.524), and with FSDP1's flat parameters the blocks
never train (their parameters get no gradient; the loss drifts from the reference from the second
step). With FSDP2 blocks inside an FSDP1 root, FSDP1 fails building its flat parameter:
`RuntimeError: aten.cat.default got mixed torch.Tensor and DTensor`.
"""
    valid = (
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

for i, block in enumerate(model.layers):
    model.layers[i] = FSDP(block, use_orig_params=True)
model = FSDP(model)
""",
    )
    invalid = (
        """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard

for i, block in enumerate(model.layers):
    model.layers[i] = FSDP(block, use_orig_params=True)
fully_shard(model)  # expect: FSDP017
""",
    )
    requires = (("fully_shard",), ("FullyShardedDataParallel",))
    signature = RuntimeSignature(
        evidence="fsdp1_params_resharded",
        exception=("RuntimeError",),
        message=r"mixed torch\.Tensor and DTensor",
        note="FSDP1 inside an FSDP2 root: fully_shard shards FSDP1's flat-parameter shards again; FSDP2 inside "
        "FSDP1: the exception",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for trace in facts.traces:
            for wrap in trace.calls(apis.FSDP1):
                wrapped = [canonical(ref) for ref in refs(wrap.arg(0, "module"))] if wrap.arg(0, "module") else []
                for shard in trace.shards:
                    if shard.exclusive_with(wrap):
                        continue
                    if any(may_overlap(canonical(t), m) for t in shard.targets for m in wrapped):
                        later, earlier = (shard, wrap) if shard.index > wrap.index else (wrap, shard)
                        yield Finding(report_node(later, earlier))
                        break
