"""Tensor helpers shared by the probes (imports torch). All are local to one rank: no collectives."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.distributed.tensor import DTensor

MAX_SAVE_NODES = 100_000  # objects visited when looking for DTensors in a saved object
FINGERPRINT_SAMPLE = 1 << 16  # leading elements of a tensor (or chunk) that a fingerprint covers
EMPTY_FINGERPRINT = [0, 0, 0]


def local_tensor(param: torch.Tensor) -> torch.Tensor:
    """The part of a parameter this rank holds: the local shard of a DTensor, else the tensor."""
    return param.to_local() if isinstance(param, DTensor) else param


def same_bits(current: torch.Tensor, before: torch.Tensor) -> bool:
    """Bitwise equality: uninitialised memory may hold NaN, which torch.equal never finds equal."""
    return current.shape == before.shape and torch.equal(
        current.detach().reshape(-1).view(torch.uint8), before.reshape(-1).view(torch.uint8)
    )


def count_tensors(obj: object) -> tuple[int, int]:
    """(tensors, DTensors) reachable through dicts, lists, tuples and sets of ``obj``."""
    tensors = dtensors = visited = 0
    pending = [obj]
    while pending and visited < MAX_SAVE_NODES:
        item = pending.pop()
        visited += 1
        if isinstance(item, torch.Tensor):
            tensors += 1
            dtensors += isinstance(item, DTensor)
        elif isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
    return tensors, dtensors


def fingerprint(tensor: torch.Tensor) -> list[int]:
    """[elements, sum, position-weighted sum] of the bits of the tensor's leading elements: exact
    integer arithmetic, so equal values give equal fingerprints on any device and in any layout."""
    flat = tensor.detach().reshape(-1)[:FINGERPRINT_SAMPLE].contiguous()
    if flat.numel() == 0:
        return list(EMPTY_FINGERPRINT)
    words = (flat.view(torch.int16) if flat.element_size() % 2 == 0 else flat.view(torch.uint8)).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 65521 + 1
    return [flat.numel(), int(words.sum()), int((words * weights).sum())]


def shard_layout(param: DTensor) -> tuple[int, int, int] | None:
    """(tensor dim, number of shards, this rank's shard index) of a tensor sharded on one mesh dim."""
    shards = [(mesh_dim, placement.dim) for mesh_dim, placement in enumerate(param.placements) if placement.is_shard()]
    if len(shards) != 1:
        return None
    mesh_dim, dim = shards[0]
    return dim, param.device_mesh.size(mesh_dim), param.device_mesh.get_local_rank(mesh_dim)


def chunk_fingerprints(full: torch.Tensor, dim: int, count: int) -> list[list[int]]:
    """Fingerprints of the ``count`` chunks FSDP2 cuts ``full`` into (trailing chunks may be empty)."""
    chunks = list(torch.chunk(full.detach(), count, dim=dim))
    return [fingerprint(chunk) for chunk in chunks] + [list(EMPTY_FINGERPRINT)] * (count - len(chunks))
