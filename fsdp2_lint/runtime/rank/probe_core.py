"""What the probes of one rank build on (imports torch): ``CodeLocator``, which attributes a stack
to the line of the user's script that led to it; ``ReplacedParameters``, the shard observer that
remembers the tensors ``fully_shard`` replaced; and ``ProbeCore``, the state every probe reads: the
rank's event log, ``guarded`` (a probe that fails records a ``probe_error`` event instead), and the
modules given to ``fully_shard`` with their parameters; and ``param_groups``, a sharded module's FSDP
parameter groups on every supported torch.
"""

from __future__ import annotations

import os
import sysconfig
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import FrameType, TracebackType
from typing import Any

import torch
from torch.distributed.tensor import DTensor
from torch.utils.weak import WeakIdKeyDictionary

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.events import EventLog
from fsdp2_lint.runtime.evidence.scope import Line, SourceScope


class CodeLocator:
    """Attributes a stack to the user's script: the innermost frame of the script (of any file of
    the project, for a project's run: see :mod:`fsdp2_lint.runtime.evidence.scope`), and the
    innermost frame of any user code (not torch, not the standard library or site-packages, not
    this harness)."""

    def __init__(self, scope: SourceScope) -> None:
        self.scope = scope
        self.torch_root = os.path.dirname(torch.__file__) + os.sep
        paths = sysconfig.get_paths()
        library_roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
        library_roots.add(os.path.dirname(__file__))
        self.library_roots = tuple(root + os.sep for root in library_roots) + (self.torch_root,)

    def in_torch(self, filename: str) -> bool:
        return filename.startswith(self.torch_root)

    def is_user_file(self, filename: str) -> bool:
        return self.scope.contains(filename) or not (
            filename.startswith("<") or filename.startswith(self.library_roots)
        )

    def locate(self, frames: Iterable[tuple[str, int]]) -> dict[str, Any]:
        """``line``: innermost line in the script; ``site``: innermost user frame elsewhere, if any."""
        site = None
        for filename, lineno in frames:
            line = self.scope.name(filename, lineno)
            if line is not None:
                return {"line": line, "site": site}
            if site is None and self.is_user_file(filename):
                site = f"{filename}:{lineno}"
        return {"line": None, "site": site}

    def locate_stack(self, frame: FrameType | None) -> dict[str, Any]:
        return self.locate(_outward(frame))

    def script_lines(self, frame: FrameType | None) -> list[Line]:
        """Every line of the script on the stack, innermost first: a helper's line, then its callers'."""
        return self._lines(_outward(frame))

    def _lines(self, frames: Iterable[tuple[str, int]]) -> list[Line]:
        return [line for filename, lineno in frames if (line := self.scope.name(filename, lineno)) is not None]

    def locate_traceback(self, tb: TracebackType | None) -> dict[str, Any]:
        """Also ``script_lines``: every line of the script in the traceback, innermost first (a
        static finding at a call site matches an exception raised deeper inside the script)."""
        frames = []
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        frames.reverse()
        return {**self.locate(frames), "script_lines": self._lines(frames)}


def _outward(frame: FrameType | None) -> Iterator[tuple[str, int]]:
    while frame is not None:
        yield frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back


def state_groups(state: Any) -> list[Any]:
    """The parameter groups of an FSDP2 state (torch internals, read only): a list on torch 2.13,
    one group or None on torch 2.11, whose state has only ``_fsdp_param_group``."""
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        groups = [group for group in (getattr(state, "_fsdp_param_group", None),) if group is not None]
    return list(groups)


def param_groups(module: torch.nn.Module) -> list[Any]:
    """The FSDP2 parameter groups a ``fully_shard``ed module owns."""
    return state_groups(module._get_fsdp_state())


class ReplacedParameters:
    """Shard observer: remembers the tensors that were a module's parameters until ``fully_shard``
    replaced them with DTensors. An optimizer or a clip that holds them works on tensors the model
    no longer uses (FSDP001, FSDP015); one over a model nobody sharded holds none of them."""

    def __init__(self) -> None:
        # by identity: tensors compare elementwise; weak, so a replaced tensor nobody holds is dropped
        self.tensors: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def before(self, modules: list[torch.nn.Module]) -> list[torch.Tensor]:
        return [p for m in modules for p in m.parameters() if not isinstance(p, DTensor)]

    def after(self, modules: list[torch.nn.Module], before: list[torch.Tensor] | None) -> dict[str, Any]:
        current = {id(p) for m in modules for p in m.parameters()}
        for param in before or ():
            if id(param) not in current:  # a failed call leaves the module its parameters
                self.tensors[param] = True
        return {}

    def count(self, tensors: Iterable[torch.Tensor]) -> int:
        return sum(tensor in self.tensors for tensor in tensors)


class ProbeCore:
    """The state the probes of one rank share; :class:`.probes.Probes` adds the probes themselves."""

    def __init__(self, log: EventLog, scope: SourceScope) -> None:
        self.log = log
        self.locator = CodeLocator(scope)
        self.sharded: list[weakref.ref[torch.nn.Module]] = []
        self.replaced = ReplacedParameters()
        # called with the exception the script ended with, before it is recorded (guarded by each probe)
        self.exception_observers: list[Callable[[BaseException], Any]] = []

    def guarded(self, probe: str, body: Callable[..., Any]) -> Callable[..., Any]:
        """``body``, returning None (and recording a ``probe_error``) where it fails."""

        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return body(*args, **kwargs)
            except Exception as error:  # a probe must never break the script it observes
                self.log.write(events.PROBE_ERROR, probe=probe, message=f"{type(error).__name__}: {error}")
                return None

        return run

    def model_parameters(self) -> dict[str, torch.nn.Parameter]:
        """Named parameters of the sharded model(s): modules given to fully_shard that no other
        such module contains."""
        modules = [m for m in (ref() for ref in self.sharded) if m is not None]
        inner = {id(sub) for m in modules for sub in m.modules() if sub is not m}
        named: dict[str, torch.nn.Parameter] = {}
        seen: set[int] = set()
        for root in (m for m in modules if id(m) not in inner):
            for name, param in root.named_parameters():
                if id(param) not in seen:
                    seen.add(id(param))
                    named[name] = param
        return named
