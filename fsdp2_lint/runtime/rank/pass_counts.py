"""How many forwards of a sharded root, and how many ``backward()`` calls, each rank ran (FSDP012).

Every rank must run the same sequence of FSDP2 forwards and backwards: each forward all-gathers,
each backward reduce-scatters. One event per pass, with the count so far on this rank, lets the
harness compare the ranks' counts when a run hangs. Each sharded group's own forwards are counted
too (``group`` events): a separately sharded submodule that runs on some ranks only (``if pixel_values
is not None: self.vision(...)``) leaves the roots' counts equal and the groups' different. Never
issues a collective.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.distributed.fsdp._fully_shard import _fsdp_common, _fsdp_state
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import state_groups

# How this torch keeps torch.compile out of FSDP's own hooks, so the probe wrapping one is treated
# alike: `_dynamo_disable` always disables (torch 2.13 has it), `disable_if_config_true` only under
# `torch._dynamo.config.skip_fsdp_hooks` (torch 2.11 has only this one).
_like_fsdp_hooks = getattr(_fsdp_common, "_dynamo_disable", None) or _fsdp_state.disable_if_config_true


class PassCountProbe:
    def __init__(self, probes: Any) -> None:
        self.probes = probes
        self.forwards = 0
        self.backwards = 0
        self.groups: dict[str, int] = {}  # forwards of each sharded group (by module name) on this rank

    def install(self) -> None:
        original_root = _fsdp_state.FSDPState._root_pre_forward
        on_forward = self.probes.guarded("passes", self._on_forward)

        @functools.wraps(original_root)
        def _root_pre_forward(state: Any, *args: Any, **kwargs: Any) -> Any:
            ctx = getattr(state, "_state_ctx", None)
            before = getattr(ctx, "iter_forward_root", None)
            result = original_root(state, *args, **kwargs)
            if before is None and getattr(ctx, "iter_forward_root", None) is state:
                on_forward(sys._getframe(1))  # this state began a forward as the root
            return result

        _fsdp_state.FSDPState._root_pre_forward = _root_pre_forward
        original_backward = torch.autograd.backward
        on_backward = self.probes.guarded("passes", self._on_backward)

        @functools.wraps(original_backward)
        def backward(*args: Any, **kwargs: Any) -> Any:
            on_backward(sys._getframe(1))
            return original_backward(*args, **kwargs)

        torch.autograd.backward = backward  # Tensor.backward calls it too
        original_pre_forward = _fsdp_state.FSDPState._pre_forward
        on_group = self.probes.guarded("passes", self._on_group)

        @_like_fsdp_hooks
        @functools.wraps(original_pre_forward)
        def _pre_forward(state: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
            # a group's forward starts once per pass (not again per module of a grouped `fully_shard`,
            # nor in the recomputation of activation checkpointing during the backward)
            starts = getattr(state, "_training_state", None) not in (TrainingState.FORWARD, TrainingState.PRE_BACKWARD)
            if starts and not getattr(state, "_is_root", None):  # a root's forwards are the `pass` events
                on_group(state, module, sys._getframe(1))  # before its all-gather, which may never complete
            return original_pre_forward(state, module, *args, **kwargs)

        # fully_shard registers the bound hook when it runs: the probes are installed before the script
        _fsdp_state.FSDPState._pre_forward = _pre_forward

    def _on_forward(self, frame: Any) -> None:
        self.forwards += 1
        self._write("forward", frame)

    def _on_backward(self, frame: Any) -> None:
        if not self.forwards:
            return  # no sharded model ran yet
        self.backwards += 1
        self._write("backward", frame)

    def _on_group(self, state: Any, module: Any, frame: Any) -> None:
        groups = state_groups(state)
        names = [group._module_fqn for group in groups if getattr(group, "_module_fqn", None)]
        name = "|".join(names) or type(module).__name__  # the root group's name is "" (or not set yet)
        count = self.groups[name] = self.groups.get(name, 0) + 1
        self.probes.log.write(
            events.GROUP_FORWARD,
            module=name or "<root>",
            count=count,
            forwards=self.forwards,
            **self.probes.locator.locate_stack(frame),
        )

    def _write(self, phase: str, frame: Any) -> None:
        self.probes.log.write(
            events.PASS,
            phase=phase,
            forwards=self.forwards,
            backwards=self.backwards,
            **self.probes.locator.locate_stack(frame),
        )
