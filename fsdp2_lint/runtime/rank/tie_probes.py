"""FSDP018. A tie that ``to_empty()`` broke and nothing restored.

A model built on the meta device with a tie (``self.head.weight = self.emb.weight``) registers one
parameter under two names. ``to_empty()`` on the unsharded model gives each name a tensor of its
own, so the two modules train separate copies (torch 2.13; no error). At the first optimizer
step, names that shared one parameter before ``to_empty()`` and now hold distinct ones were
never tied again."""

from __future__ import annotations

import functools
import sys
from collections import defaultdict
from types import FrameType
from typing import Any, NamedTuple

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.rank.probe_core import ProbeCore

MAX_TIES = 10  # broken ties listed per event


class Ties(NamedTuple):
    """The module ``to_empty()`` was called on, its line, and the names of each parameter it
    registered under more than one name just before the call."""

    module: torch.nn.Module
    cls: str  # its class then (fully_shard changes it)
    to_empty_line: int | None
    groups: list[list[str]]

    def broken(self) -> list[list[str]]:
        """The groups whose names no longer resolve to one parameter."""
        return [names for names in self.groups if len({id(self._current(name)) for name in names}) > 1]

    def _current(self, name: str) -> object:
        """What the module holds under ``name`` now (a script may have put a plain tensor there)."""
        owner, _, attr = name.rpartition(".")
        return getattr(self.module.get_submodule(owner), attr, None)


def tied_names(module: torch.nn.Module) -> list[list[str]]:
    names: dict[int, list[str]] = defaultdict(list)
    for name, param in module.named_parameters(remove_duplicate=False):
        names[id(param)].append(name)
    return [group for group in names.values() if len(group) > 1]


class TieProbe:
    """Records the ties each ``to_empty()`` is given, checks them at the first step."""

    def __init__(self, probes: ProbeCore) -> None:
        self.probes = probes
        self.pending: list[Ties] = []

    def install(self) -> None:
        original = torch.nn.Module.to_empty  # already wrapped by Probes: this wraps around it
        on_call = self.probes.guarded("tie_to_empty", self._on_to_empty)

        @functools.wraps(original)
        def to_empty(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            groups = tied_names(module)
            result = original(module, *args, **kwargs)
            on_call(module, groups, sys._getframe(1))
            return result

        torch.nn.Module.to_empty = to_empty
        register_optimizer_step_pre_hook(self.probes.guarded("tie_step", self._before_step))

    def _on_to_empty(self, module: torch.nn.Module, groups: list[list[str]], frame: FrameType) -> None:
        if groups:
            self.pending.append(
                Ties(module, type(module).__name__, self.probes.locator.locate_stack(frame)["line"], groups)
            )

    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not self.pending:
            return
        where = self.probes.locator.locate_stack(sys._getframe())
        for ties in self.pending:
            broken = ties.broken()
            self.probes.log.write(
                events.TIES_AFTER_TO_EMPTY,
                to_empty_line=ties.to_empty_line,
                module=ties.cls,
                ties=len(ties.groups),
                broken=broken[:MAX_TIES],
                broken_count=len(broken),
                **where,
            )
        self.pending = []
