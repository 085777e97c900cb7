"""Probes installed into a rank process before the user's script runs (imports torch).

Each probe wraps one torch entry point, records what it saw as an event attributed to the line of
the user's script that led to it, and never changes what the wrapped call does. A probe that fails
records a ``probe_error`` event instead of breaking the script. Probes never issue collectives:
ranks may have diverged, and an extra collective would change (or hang) the run being observed.

This module holds ``Probes``, which installs every probe of a rank, with the probes of
``fully_shard``, ``to_empty``, optimizers, ``torch.save``, collectives and gradient sync, and the
tracer of the script's lines. What every probe builds on is in :mod:`.probe_core`; the FSDP1 probes
and the value probes are in :mod:`.fsdp1_probes` and :mod:`.value_probes`. The probes that stand
alone (one rule's evidence each, most reading torch internals) are imported and installed one by
one: one that cannot be installed on the running torch costs its own evidence only.
"""

from __future__ import annotations

import faulthandler
import functools
import importlib
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.distributed.fsdp as fsdp
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
from torch.distributed.tensor import DTensor
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.weak import WeakIdKeyDictionary

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.events import EventLog
from fsdp2_lint.runtime.evidence.scope import Line, SourceScope
from fsdp2_lint.runtime.evidence.signals import STACK_DUMP_SIGNAL
from fsdp2_lint.runtime.rank.fsdp1_probes import Fsdp1ShardObserver
from fsdp2_lint.runtime.rank.mesh_probe import MeshProbe
from fsdp2_lint.runtime.rank.precision_probe import MasterWeightsProbe
from fsdp2_lint.runtime.rank.probe_core import ProbeCore
from fsdp2_lint.runtime.rank.tensors import count_tensors, local_tensor, same_bits
from fsdp2_lint.runtime.rank.value_probes import LoadProbe

# Steps of each optimizer whose effect on the model's parameters is measured. Each probed step
# clones the local shards once, so later steps are left alone.
PROBED_STEPS = 2
MAX_NAMES = 20  # parameter names listed per step event

COLLECTIVES = (
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_single",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "monitored_barrier",
    "recv",
    "recv_object_list",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "send_object_list",
)


def group_layout(module: torch.nn.Module) -> tuple[int, int]:
    """For a sharded module: (groups nested in it: sharded submodules, FSDP1 units included, which
    shard their blocks by the wrong API, fsdp1_params_resharded's failure; modules that own
    parameters of its own group)."""
    nested = owners = 0
    pending = [module]
    while pending:
        current = pending.pop()
        if current is not module and isinstance(current, (fsdp.FSDPModule, FSDP1)):
            nested += 1
            continue
        owners += any(True for _ in current.parameters(recurse=False))
        pending.extend(current.children())
    return nested, owners


def own_group_parameters(module: torch.nn.Module) -> Iterator[torch.nn.Parameter]:
    """Parameters of a sharded module's own group: not those of sharded submodules."""
    pending = [module]
    while pending:
        current = pending.pop()
        if current is module or not isinstance(current, fsdp.FSDPModule):
            yield from current.parameters(recurse=False)
            pending.extend(current.children())


def save_target(f: object) -> str:
    if isinstance(f, (str, os.PathLike)):
        return os.path.abspath(os.fspath(f))
    return f"<{type(f).__name__}>"


class ParamSnapshot(NamedTuple):
    """A model parameter just before an optimizer step."""

    param: torch.nn.Parameter
    before: torch.Tensor  # its local values
    no_grad: bool  # trainable, and no gradient
    sync_off: bool  # no gradient, and its gradient sync was off when the last backward started
    sync_off_line: int | None  # the line that switched it off


class EmptyParam(NamedTuple):
    """A parameter right after ``to_empty()``: the module attribute that holds it, and its memory."""

    owner: torch.nn.Module
    name: str
    param: torch.Tensor
    before: torch.Tensor  # its local values right after to_empty

    def untouched(self) -> bool:
        """Still the module's parameter (a state dict loaded with assign=True puts other tensors in
        its place), holding the same bits."""
        return getattr(self.owner, self.name, None) is self.param and self.same_memory()

    def same_memory(self) -> bool:
        with torch.no_grad():
            return same_bits(local_tensor(self.param), self.before)


