"""FSDP040: the device mesh ``fully_shard`` laid each parameter group out on.

At each ``fully_shard`` call, the mesh its group's sharded parameters live on (dimension names,
shape) and their placements per mesh dimension (``Replicate()``, ``Shard(dim=0)``): what FSDP2
did with the mesh it was handed, whatever the dimensions are named. Reads the parameters only;
never changes what the wrapped call does, and issues no collective.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore, param_groups


class MeshProbe:
    """A shard observer (``before``/``after`` around each ``fully_shard``) writing ``shard_mesh``;
    ``Probes.install`` adds it to the rank's shard observers."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes

    def before(self, modules: list[torch.nn.Module]) -> None:
        return None

    def after(self, modules: list[torch.nn.Module], before: None) -> dict[str, Any]:
        layouts: dict[tuple, int] = {}
        for group in param_groups(modules[0]):
            for fsdp_param in group.fsdp_params:
                param = fsdp_param.sharded_param
                mesh = getattr(param, "device_mesh", None)
                if mesh is None:
                    continue
                key = (
                    tuple(mesh.mesh_dim_names) if mesh.mesh_dim_names else None,
                    tuple(mesh.shape),
                    tuple(repr(placement) for placement in param.placements),
                )
                layouts[key] = layouts.get(key, 0) + 1
        where = self.probes.locator.locate_stack(sys._getframe())
        for (names, shape, placements), count in layouts.items():
            self.probes.log.write(
                events.SHARD_MESH,
                module=", ".join(type(m).__name__ for m in modules),
                params=count,
                ndim=len(shape),
                dim_names=list(names) if names else None,
                shape=list(shape),
                placements=list(placements),
                **where,
            )
        return {}
