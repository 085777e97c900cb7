"""Probes that compare values across ranks offline (imports torch): what ``load_state_dict`` put
into a module before ``fully_shard`` against what each rank's shard holds right after it
(FSDP010), and gradient norms the script computes against the model's true global norm (FSDP015).

No probe issues a collective. Each rank records what it can see locally (fingerprints of its
shards, its part of the squared gradient norm); the evidence detectors combine the ranks' records.
"""

from __future__ import annotations

import functools
import math
import sys
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.nn.utils.clip_grad as clip_grad
from torch.distributed.tensor import DTensor
from torch.utils.weak import WeakIdKeyDictionary

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore
from fsdp2_lint.runtime.rank.tensors import chunk_fingerprints, fingerprint, shard_layout

MAX_FINGERPRINTED = 32  # parameters fingerprinted per fully_shard call
NORMS_PER_LINE = 4  # norm calls recorded per line of user code (both ranks record the same ones)
CLIP_FUNCTIONS = ("clip_grad_norm_", "get_total_norm")
# builtins only: TorchScript is told the wrappers are the same ops (a wrapped Python function such as
# torch.norm would make any scripted function that calls it fail to compile)
NORM_FUNCTIONS = ((torch, "sqrt"), (torch.linalg, "norm"), (torch.linalg, "vector_norm"))


def named_plain_parameters(modules: list[torch.nn.Module]) -> list[tuple[str, torch.nn.Module, str, torch.Tensor]]:
    """(qualified name, owning module, attribute name, parameter) for each parameter not yet sharded."""
    found, seen = [], set()
    for index, module in enumerate(modules):
        prefix = f"{index}." if len(modules) > 1 else ""
        for owner_name, owner in module.named_modules():
            for name, param in owner.named_parameters(recurse=False):
                if id(param) in seen or isinstance(param, DTensor):
                    continue
                seen.add(id(param))
                found.append((prefix + ".".join(filter(None, (owner_name, name))), owner, name, param))
    return found


class LoadProbe:
    """FSDP010. ``load_state_dict`` into a module with plain parameters marks them loaded (by
    identity and version counter, so a later in-place change unmarks them). At ``fully_shard``
    every rank fingerprints its local shard of each parameter; a rank whose parameter still held
    loaded values also fingerprints every rank's chunk of them, so the detector can tell, offline,
    whether the other ranks' shards hold what was loaded."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        # by identity: tensors compare elementwise, so a WeakKeyDictionary cannot hold them
        self.loaded: WeakIdKeyDictionary = WeakIdKeyDictionary()  # parameter -> (load line, version after it)
        self.calls = 0
        # (call, name, owner, attribute, local fingerprint) of each shard fingerprinted, until the first forward
        self.fingerprinted: list[tuple[int, str, torch.nn.Module, str, list[int]]] = []

    def install(self) -> None:
        original = torch.nn.Module.load_state_dict
        on_load = self.probes.guarded("load_state_dict", self._on_load)

        @functools.wraps(original)
        def load_state_dict(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            result = original(module, *args, **kwargs)
            on_load(module, sys._getframe(1))
            return result

        torch.nn.Module.load_state_dict = load_state_dict

    def _on_load(self, module: torch.nn.Module, frame: FrameType) -> None:
        params = list(module.parameters())
        if not params or any(isinstance(p, DTensor) for p in params):
            return  # a load into sharded parameters happens after fully_shard: not this probe's concern
        where = self.probes.locator.locate_stack(frame)
        for param in params:
            self.loaded[param] = (where["line"], param._version)
        self.probes.log.write(events.LOAD, module=type(module).__name__, params=len(params), **where)

    def before(
        self, modules: list[torch.nn.Module]
    ) -> list[tuple[str, torch.nn.Module, str, torch.Tensor | None, Any]]:
        """The parameters about to be sharded; the original tensor is kept only where it holds loaded values."""
        entries = []
        for qualified, owner, name, param in named_plain_parameters(modules)[:MAX_FINGERPRINTED]:
            line, version = self.loaded.get(param, (None, None))
            loaded = version is not None and version == param._version and not param.is_meta
            entries.append((qualified, owner, name, param if loaded else None, line if loaded else None))
        return entries

    def after(self, modules: list[torch.nn.Module], entries: list | None) -> dict[str, Any]:
        self.calls += 1
        values = []
        for qualified, owner, name, original, loaded_line in entries or ():
            param = getattr(owner, name, None)
            layout = shard_layout(param) if isinstance(param, DTensor) else None
            if layout is None or param.is_meta:
                continue
            dim, count, index = layout
            value: dict[str, Any] = {"name": qualified, "index": index, "local": fingerprint(param.to_local())}
            self.fingerprinted.append((self.calls, qualified, owner, name, value["local"]))
            if original is not None:
                value["loaded_line"] = loaded_line
                value["chunks"] = chunk_fingerprints(original, dim, count)
            values.append(value)
        return {"call": self.calls, "values": values}

    def changed_since_shard(self) -> list[tuple[int, str]]:
        """At the model's first forward: (call, name) of the shards written since fully_shard (a
        state dict broadcast from rank 0 after sharding fixes what rank 0 alone had loaded)."""
        changed = []
        for call, qualified, owner, name, local in self.fingerprinted:
            param = getattr(owner, name, None)
            if isinstance(param, DTensor) and not param.is_meta and fingerprint(param.to_local()) != local:
                changed.append((call, qualified))
        self.fingerprinted = []
        return changed


def _scalar_value(result: Any) -> float | None:
    """The value of a one-element floating tensor this rank can read without a collective."""
    if not isinstance(result, torch.Tensor) or result.numel() != 1 or not result.is_floating_point():
        return None
    if isinstance(result, DTensor):
        if not all(placement.is_replicate() for placement in result.placements):
            return None  # a partial or sharded value needs the other ranks
        result = result.to_local()
    return float(result.detach().item())


def _replicas(grad: torch.Tensor, world_size: int) -> int:
    """How many ranks hold the same copy of this rank's part of ``grad``."""
    if not isinstance(grad, DTensor):
        return world_size
    mesh = grad.device_mesh
    return math.prod(mesh.size(dim) for dim, placement in enumerate(grad.placements) if placement.is_replicate())


