"""What the fixing tests share: sources whose fixes they check, and `apply_edits`, which applies a
diagnostic's edits the way an editor applies a quick fix."""

from __future__ import annotations

import textwrap

from samples import BAD

from fsdp2_lint.analysis.syntax import source_lines
from fsdp2_lint.diagnostics import Diagnostic

# FSDP003 (a safe fix) and FSDP001 (an unsafe one: the optimizer moves after the last shard).
FIXABLE = BAD + "out = model.forward(x)  # logits\n"
FIXABLE_SAFE_FIXED = BAD + "out = model(x)  # logits\n"

HEADER = """\
import torch
from torch.distributed.fsdp import fully_shard

"""


def case(body: str) -> str:
    return HEADER + textwrap.dedent(body)


# One source per kind of change: an expression replaced, a block rewritten, statements inserted with
# an import added, an import line extended, a statement moved.
ROUND_TRIP = {
    "replace": case("fully_shard(model)\nout = model.forward(x)  # café\n"),
    "block": case("fully_shard(model)\nwith model.no_sync():\n    # café\n    model(x).sum().backward()\n"),
    "insert": 'import torch.distributed as dist\nfrom torch.distributed.fsdp import fully_shard\n# café\ndist.init_process_group("nccl")\nfully_shard(model.cuda())\n',
    "import": "from torch.distributed.fsdp import CPUOffload, fully_shard\n# café\nfully_shard(model, offload_policy=CPUOffload(offload_params=True))\n",
    "move": case("opt = torch.optim.SGD(model.parameters())  # café\nfully_shard(model)\nopt.step()\n"),
}


def apply_edits(source: str, diagnostic: Diagnostic) -> str:
    """As an editor applies a quick fix: every edit against the original positions, last first."""
    lines = source_lines(source)
    for edit in sorted(diagnostic.fix.edits, key=lambda e: (e.line, e.column), reverse=True):
        assert edit.column == edit.end_column == 1  # whole-line edits
        lines[edit.line - 1 : edit.end_line - 1] = source_lines(edit.content)
    return "".join(lines)