class GradientSyncProbe:
    """FSDP014. The parameters whose gradient sync ``set_requires_gradient_sync(False)`` had switched
    off when the last backward started: that backward leaves their gradients unreduced, so their
    ``grad`` stays None. (A parameter the forward never used has no gradient either, on purpose.)"""

    def __init__(self, probes: Probes) -> None:
        self.probes = probes
        self.off: WeakIdKeyDictionary = WeakIdKeyDictionary()  # parameter -> line that switched its sync off
        self.off_at_backward: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def install(self) -> None:
        original_sync = fsdp.FSDPModule.set_requires_gradient_sync
        on_sync = self.probes.guarded("gradient_sync", self._on_sync)

        @functools.wraps(original_sync)
        def set_requires_gradient_sync(module: Any, requires_gradient_sync: bool, *args: Any, **kwargs: Any) -> Any:
            result = original_sync(module, requires_gradient_sync, *args, **kwargs)
            on_sync(module, requires_gradient_sync, kwargs.get("recurse", True), sys._getframe(1))
            return result

        fsdp.FSDPModule.set_requires_gradient_sync = set_requires_gradient_sync
        original_backward = torch.autograd.backward
        on_backward = self.probes.guarded("gradient_sync", self._on_backward)

        @functools.wraps(original_backward)
        def backward(*args: Any, **kwargs: Any) -> Any:
            on_backward()
            return original_backward(*args, **kwargs)

        torch.autograd.backward = backward  # Tensor.backward calls it too

    def _on_sync(self, module: torch.nn.Module, enabled: bool, recurse: bool, frame: FrameType) -> None:
        params = module.parameters() if recurse else own_group_parameters(module)
        line = self.probes.locator.locate_stack(frame)["line"]
        for param in params:
            if enabled:
                self.off.pop(param, None)
            else:
                self.off[param] = line

    def _on_backward(self) -> None:
        self.off_at_backward = self.off.copy()


