"""Probes for FSDP1 APIs applied to FSDP2 (``fully_shard``) models (imports torch).

Each records what the run shows after the FSDP1 call, never which API was called: the state dict
a model returns after ``FSDP.set_state_dict_type(FULL_STATE_DICT)`` (FSDP009), the parameters
inside ``FSDP.summon_full_params`` (FSDP016), FSDP1-managed parameters that ``fully_shard`` put
into its own group (FSDP017), and the offload policy ``fully_shard``'s parameter group ended up
with (FSDP023).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

import torch
import torch.distributed.fsdp as fsdp
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
from torch.distributed.tensor import DTensor

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore, param_groups
from fsdp2_lint.runtime.rank.tensors import count_tensors

STATE_DICTS_PER_MODULE = 4  # state_dict() calls recorded per configured module


def contains_fsdp2(module: torch.nn.Module) -> bool:
    return any(isinstance(sub, fsdp.FSDPModule) for sub in module.modules())


def contains_fsdp1(module: torch.nn.Module) -> bool:
    return any(isinstance(sub, FSDP1) for sub in module.modules())


class _ObservedContext:
    """A context manager that runs ``on_enter`` once the wrapped one has entered."""

    def __init__(self, context: Any, on_enter: Callable[[], None]) -> None:
        self.context = context
        self.on_enter = on_enter

    def __enter__(self) -> Any:
        value = self.context.__enter__()
        self.on_enter()
        return value

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> Any:
        return self.context.__exit__(kind, error, tb)


class Fsdp1Probes:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        # module -> (requested state-dict type, line of the set_state_dict_type call, state dicts recorded)
        self.configured: weakref.WeakKeyDictionary[torch.nn.Module, list] = weakref.WeakKeyDictionary()

    def install(self) -> None:
        self._wrap_set_state_dict_type()
        self._wrap_state_dict()
        self._wrap_summon_full_params()

    # FSDP009 ------------------------------------------------------------------------------------

    def _wrap_set_state_dict_type(self) -> None:
        original = FSDP1.set_state_dict_type
        on_set = self.probes.guarded("set_state_dict_type", self._on_set_state_dict_type)

        @functools.wraps(original)
        def set_state_dict_type(module: torch.nn.Module, state_dict_type: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(module, state_dict_type, *args, **kwargs)
            on_set(module, state_dict_type, sys._getframe(1))
            return result

        FSDP1.set_state_dict_type = staticmethod(set_state_dict_type)

    def _on_set_state_dict_type(self, module: torch.nn.Module, state_dict_type: Any, frame: FrameType) -> None:
        """Remember the configuration asked of an FSDP2 model (FSDP1 models honour it)."""
        if isinstance(module, torch.nn.Module) and contains_fsdp2(module) and not contains_fsdp1(module):
            requested = getattr(state_dict_type, "name", str(state_dict_type))
            self.configured[module] = [requested, self.probes.locator.locate_stack(frame)["line"], 0]

    def _wrap_state_dict(self) -> None:
        original = torch.nn.Module.state_dict
        on_state_dict = self.probes.guarded("state_dict", self._on_state_dict)

        @functools.wraps(original)
        def state_dict(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            result = original(module, *args, **kwargs)
            if self.configured and module in self.configured:
                on_state_dict(module, result, sys._getframe(1))
            return result

        torch.nn.Module.state_dict = state_dict

    def _on_state_dict(self, module: torch.nn.Module, result: Any, frame: FrameType) -> None:
        config = self.configured[module]
        requested, config_line, recorded = config
        if recorded >= STATE_DICTS_PER_MODULE:
            return
        config[2] += 1
        tensors, dtensors = count_tensors(result)
        self.probes.log.write(
            events.STATE_DICT,
            module=type(module).__name__,
            requested=requested,
            config_line=config_line,
            tensors=tensors,
            dtensors=dtensors,
            **self.probes.locator.locate_stack(frame),
        )

    # FSDP016 ------------------------------------------------------------------------------------

    def _wrap_summon_full_params(self) -> None:
        original = FSDP1.summon_full_params
        on_enter = self.probes.guarded("summon_full_params", self._on_summon)

        @functools.wraps(original)
        def summon_full_params(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            context = original(module, *args, **kwargs)
            frame = sys._getframe(1)
            return _ObservedContext(context, lambda: on_enter(module, frame))

        FSDP1.summon_full_params = staticmethod(summon_full_params)

    def _on_summon(self, module: torch.nn.Module, frame: FrameType) -> None:
        """Inside the context: how many parameters are still sharded DTensors (this rank holds part)."""
        params = list(module.parameters())
        sharded = [p for p in params if isinstance(p, DTensor) and p.to_local().numel() < p.numel()]
        self.probes.log.write(
            events.SUMMON,
            module=type(module).__name__,
            params=len(params),
            sharded=len(sharded),
            **self.probes.locator.locate_stack(frame),
        )


class Fsdp1ShardObserver:
    """At each ``fully_shard`` call: FSDP1-managed parameters it took into its own group (FSDP017),
    and the offload policy of the groups it built (FSDP023)."""

    def before(self, modules: list[torch.nn.Module]) -> list[tuple[torch.nn.Module, str]]:
        """(owner, name) of the plain parameters inside FSDP1 (FullyShardedDataParallel) modules."""
        managed = []
        for module in modules:
            for wrapper in (sub for sub in module.modules() if isinstance(sub, FSDP1)):
                for owner in wrapper.modules():
                    managed.extend(
                        (owner, name)
                        for name, param in owner.named_parameters(recurse=False)
                        if not isinstance(param, DTensor)
                    )
        return managed

    def after(self, modules: list[torch.nn.Module], managed: list | None) -> dict[str, Any]:
        resharded = sum(isinstance(getattr(owner, name, None), DTensor) for owner, name in dict.fromkeys(managed or ()))
        groups = param_groups(modules[0])
        policies = [group.offload_policy for group in groups]
        return {
            "fsdp1_params": resharded,
            "offload_policy": ", ".join(sorted({type(policy).__name__ for policy in policies})),
            # an object FSDP2 does not know as a policy, asking to offload parameters
            "foreign_offload": any(
                not isinstance(policy, fsdp.OffloadPolicy) and bool(getattr(policy, "offload_params", False))
                for policy in policies
            ),
            "group_params": sum(len(group.fsdp_params) for group in groups),
            "offloaded": sum(bool(param.offload_to_cpu) for group in groups for param in group.fsdp_params),
        }
