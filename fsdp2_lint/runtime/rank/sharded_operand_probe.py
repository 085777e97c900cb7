"""The probe of FSDP019: a parameter FSDP2 holds sharded used as an operand outside its group's forward.

DTensor refuses an operator that mixes plain tensors with DTensors (`got mixed torch.Tensor and
DTensor`, raised by torch 2.13's C++ dispatch, where no Python wrapper sees the operands). When a
script ends with that error, this probe reads the innermost frames of its traceback, where the
operator was called, and looks there for the local shard of a ``fully_shard`` group's parameter: a
DTensor the frame holds (``weight`` in ``F.embedding``, a view of it in a user's loss) or a direct
parameter of a module it holds (``self`` in ``Linear.forward``). It records each such parameter,
its module, and its group's state then (still sharded, not in its forward): nothing had
all-gathered it for this use. It only reads; no collective is issued.
"""

from __future__ import annotations

import os
import re
from types import TracebackType
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore, state_groups

MIXED = re.compile(r"^(\S+):? got mixed torch\.Tensor and DTensor")
FRAMES = 3  # innermost frames of the traceback searched for the operands


class ShardedOperandProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes

    def install(self) -> None:
        self.probes.exception_observers.append(self.probes.guarded("sharded_operand", self._on_exception))

    def _on_exception(self, error: BaseException) -> None:
        match = MIXED.match(str(error)) if isinstance(error, RuntimeError) else None
        tb = error.__traceback__
        if match is None or _updates_state(match.group(1), tb) or _forward_called_directly(tb):
            return
        shards = self._shards()
        found: dict[str, Any] = {}
        for frame in _innermost(error.__traceback__, FRAMES):
            for value in _operands(frame.f_locals):
                owner = shards.get(_storage(value))
                if owner is not None:
                    found.setdefault(owner[0], owner[1])
            if found:
                break
        if not found:
            return
        groups = list(dict.fromkeys(found.values()))
        names = sorted(found)
        self.probes.log.write(
            events.SHARDED_OPERAND,
            line=self.probes.locator.locate_traceback(error.__traceback__)["line"],
            op=match.group(1),
            names=names[:5],
            params=len(names),
            module=", ".join(dict.fromkeys(type(g.modules[0]).__name__ if g.modules else "?" for g in groups)),
            sharded=sum(1 for g in groups if g.is_sharded),
            in_forward=sum(1 for g in groups if g._training_state.name == "FORWARD"),
        )

    def _shards(self) -> dict[int, tuple[str, Any]]:
        """The storage of each live FSDP parameter's local shard -> (qualified name, its group)."""
        shards: dict[int, tuple[str, Any]] = {}
        # before the first forward FSDP has not named its parameters yet
        named = {id(param): name for name, param in self.probes.model_parameters().items()}
        for module in (ref() for ref in self.probes.sharded):
            state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
            for group in state_groups(state):
                for fsdp_param in group.fsdp_params:
                    key = _storage(fsdp_param.sharded_param)
                    if key:
                        name = fsdp_param._param_fqn or named.get(id(fsdp_param.sharded_param), "?")
                        shards[key] = (name, group)
        return shards


def _updates_state(op: str, tb: TracebackType | None) -> bool:
    """An in-place op (``aten.lerp_``, ``aten.add_``) or one inside ``torch.optim``: a state update
    (an optimizer step over plain-tensor state, an EMA copy: FSDP021, FSDP020), not a computation
    with the parameters outside a forward."""
    if op.split(".")[1:2] and op.split(".")[1].endswith("_"):
        return True
    frames = _innermost(tb, 1_000)
    return any(f"{os.sep}torch{os.sep}optim{os.sep}" in frame.f_code.co_filename for frame in frames)


def _forward_called_directly(tb: TracebackType | None) -> bool:
    """Does the traceback go through ``X.forward(...)`` of an FSDP module called by name rather than
    through ``X(...)``, which runs FSDP's hooks? That is FSDP003's misuse, shown by its exception."""
    frames = _innermost(tb, 1_000)[::-1]  # outermost first
    return any(
        frame.f_code.co_name == "forward"
        and isinstance(frame.f_locals.get("self"), FSDPModule)
        and caller.f_code.co_name != "_call_impl"
        for caller, frame in zip(frames, frames[1:], strict=False)
    )


def _innermost(tb: TracebackType | None, count: int) -> list[Any]:
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[::-1][:count]


def _operands(names: dict[str, Any]) -> list[torch.Tensor]:
    """The DTensors a frame holds: in its variables, one level inside a list or tuple, and, in a
    module's method, the module's own direct parameters (``self.weight`` in ``Linear.forward``)."""
    found = []
    for value in names.values():
        items = value if isinstance(value, (list, tuple)) else (value,)
        found.extend(item for item in items if isinstance(item, DTensor))
    module = names.get("self")
    if isinstance(module, torch.nn.Module):
        found.extend(p for p in module._parameters.values() if isinstance(p, DTensor))
    return found


def _storage(tensor: Any) -> int:
    """Where a DTensor's local shard lives (a view of a parameter shares its storage); 0: unknown."""
    try:
        return tensor._local_tensor.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError, NotImplementedError):
        return 0
