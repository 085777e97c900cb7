"""The probe of FSDP044: a forward that reuses unsharded parameters the optimizer step no longer matches.

At each FSDP parameter group's pre-forward, where the group is still unsharded (so FSDP2 skips the
all-gather and the forward uses the unsharded copy as it is), it compares this rank's slice of
each unsharded parameter with this rank's shard of the sharded parameter, the tensor the optimizer
updates. They differ only when the shard changed after the unsharded copy was gathered: the
forward then uses parameter values the step did not produce. No collective is issued.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore


class StaleUnshardProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.reported: set[int] = set()

    def install(self) -> None:
        original = FSDPParamGroup.pre_forward
        check = self.probes.guarded("stale_unsharded", self._check)

        @functools.wraps(original)
        def pre_forward(group: Any, *args: Any, **kwargs: Any) -> Any:
            check(group, sys._getframe(1))
            return original(group, *args, **kwargs)

        FSDPParamGroup.pre_forward = pre_forward

    def _check(self, group: Any, frame: Any) -> None:
        if not group.is_unsharded or id(group) in self.reported:
            return
        stale = []
        compared = 0
        for fsdp_param in group.fsdp_params:
            differs = _differs(fsdp_param)
            if differs is None:
                continue
            compared += 1
            if differs:
                stale.append(fsdp_param._param_fqn or "?")
        if not stale:
            return
        self.reported.add(id(group))
        line = self.probes.locator.locate_stack(frame)["line"]
        self.probes.log.write(
            events.STALE_UNSHARDED,
            line=line,
            module=type(group.modules[0]).__name__ if group.modules else "?",
            params=compared,
            stale=len(stale),
            names=stale[:5],
        )


def _differs(fsdp_param: Any) -> bool | None:
    """Does this rank's slice of the unsharded parameter differ from its shard (None: not comparable)?"""
    unsharded = getattr(fsdp_param, "_unsharded_param", None)
    if unsharded is None:
        return None
    local = fsdp_param.sharded_param.to_local()
    dim = getattr(getattr(fsdp_param, "fsdp_placement", None), "dim", 0)
    rank = fsdp_param.mesh_info.shard_mesh_rank
    world = fsdp_param.mesh_info.shard_mesh_size
    with torch.no_grad():
        chunks = torch.chunk(unsharded.detach(), world, dim=dim)
        if rank >= len(chunks) or chunks[rank].shape != local.shape or local.numel() == 0:
            return None
        return not torch.equal(chunks[rank], local.detach().to(chunks[rank].dtype))
