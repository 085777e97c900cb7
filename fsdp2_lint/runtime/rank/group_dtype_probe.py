"""The probe of FSDP026: a parameter group whose trainable parameters do not share one dtype.

FSDP2 reads each group's original parameter dtypes lazily, at the group's first forward
(``FSDPParamGroup._init_mp_dtypes``), and requires one dtype among the parameters that require
gradients (since about torch 2.8 frozen parameters are exempt). Just before that check runs, the
probe groups the group's trainable parameters by dtype and records the group when there are two
or more: the cause, whatever the check then does with it. It reads dtypes and names only; no
collective is issued and the wrapped call runs unchanged.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore

MAX_NAMES = 5  # parameter names listed per dtype


class GroupDtypeProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.reported: set[int] = set()

    def install(self) -> None:
        original = getattr(FSDPParamGroup, "_init_mp_dtypes", None)
        if original is None:  # a torch without the lazy dtype check: nothing to observe
            return
        check = self.probes.guarded("group_dtypes", self._check)

        @functools.wraps(original)
        def _init_mp_dtypes(group: Any, *args: Any, **kwargs: Any) -> Any:
            check(group, sys._getframe(1))
            return original(group, *args, **kwargs)

        FSDPParamGroup._init_mp_dtypes = _init_mp_dtypes

    def _check(self, group: Any, frame: Any) -> None:
        if id(group) in self.reported:
            return
        trainable: dict[str, list[str]] = {}
        frozen: set[str] = set()
        for fsdp_param in group.fsdp_params:
            param = fsdp_param.sharded_param
            dtype = str(param.dtype).removeprefix("torch.")
            if param.requires_grad:
                trainable.setdefault(dtype, []).append(fsdp_param._param_fqn or "?")
            else:
                frozen.add(dtype)
        if len(trainable) < 2:
            return
        self.reported.add(id(group))
        self.probes.log.write(
            events.GROUP_DTYPES,
            line=self.probes.locator.locate_stack(frame)["line"],
            module=type(group.modules[0]).__name__ if group.modules else "?",
            dtypes={dtype: len(names) for dtype, names in sorted(trainable.items())},
            names={dtype: names[:MAX_NAMES] for dtype, names in sorted(trainable.items())},
            frozen_dtypes=sorted(frozen),
        )
