"""The probe of FSDP036: a reentrant activation checkpoint around a module already sharded with
``fully_shard`` (the AC(FSDP) order), run more than once before the backward that recomputes it.

``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)`` (also its default, and
``checkpoint_wrapper(..., checkpoint_impl=CheckpointImpl.REENTRANT)``) runs through
``CheckpointFunction``: its forward runs the function without autograd, its backward recomputes it
and runs a nested backward. The probe wraps its ``apply`` and its backward: each call whose function is an FSDP2 module
(or one of its bound methods) adds one pending forward for that module; when a backward recomputes
a module that has two or more pending forwards, the module's FSDP hooks run in several nested
backwards of one backward pass, and torch 2.13 keeps the gradients of only some of them. It records
that cause once per module. No collective is issued and the wrapped calls are unchanged.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule
from torch.utils import checkpoint as torch_checkpoint

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore


class ReentrantCheckpointProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.pending: dict[int, int] = {}  # id(module) -> checkpointed forwards not yet recomputed
        self.lines: dict[int, Any] = {}  # id(module) -> the line of the first of its pending checkpointed forwards
        self.reported: set[int] = set()

    def install(self) -> None:
        function = getattr(torch_checkpoint, "CheckpointFunction", None)
        if function is None:
            return
        original_apply = function.apply
        original_backward = function.backward
        on_forward = self.probes.guarded("reentrant_checkpoint", self._on_forward)
        on_backward = self.probes.guarded("reentrant_checkpoint", self._on_backward)

        @functools.wraps(original_apply)
        def apply(run_function: Any, *args: Any) -> Any:
            on_forward(run_function, args, sys._getframe(1))
            return original_apply(run_function, *args)

        @functools.wraps(original_backward)
        def backward(ctx: Any, *grads: Any) -> Any:
            on_backward(getattr(ctx, "run_function", None))
            return original_backward(ctx, *grads)

        function.apply = apply  # looked up on the class at each call: `CheckpointFunction.apply(...)`
        function.backward = staticmethod(backward)

    def _on_forward(self, run_function: Any, args: tuple[Any, ...], frame: Any) -> None:
        module = _fsdp_module(run_function)
        if module is None or not torch.is_grad_enabled():
            return  # under `torch.no_grad()` the checkpoint records no backward
        if not any(isinstance(arg, torch.Tensor) and arg.requires_grad for arg in args[1:]):
            return  # no input needs a gradient: this checkpoint's backward never runs
        if not self.pending.get(id(module)):
            self.lines[id(module)] = self.probes.locator.locate_stack(frame)["line"]
        self.pending[id(module)] = self.pending.get(id(module), 0) + 1

    def _on_backward(self, run_function: Any) -> None:
        module = _fsdp_module(run_function)
        if module is None:
            return
        key = id(module)
        pending = self.pending.get(key, 0)
        if pending >= 2 and key not in self.reported:
            self.reported.add(key)
            self.probes.log.write(
                events.REENTRANT_CHECKPOINT,
                line=self.lines.get(key),
                module=_describe(module),
                forwards=pending,
            )
        self.pending[key] = max(pending - 1, 0)


def _fsdp_module(run_function: Any) -> torch.nn.Module | None:
    """The FSDP2 module a checkpointed function runs: the module itself, or the receiver of its bound method."""
    for candidate in (run_function, getattr(run_function, "__self__", None)):
        if isinstance(candidate, FSDPModule) and isinstance(candidate, torch.nn.Module):
            return candidate
    return None


def _describe(module: torch.nn.Module) -> str:
    """``FSDPBlock (layers.0)``: the class, and the module's name in the sharded model where its
    FSDP parameter group knows it (the fully qualified name of its first parameter, less its own)."""
    name = type(module).__name__
    try:
        group = module._get_fsdp_state()._fsdp_param_group
        fqn = group.fsdp_params[0]._param_fqn if group is not None and group.fsdp_params else ""
        own = next((n for n, p in module.named_parameters() if p is group.fsdp_params[0].sharded_param), "")
    except (AttributeError, IndexError):
        return name
    prefix = fqn[: -len(own) - 1] if own and fqn.endswith("." + own) else ""
    return f"{name} ({prefix})" if prefix else name
