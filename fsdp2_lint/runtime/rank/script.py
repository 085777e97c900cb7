"""Running the user's script on one rank, with probes, recording how it ended (imports torch).

Shared by both launchers: :mod:`.main` (under torchrun) and :mod:`.server` (a forked
child per run). The script runs as ``__main__`` via runpy, exactly as ``python script.py`` would;
a project's entry module as ``python -m package.module`` would, with its import root first on
``sys.path``.
"""

from __future__ import annotations

import faulthandler
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path

import torch

from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.device import Device
from fsdp2_lint.runtime.evidence.events import EventLog
from fsdp2_lint.runtime.evidence.scope import SourceScope
from fsdp2_lint.runtime.rank.probe_core import CodeLocator
from fsdp2_lint.runtime.rank.probes import Probes, trace_script_lines

MAX_MESSAGE = 4000
MAX_TRACEBACK = 8000


def run_script(
    script: Path,
    argv: Sequence[str],
    run_dir: Path,
    rank: int,
    world_size: int,
    device: Device,
    trace_lines: bool = False,
    module: str | None = None,
    import_root: Path | None = None,
    project: Path | None = None,
) -> int:
    """Run ``script`` (or ``module``, whose file it is) on this rank and return the exit code the
    rank should end with. ``import_root`` goes first on sys.path (default: as Python puts it
    there); events name lines of any file of ``project`` (default: of the script alone)."""
    script = script.resolve()
    scope = SourceScope.of(script, project)
    log = EventLog(events.events_path(run_dir, rank))
    capture_output(run_dir, rank)
    faulthandler.enable(all_threads=True)  # a rank killed by SIGSEGV, SIGABRT, ... prints where it was
    outdir = events.output_dir(run_dir)
    outdir.mkdir(parents=True, exist_ok=True)
    os.environ["FSDP2_LINT_DEVICE"] = device.kind
    os.environ["FSDP2_LINT_OUTDIR"] = str(outdir)
    log.write(
        events.START,
        rank=rank,
        world_size=world_size,
        pid=os.getpid(),
        script=str(script),
        device=device.kind,
        backend=device.backend,
        torch=torch.__version__,
    )
    probes = Probes(log, scope, run_dir, rank)
    probes.install()
    locator = CodeLocator(scope)
    record_thread_exceptions(log, locator)
    if trace_lines:
        trace_script_lines(scope, events.lines_path(run_dir, rank))
    sys.argv = [str(script), *argv]
    # as `python script.py` sets it; `python -m` puts the current directory there
    default_root = Path.cwd() if module else script.parent
    sys.path[0] = str((import_root or default_root).resolve())
    real_exit = os._exit
    os._exit = _recording_exit(log, real_exit)  # scripts that end with os._exit(0) still finished
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:
        code = exit_code(stop)
        log.write(events.EXIT, code=code)
        return code
    except BaseException as error:
        for observe in probes.exception_observers:
            observe(error)
        log.write(events.EXCEPTION, **describe_exception(error, locator))
        traceback.print_exception(type(error), error, _from_script(error.__traceback__, scope))
        return 1
    finally:
        os._exit = real_exit
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    log.write(events.EXIT, code=0)
    return 0


def _recording_exit(log: EventLog, real_exit):
    def _exit(code: int) -> None:
        log.write(events.EXIT, code=code)
        real_exit(code)

    return _exit


def capture_output(run_dir: Path, rank: int) -> None:
    """Point this process's stdout/stderr (fds 1 and 2, so C++ output too) at the run's files."""
    for stream, fd, path in (
        (sys.stdout, 1, events.stdout_path(run_dir, rank)),
        (sys.stderr, 2, events.stderr_path(run_dir, rank)),
    ):
        stream.flush()
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)
        stream.reconfigure(line_buffering=True)  # a killed rank keeps what it printed


def _from_script(tb, scope: SourceScope):
    """The traceback without the harness's own frames (runpy and this module) above the script."""
    start = tb
    while start is not None and not scope.contains(start.tb_frame.f_code.co_filename):
        start = start.tb_next
    return start or tb


def exit_code(stop: SystemExit) -> int:
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def describe_exception(error: BaseException, locator: CodeLocator) -> dict:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return {
        "type": type(error).__name__,
        "types": exception_type_names(type(error)),
        "message": str(error)[:MAX_MESSAGE],
        "traceback": text[-MAX_TRACEBACK:],
        **locator.locate_traceback(error.__traceback__),
    }


def exception_type_names(cls: type) -> list[str]:
    """The class and its bases, each by name and by qualified name (``DistBackendError`` and
    ``torch.distributed.DistBackendError``): signatures may use either."""
    names = []
    for base in cls.__mro__[:-1]:  # all but object
        names.append(base.__name__)
        if base.__module__ != "builtins":
            names.append(f"{base.__module__}.{base.__qualname__}")
    return names


def record_thread_exceptions(log: EventLog, locator: CodeLocator) -> None:
    """An exception that kills a background thread of the script is a failure of the run too."""
    previous = threading.excepthook

    def excepthook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            thread = getattr(args.thread, "name", None)
            log.write(events.EXCEPTION, thread=thread, **describe_exception(args.exc_value, locator))
        previous(args)

    threading.excepthook = excepthook
