"""The probe of FSDP028: an in-place op on a sharded module's output that is a view.

After a sharded module's forward, FSDP2 registers its pre-backward hook (the all-gather before
that module's backward) on each output tensor that requires grad. This probe notes every such
output that is a view (``_base`` set, the case FSDP2 warns about), with the tensor's version
counter then, and whether the module freed its parameters after forward. Before each
``backward()`` it compares the version counters: one that moved means an in-place op rewrote the
view's autograd history after the hook was registered, so the hook will not run. It holds the
noted outputs only until the next ``backward()`` (at most ``LIMIT`` of them) and issues no
collective.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore, state_groups

LIMIT = 256  # outputs kept between two backward passes (inference without no_grad never clears them)


class ViewOutputProbe:
    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        # (view tensor, its version when FSDP2 hooked it, module class names, line of the module call, resharded)
        self.views: list[tuple[torch.Tensor, int, str, Any, bool]] = []
        self.reported: set[tuple[str, Any]] = set()

    def install(self) -> None:
        original = FSDPState._register_pre_backward_hook
        note = self.probes.guarded("view_output", self._note)

        @functools.wraps(original)
        def register_pre_backward_hook(state: Any, output: Any) -> Any:
            result = original(state, output)
            note(state, result, sys._getframe(1))
            return result

        FSDPState._register_pre_backward_hook = register_pre_backward_hook
        original_backward = torch.autograd.backward
        check = self.probes.guarded("view_output", self._check)

        @functools.wraps(original_backward)
        def backward(*args: Any, **kwargs: Any) -> Any:
            check()
            return original_backward(*args, **kwargs)

        torch.autograd.backward = backward  # Tensor.backward calls it too

    def _note(self, state: Any, output: Any, frame: Any) -> None:
        if not torch.is_grad_enabled():
            return  # FSDP2 registers no hook then
        views = [t for t in _tensors(output) if t.requires_grad and t._base is not None]
        if not views:
            return
        module = ", ".join(type(m).__name__ for m in getattr(state, "_modules", ())) or "?"
        line = self.probes.locator.locate_stack(frame)["line"]
        resharded = any(_reshards(group) for group in state_groups(state))
        for view in views:
            self.views.append((view, view._version, module, line, resharded))
        del self.views[:-LIMIT]

    def _check(self) -> None:
        views, self.views = self.views, []
        for view, version, module, line, resharded in views:
            if view._version == version or (module, line) in self.reported:
                continue
            self.reported.add((module, line))
            self.probes.log.write(
                events.INPLACE_VIEW_OUTPUT,
                line=line,
                module=module,
                shape=list(view.shape),
                resharded=resharded,
                writes=view._version - version,
            )


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []


def _reshards(group: Any) -> bool:
    """Does the group free its unsharded parameters after forward (``reshard_after_forward`` not False)?"""
    return getattr(group, "post_forward_mesh_info", None) is not None
