"""FSDP033: how often each FSDP2 parameter group reduce-scatters its gradients between an optimizer
step and the step or ``zero_grad()`` before it, and how many backward passes ran in between
(imports torch).

FSDP2 reduces a group's gradients in ``FSDPParamGroup.post_backward`` by calling ``foreach_reduce``
(on torch 2.13, CPU/gloo included) unless ``set_requires_gradient_sync(False)`` switched it off:
wrapping that name counts the reductions without changing them."""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
import torch.distributed.fsdp._fully_shard._fsdp_param_group as param_group
from torch.optim.optimizer import register_optimizer_step_pre_hook

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore

STEPS_RECORDED = 4  # optimizer steps recorded per rank


class ReduceScatterProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.per_group: dict[int, int] = {}  # id of an FSDPParamGroup -> reduce-scatters since the last step
        self.backwards = 0
        self.steps = 0

    def install(self) -> None:
        original_reduce = param_group.foreach_reduce
        on_reduce = self.probes.guarded("reduce_scatter", self._on_reduce)

        @functools.wraps(original_reduce)
        def foreach_reduce(*args: Any, **kwargs: Any) -> Any:
            on_reduce(sys._getframe(1).f_locals.get("self"))
            return original_reduce(*args, **kwargs)

        param_group.foreach_reduce = foreach_reduce
        original_backward = torch.autograd.backward
        on_backward = self.probes.guarded("reduce_scatter", self._on_backward)

        @functools.wraps(original_backward)
        def backward(*args: Any, **kwargs: Any) -> Any:
            on_backward()
            return original_backward(*args, **kwargs)

        torch.autograd.backward = backward  # Tensor.backward calls it too
        register_optimizer_step_pre_hook(self.probes.guarded("reduce_scatter", self._on_step))
        # zero_grad() drops what the backward passes before it accumulated: the window starts again
        on_zero = self.probes.guarded("reduce_scatter", self._reset)
        for owner in (torch.optim.Optimizer, torch.nn.Module):
            original_zero = owner.zero_grad

            def zero_grad(*args: Any, _original: Any = original_zero, **kwargs: Any) -> Any:
                on_zero()
                return _original(*args, **kwargs)

            owner.zero_grad = functools.wraps(original_zero)(zero_grad)

    def _on_reduce(self, group: Any) -> None:
        self.per_group[id(group)] = self.per_group.get(id(group), 0) + 1

    def _on_backward(self) -> None:
        # A backward run from inside another (a reentrant checkpoint's recompute) is no micro-batch.
        if torch._C._current_graph_task_id() == -1:
            self.backwards += 1

    def _on_step(self, optimizer: Any, *unused: Any) -> None:
        if self.per_group and self.steps < STEPS_RECORDED:
            self.steps += 1
            self.probes.log.write(
                events.REDUCE_SCATTERS,
                line=self.probes.locator.locate_stack(sys._getframe(1))["line"],
                backwards=self.backwards,
                groups=len(self.per_group),
                reduce_scatters=sum(self.per_group.values()),
                most_per_group=max(self.per_group.values()),
            )
        self._reset()

    def _reset(self) -> None:
        self.per_group = {}
        self.backwards = 0