class GradNormProbe:
    """FSDP015. Wraps the gradient-norm functions user code calls (``clip_grad_norm_``,
    ``get_total_norm``, ``torch.linalg.vector_norm``, ``torch.linalg.norm``, ``torch.sqrt``) and
    records, next to each one-element result, this rank's squared norm of its local gradient
    shards and its share of the global squared norm (summed over ranks offline). For the clipping
    functions it also records what they were given: parameters of the sharded model or not."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.recorded: Counter[tuple[str, int | None]] = Counter()

    def install(self) -> None:
        for name in CLIP_FUNCTIONS:
            original = getattr(clip_grad, name, None)
            if original is not None:
                wrapped = self._wrap(f"torch.nn.utils.{name}", original, clips=True)
                for module in (clip_grad, torch.nn.utils):
                    if getattr(module, name, None) is original:
                        setattr(module, name, wrapped)
        scripted_ops = torch.jit._builtins._get_builtin_table()
        for module, name in NORM_FUNCTIONS:
            original = getattr(module, name)
            wrapped = self._wrap(f"{module.__name__}.{name}", original, clips=False)
            setattr(module, name, wrapped)
            if id(original) in scripted_ops:
                torch.jit._builtins._register_builtin(wrapped, scripted_ops[id(original)])

    def _wrap(self, label: str, original: Callable[..., Any], clips: bool) -> Callable[..., Any]:
        before = self.probes.guarded("grad_norm", self._before)
        after = self.probes.guarded("grad_norm", self._after)

        @functools.wraps(original)
        def norm(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling() or not self.probes.sharded:
                return original(*args, **kwargs)
            frame = sys._getframe(1)
            if not self.probes.locator.is_user_file(frame.f_code.co_filename):
                return original(*args, **kwargs)  # torch's own use (clip_grad_norm_ calls vector_norm)
            if clips and args and not isinstance(args[0], (torch.Tensor, list, tuple)):
                args = (list(args[0]), *args[1:])  # a generator: read it once, for both the probe and the call
            given = args[0] if clips and args else None
            reference = before(given) if clips else None  # clipping scales the gradients: measure first
            result = original(*args, **kwargs)
            after(label, result, reference, frame)
            return result

        return norm

    def _grad_parts(self) -> dict[str, Any] | None:
        """This rank's squared norm of its local gradients and its share of the global squared norm."""
        grads = [p.grad for p in self.probes.model_parameters().values() if p.grad is not None]
        if not any(isinstance(grad, DTensor) for grad in grads):
            return None
        world_size = torch.distributed.get_world_size()
        local_sq = global_sq = 0.0
        for grad in grads:
            if isinstance(grad, DTensor) and any(placement.is_partial() for placement in grad.placements):
                return None  # not reduced yet: the global norm is not known locally
            square = (
                float(grad.to_local().detach().double().pow(2).sum())
                if isinstance(grad, DTensor)
                else float(grad.detach().double().pow(2).sum())
            )
            local_sq += square
            global_sq += square / _replicas(grad, world_size)
        return {"local_sq": local_sq, "global_sq": global_sq}

    def _before(self, given: Any) -> dict[str, Any] | None:
        parts = self._grad_parts()
        if parts is None:
            return None
        tensors = [given] if isinstance(given, torch.Tensor) else list(given or ())
        model_ids = {id(p) for p in self.probes.model_parameters().values()}
        return {
            **parts,
            "given": len(tensors),
            "given_model": sum(id(t) in model_ids for t in tensors),
            "given_grads": sum(t.grad is not None for t in tensors),
            "given_replaced": self.probes.replaced.count(tensors),  # parameters before fully_shard
        }

    def _after(self, label: str, result: Any, reference: dict[str, Any] | None, frame: FrameType) -> None:
        where = self.probes.locator.locate_stack(frame)
        key = (label, where["line"])
        if self.recorded[key] >= NORMS_PER_LINE:
            return
        value = _scalar_value(result)
        parts = reference or (self._grad_parts() if value is not None else None)
        if value is None or parts is None:
            return
        self.recorded[key] += 1
        self.probes.log.write(
            events.GRAD_NORM, function=label, occurrence=self.recorded[key], value=value, **parts, **where
        )
