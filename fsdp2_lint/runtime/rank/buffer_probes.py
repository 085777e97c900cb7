"""FSDP039. Non-persistent buffers left as ``to_empty()`` allocated them.

``to_empty()`` gives every buffer uninitialised memory, and a checkpoint load cannot restore a
non-persistent buffer (it is not in the state dict). At the first optimizer step, a
non-persistent buffer that is still the very tensor ``to_empty()`` put there, holding the same
bits, was never recomputed."""

from __future__ import annotations

import functools
import sys
from types import FrameType
from typing import Any, NamedTuple

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore
from fsdp2_lint.runtime.rank.tensors import same_bits

MAX_NAMES = 20  # buffer names listed per event


class EmptyBuffer(NamedTuple):
    """A non-persistent buffer right after ``to_empty()``: its module, name, tensor and bits."""

    owner: torch.nn.Module
    name: str
    buffer: torch.Tensor
    before: torch.Tensor

    def untouched(self) -> bool:
        current = self.owner._buffers.get(self.name)
        with torch.no_grad():
            return current is self.buffer and same_bits(current, self.before)


class BufferProbe:
    """Records the non-persistent buffers each ``to_empty()`` leaves, checks them at the first step."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.pending: list[tuple[int | None, list[EmptyBuffer]]] = []

    def install(self) -> None:
        original = torch.nn.Module.to_empty  # already wrapped by Probes: this wraps around it
        on_call = self.probes.guarded("buffer_to_empty", self._on_to_empty)

        @functools.wraps(original)
        def to_empty(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            result = original(module, *args, **kwargs)
            on_call(module, sys._getframe(1))
            return result

        torch.nn.Module.to_empty = to_empty
        register_optimizer_step_pre_hook(self.probes.guarded("buffer_step", self._before_step))

    def _on_to_empty(self, module: torch.nn.Module, frame: FrameType) -> None:
        with torch.no_grad():
            found = [
                EmptyBuffer(owner, name, buffer, buffer.detach().clone())
                for _, owner in module.named_modules()
                for name, buffer in owner._buffers.items()
                if buffer is not None and name in owner._non_persistent_buffers_set and buffer.numel() > 0
            ]
        if found:
            self.pending.append((self.probes.locator.locate_stack(frame)["line"], found))

    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not self.pending:
            return
        where = self.probes.locator.locate_stack(sys._getframe())
        for to_empty_line, found in self.pending:
            untouched = [f"{type(e.owner).__name__}.{e.name}" for e in found if e.untouched()]
            self.probes.log.write(
                events.BUFFERS_AFTER_TO_EMPTY,
                to_empty_line=to_empty_line,
                compared=len(found),
                untouched=sorted(set(untouched))[:MAX_NAMES],
                untouched_count=len(untouched),
                **where,
            )
        self.pending = []