class Probes(ProbeCore):
    """All probes of one rank, writing to one event log."""

    def __init__(self, log: EventLog, scope: SourceScope, run_dir: Path, rank: int) -> None:
        super().__init__(log, scope)
        self.stack_file = open(events.stack_path(run_dir, rank), "w", encoding="utf-8")
        # where each optimizer was built: the script's lines on the stack, innermost first
        self.optimizer_lines: weakref.WeakKeyDictionary[torch.optim.Optimizer, list[int]] = weakref.WeakKeyDictionary()
        # plain tensors each optimizer was given that were the sharded model's parameters then (FSDP008)
        self.optimizer_unsharded: weakref.WeakKeyDictionary[torch.optim.Optimizer, int] = weakref.WeakKeyDictionary()
        self.probed_steps: weakref.WeakKeyDictionary[torch.optim.Optimizer, int] = weakref.WeakKeyDictionary()
        self.snapshots: weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[str, ParamSnapshot]] = (
            weakref.WeakKeyDictionary()
        )
        self.last_collective: tuple | None = None
        # (line of the to_empty call, {qualified name: what to_empty left}), until the first
        # optimizer step compares them
        self.materialized: list[tuple[int | None, dict[str, EmptyParam]]] = []
        self.loads = LoadProbe(self)
        self.gradient_sync = GradientSyncProbe(self)
        # each sees the modules before a fully_shard call and adds fields to its event after it
        self.master_weights = MasterWeightsProbe(self)
        self.shard_observers = (self.loads, Fsdp1ShardObserver(), self.replaced, self.master_weights)

    def install(self) -> None:
        faulthandler.register(STACK_DUMP_SIGNAL, file=self.stack_file, all_threads=True)
        self._wrap_fully_shard()
        self.loads.install()
        self._install_alone("grad_norm", "value_probes.GradNormProbe")
        self._install_alone("fsdp1", "fsdp1_probes.Fsdp1Probes")
        self.gradient_sync.install()
        self.master_weights.install()
        self._install_alone("passes", "pass_counts.PassCountProbe")
        self._install_alone("reduce_scatter", "reduce_scatter_probe.ReduceScatterProbe")
        self._wrap_to_empty()
        self._install_alone("buffers", "buffer_probes.BufferProbe")
        self._install_alone("ties", "tie_probes.TieProbe")
        self._wrap_optimizer_init()
        register_optimizer_step_pre_hook(self.guarded("step", self._before_step))
        register_optimizer_step_post_hook(self.guarded("step", self._after_step))
        self._wrap_save()
        self._wrap_collectives()
        self._install_alone("stale_unshard", "stale_unshard_probe.StaleUnshardProbe")
        self._install_alone("group_dtype", "group_dtype_probe.GroupDtypeProbe")
        self._install_alone("view_output", "view_output_probe.ViewOutputProbe")
        self.shard_observers = (*self.shard_observers, MeshProbe(self))  # FSDP040: the mesh each group got
        self._install_alone("reentrant_checkpoint", "reentrant_checkpoint_probe.ReentrantCheckpointProbe")
        self._install_alone("sharded_operand", "sharded_operand_probe.ShardedOperandProbe")

    def _install_alone(self, probe: str, where: str) -> None:
        """Import and install the probe class ``where`` (``module.Class`` in this package) on its
        own: one that cannot be installed on this torch (a private name it reads is missing, as
        torch 2.11 lacked one a probe imported) costs its own evidence only, recorded as a
        ``probe_error``, and every other probe still runs."""
        module, name = where.rsplit(".", 1)
        try:
            getattr(importlib.import_module(f"{__package__}.{module}"), name)(self).install()
        except Exception as error:
            message = f"not installed on torch {torch.__version__}: {type(error).__name__}: {error}"
            self.log.write(events.PROBE_ERROR, probe=probe, message=message)

    # fully_shard --------------------------------------------------------------------------------

    def _wrap_fully_shard(self) -> None:
        original = fsdp.fully_shard
        before = self.guarded("fully_shard", self._before_fully_shard)
        on_call = self.guarded("fully_shard", self._on_fully_shard)

        @functools.wraps(original)
        def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
            seen = before(module)
            result = original(module, *args, **kwargs)
            on_call(module, sys._getframe(1), seen)
            return result

        # the public name and its aliases (torch.distributed._composable.fsdp, ...) bound at import
        for module in list(sys.modules.values()):
            name = getattr(module, "__name__", "")
            if name.startswith("torch.distributed") and vars(module).get("fully_shard") is original:
                module.fully_shard = fully_shard

    def _before_fully_shard(self, module: Any) -> list[Any]:
        """What each shard observer needs from the modules before ``fully_shard`` replaces their parameters."""
        modules = _as_modules(module)
        return [self.guarded("fully_shard", observer.before)(modules) for observer in self.shard_observers]

    def _on_fully_shard(self, module: Any, frame: FrameType, seen: list[Any] | None) -> None:
        modules = _as_modules(module)
        self.sharded.extend(weakref.ref(m) for m in modules)
        observed: dict[str, Any] = {}
        for observer, before in zip(self.shard_observers, seen or [None] * len(self.shard_observers), strict=True):
            observed.update(self.guarded("fully_shard", observer.after)(modules, before) or {})
        where = self.locator.locate_stack(frame)
        self._follow_materialized()
        self.log.write(
            events.FULLY_SHARD,
            module=", ".join(type(m).__name__ for m in modules),
            params=sum(1 for m in modules for _ in m.parameters()),
            **observed,
            **where,
        )
        for m in modules:
            self._watch_first_forward(m, where["line"])

    def _watch_first_forward(self, module: torch.nn.Module, shard_line: int | None) -> None:
        """The group layout that counts is the one a model runs with: blocks are sharded before
        their root, and a top-down script fails before its first forward."""
        on_forward = self.guarded("fully_shard", self._on_first_forward)

        def pre_forward(forwarded: torch.nn.Module, args: Any) -> None:
            handle.remove()
            on_forward(forwarded, shard_line)

        handle = module.register_forward_pre_hook(pre_forward, prepend=True)  # before FSDP's unshards it

    def _on_first_forward(self, module: torch.nn.Module, shard_line: int | None) -> None:
        live = [m for m in (ref() for ref in self.sharded) if m is not None]
        if any(module is not outer and any(sub is module for sub in outer.modules()) for outer in live):
            return  # a group inside a sharded model: its root's layout says how the model is grouped
        nested, owners = group_layout(module)
        self.log.write(
            events.FIRST_FORWARD,
            module=type(module).__name__,
            shard_line=shard_line,
            params=sum(1 for _ in module.parameters()),
            nested=nested,
            owners=owners,
            changed_since_shard=self.loads.changed_since_shard(),
            **self.locator.locate_stack(sys._getframe()),
        )

    # to_empty -----------------------------------------------------------------------------------

    def _wrap_to_empty(self) -> None:
        original = torch.nn.Module.to_empty
        on_call = self.guarded("to_empty", self._on_to_empty)

        @functools.wraps(original)
        def to_empty(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            result = original(module, *args, **kwargs)
            on_call(module, sys._getframe(1))
            return result

        torch.nn.Module.to_empty = to_empty

    def _on_to_empty(self, module: torch.nn.Module, frame: FrameType) -> None:
        """Keep the uninitialised values: the first optimizer step tells whether anything wrote them."""
        with torch.no_grad():
            values = {
                ".".join(filter(None, (owner_name, name))): EmptyParam(owner, name, p, local_tensor(p).detach().clone())
                for owner_name, owner in module.named_modules()
                for name, p in owner.named_parameters(recurse=False)
            }
        where = self.locator.locate_stack(frame)
        self.materialized.append((where["line"], values))
        self.log.write(events.TO_EMPTY, module=type(module).__name__, params=len(values), **where)

    def _follow_materialized(self) -> None:
        """fully_shard after to_empty: the DTensor that replaced a parameter still uninitialised holds
        a copy of its memory, which is what an initialisation after sharding overwrites."""
        for _, values in self.materialized:
            for name, empty in values.items():
                current = getattr(empty.owner, empty.name, None)
                if isinstance(current, DTensor) and empty.param in self.replaced.tensors and empty.same_memory():
                    with torch.no_grad():
                        values[name] = empty._replace(param=current, before=current.to_local().detach().clone())

    def _check_materialized(self, frame: FrameType) -> None:
        """At the first optimizer step: which parameters still hold exactly what to_empty() left."""
        where = self.locator.locate_stack(frame)
        for to_empty_line, values in self.materialized:
            with torch.no_grad():
                compared = {name: empty for name, empty in values.items() if empty.before.numel() > 0}
                untouched = [name for name, empty in compared.items() if empty.untouched()]
            self.log.write(
                events.MATERIALIZED,
                to_empty_line=to_empty_line,
                compared=len(compared),
                untouched=untouched[:MAX_NAMES],
                untouched_count=len(untouched),
                **where,
            )
        self.materialized = []

    # optimizers ---------------------------------------------------------------------------------

    def _wrap_optimizer_init(self) -> None:
        original = torch.optim.Optimizer.__init__
        on_init = self.guarded("optimizer", self._on_optimizer)

        @functools.wraps(original)
        def __init__(optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            original(optimizer, *args, **kwargs)
            on_init(optimizer, sys._getframe(1))

        torch.optim.Optimizer.__init__ = __init__

    def _on_optimizer(self, optimizer: torch.optim.Optimizer, frame: FrameType) -> None:
        where = self.locator.locate_stack(frame)
        self.optimizer_lines[optimizer] = self.locator.script_lines(frame)
        params = _optimizer_params(optimizer)
        model_ids = {id(p) for p in self.model_parameters().values()}
        unsharded = sum(not isinstance(p, DTensor) and id(p) in model_ids for p in params)
        self.optimizer_unsharded[optimizer] = unsharded
        self.log.write(
            events.OPTIMIZER,
            optimizer=type(optimizer).__name__,
            optimizer_id=id(optimizer),
            params=len(params),
            dtensor_params=sum(isinstance(p, DTensor) for p in params),
            replaced_params=self.replaced.count(params),
            unsharded_params=unsharded,  # a sharded module's own, unsharded after its forward
            **where,
        )

    def _before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self.materialized:
            self._check_materialized(sys._getframe())
        if self.probed_steps.get(optimizer, 0) >= PROBED_STEPS:
            return
        with torch.no_grad():
            self.snapshots[optimizer] = {
                name: ParamSnapshot(
                    param,
                    local_tensor(param).detach().clone(),
                    no_grad := param.requires_grad and param.grad is None,
                    no_grad and param in self.gradient_sync.off_at_backward,
                    self.gradient_sync.off_at_backward.get(param),
                )
                for name, param in self.model_parameters().items()
            }

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        """One ``step`` event: what the optimizer holds, and what the step did to the model."""
        snapshot = self.snapshots.pop(optimizer, None)
        if snapshot is None:
            return
        step = self.probed_steps.get(optimizer, 0) + 1
        self.probed_steps[optimizer] = step
        optimizer_params = _optimizer_params(optimizer)
        held = {id(p) for p in optimizer_params}
        compared = {name: entry for name, entry in snapshot.items() if entry.before.numel() > 0}
        with torch.no_grad():
            unchanged = [name for name, entry in compared.items() if same_bits(local_tensor(entry.param), entry.before)]
        sync_off = {name: entry for name, entry in snapshot.items() if entry.sync_off}
        self.log.write(
            events.STEP,
            optimizer=type(optimizer).__name__,
            optimizer_id=id(optimizer),
            optimizer_line=next(iter(self.optimizer_lines.get(optimizer, ())), None),
            optimizer_lines=self.optimizer_lines.get(optimizer, []),
            step=step,
            optimizer_params=len(optimizer_params),
            optimizer_dtensor=sum(isinstance(p, DTensor) for p in optimizer_params),
            optimizer_replaced=self.replaced.count(optimizer_params),
            optimizer_unsharded=self.optimizer_unsharded.get(optimizer, 0),
            model_params=len(snapshot),
            model_dtensor=sum(isinstance(entry.param, DTensor) for entry in snapshot.values()),
            grads_missing=sum(entry.no_grad for entry in snapshot.values()),
            no_grad=[name for name, entry in snapshot.items() if entry.no_grad][:MAX_NAMES],
            sync_off=list(sync_off)[:MAX_NAMES],
            sync_off_count=len(sync_off),
            sync_off_changed=sum(name in compared and name not in unchanged for name in sync_off),
            sync_off_not_held=sum(id(entry.param) not in held for entry in sync_off.values()),
            sync_off_lines=sorted({entry.sync_off_line for entry in sync_off.values()} - {None}),
            held_by_optimizer=sum(id(entry.param) in held for entry in snapshot.values()),
            not_held=[name for name, entry in snapshot.items() if id(entry.param) not in held][:MAX_NAMES],
            compared=len(compared),
            changed=len(compared) - len(unchanged),
            unchanged=unchanged[:MAX_NAMES],
            **self.locator.locate_stack(sys._getframe()),
        )

    # torch.save ---------------------------------------------------------------------------------

    def _wrap_save(self) -> None:
        original = torch.save
        on_save = self.guarded("save", self._on_save)

        @functools.wraps(original)
        def save(obj: object, f: Any, *args: Any, **kwargs: Any) -> Any:
            on_save(obj, f, sys._getframe(1))
            return original(obj, f, *args, **kwargs)

        torch.save = save
        torch.serialization.save = save

    def _on_save(self, obj: object, f: Any, frame: FrameType) -> None:
        if self.locator.in_torch(frame.f_code.co_filename):
            return  # torch's own use of torch.save (DCP writes its shards with it)
        tensors, dtensors = count_tensors(obj)
        self.log.write(
            events.SAVE,
            target=save_target(f),
            tensors=tensors,
            dtensors=dtensors,
            **self.locator.locate_stack(frame),
        )

    # collectives --------------------------------------------------------------------------------

    def _wrap_collectives(self) -> None:
        on_enter = self.guarded("collective", self._on_collective)
        for op in COLLECTIVES:
            original = getattr(c10d, op, None)
            if original is None:
                continue
            wrapped = _entering(original, op, on_enter)
            for module in (dist, c10d):
                if getattr(module, op, None) is original:
                    setattr(module, op, wrapped)

    def _on_collective(self, op: str, frame: FrameType) -> None:
        where = self.locator.locate_stack(frame)
        key = (op, where["line"], where["site"])
        if key == self.last_collective:
            return  # the same collective from the same line again: the log already says so
        self.last_collective = key
        self.log.write(events.COLLECTIVE, op=op, **where)


def _entering(original: Callable[..., Any], op: str, on_enter: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def collective(*args: Any, **kwargs: Any) -> Any:
        on_enter(op, sys._getframe(1))
        return original(*args, **kwargs)

    return collective


def _as_modules(module: Any) -> list[torch.nn.Module]:
    """``fully_shard`` takes a module or a list of modules (one group for all of them)."""
    return list(module) if isinstance(module, (list, tuple)) else [module]


def _optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def trace_script_lines(scope: SourceScope, path: Path) -> None:
    """Append each line of the user's code (see :mod:`fsdp2_lint.runtime.evidence.scope`) to ``path``
    the first time any thread executes it, so the harness can tell a static finding the run never
    reached from one it ran through silently."""
    out = open(path, "a", encoding="utf-8", buffering=1)
    reached: set[Line] = set()
    lock = threading.Lock()

    def trace_line(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            line = scope.name(frame.f_code.co_filename, frame.f_lineno)
            if line is not None and line not in reached:
                with lock:
                    reached.add(line)
                    out.write(f"{line}\n")
                    out.flush()
        return trace_line

    def trace_call(frame: FrameType, event: str, arg: Any) -> Any:
        return trace_line if scope.contains(frame.f_code.co_filename) else None

    sys.settrace(trace_call)
    threading.settrace(trace_call)
