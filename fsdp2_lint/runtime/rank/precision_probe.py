"""FSDP035: a ``MixedPrecisionPolicy`` made a no-op by a model already in its ``param_dtype``.

At each ``fully_shard`` call, the sharded parameters of the groups it built whose dtype already
equals the group policy's low-precision ``param_dtype`` (FSDP2 then casts nothing); at each
optimizer's construction, how many of its parameters are such low-precision master weights.
Reads torch internals only; never changes what the wrapped calls do.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore, param_groups

LOW_PRECISION = (torch.bfloat16, torch.float16)


class MasterWeightsProbe:
    """Shard observer (``before``/``after``) and optimizer probe."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        # sharded parameter -> (its dtype name, line of the fully_shard call that kept it)
        self.noop: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def install(self) -> None:
        original = torch.optim.Optimizer.__init__
        on_init = self.probes.guarded("master_weights", self._on_optimizer)

        @functools.wraps(original)
        def __init__(optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            original(optimizer, *args, **kwargs)
            on_init(optimizer, sys._getframe(1))

        torch.optim.Optimizer.__init__ = __init__

    def before(self, modules: list[torch.nn.Module]) -> None:
        return None

    def after(self, modules: list[torch.nn.Module], before: None) -> dict[str, Any]:
        policies: set[str] = set()
        kept = 0
        for group in param_groups(modules[0]):
            dtype = getattr(group.mp_policy, "param_dtype", None)
            if dtype is None:
                continue
            policies.add(str(dtype).removeprefix("torch."))
            for fsdp_param in group.fsdp_params:
                param = fsdp_param.sharded_param
                if dtype in LOW_PRECISION and param.dtype == dtype:
                    self.noop[param] = str(dtype).removeprefix("torch.")
                    kept += 1
        return {"mp_param_dtype": ", ".join(sorted(policies)), "policy_noop_params": kept}

    def _on_optimizer(self, optimizer: torch.optim.Optimizer, frame: Any) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in params})
        noop = [self.noop[p] for p in params if p in self.noop and str(p.dtype).removeprefix("torch.") == self.noop[p]]
        self.probes.log.write(
            events.MASTER_WEIGHTS,
            optimizer=type(optimizer).__name__,
            params=len(params),
            dtypes=dtypes,
            low_precision=sum(p.dtype in LOW_PRECISION for p in params),
            policy_noop=len(noop),
            policy_dtype=", ".join(sorted(set(noop))),
            **self.probes.locator.locate_stack(frame),
        )
