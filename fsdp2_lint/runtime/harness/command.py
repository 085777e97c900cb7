"""The ``fsdp2-lint confirm`` click command. Imports no torch: the ranks it launches do."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from fsdp2_lint.rule import Rule
from fsdp2_lint.runtime.evidence.device import DEVICE_CHOICES, DeviceUnavailable
from fsdp2_lint.runtime.harness.project import Entry, ProjectError, is_project, module_entry, read_entry
from fsdp2_lint.runtime.launch.launcher import LAUNCHERS, HarnessError
from fsdp2_lint.runtime.launch.processes import exit_like

INSTALL_HINT = (
    "fsdp2-lint confirm runs training scripts under torchrun and needs PyTorch, which is not installed.\n"
    "Install the runtime extra:  pip install 'fsdp2-lint[runtime]'"
)
FIXTURE_TIMEOUT_SECONDS = 30.0
SCRIPT_TIMEOUT_SECONDS = 300.0
TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a cancelled CI job, a closed terminal


def torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the harness is, so that it unwinds as for Ctrl-C: every
    launcher stops its processes and the temporary directory is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _terminating_signals_unwind() -> Iterator[None]:
    def terminate(signum: int, frame: object) -> None:
        for other in TERMINATING_SIGNALS:
            signal.signal(other, signal.SIG_IGN)  # a second one must not cut the cleanup short
        raise _Terminated(signum)

    previous = {signum: signal.signal(signum, terminate) for signum in TERMINATING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _run_root(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="fsdp2-lint-confirm-") as root:
        yield Path(root)


def _selected_rules(
    context: click.Context, parameter: click.Parameter, codes: tuple[str, ...]
) -> tuple[type[Rule], ...]:
    """``--rule`` codes -> the selected rules, checked before anything runs (imported here so that
    the other commands do not load the evidence registry)."""
    from fsdp2_lint.runtime.harness.selection import UnknownRule, select_rules

    try:
        return select_rules(codes)
    except UnknownRule as error:
        raise click.BadParameter(str(error), context, parameter) from None


def _module_entry(context: click.Context, parameter: click.Parameter, module: str | None) -> Entry | None:
    """``-m MODULE``: the current directory's project, run as ``python -m MODULE`` would run it
    there. Eager, so that SCRIPT's callback knows it was given."""
    if module is None:
        return None
    try:
        return module_entry(module, Path.cwd(), Path.cwd())
    except ProjectError as error:
        raise click.BadParameter(str(error), context, parameter) from None


def _script(context: click.Context, parameter: click.Parameter, value: str | None) -> Path | Entry | str | None:
    """SCRIPT: a script (checked as ``click.Path(exists=True, dir_okay=False)`` checks it), or a
    project directory holding an ``ENTRY``; after ``-m MODULE``, the first of the module's arguments."""
    if value is None or context.params.get("module") is not None:
        return value
    if Path(value).is_dir() and is_project(Path(value)):
        try:
            return read_entry(Path(value))
        except ProjectError as error:
            raise click.BadParameter(str(error), context, parameter) from None
    return click.Path(exists=True, dir_okay=False, path_type=Path).convert(value, parameter, context)


@click.command(name="confirm")
@click.argument("script", required=False, type=click.UNPROCESSED, callback=_script)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE", is_eager=True, callback=_module_entry,
              help="Run this module of the project in the current directory, as `python -m MODULE` would "
                   "(SCRIPT_ARGS go to it).")  # fmt: skip
@click.option("--rule", "rules", multiple=True, metavar="CODE", callback=_selected_rules,
              help="Only this rule (repeatable).")  # fmt: skip
@click.option("--device", type=click.Choice(DEVICE_CHOICES), default="auto", show_default=True,
              help="auto: CUDA + NCCL when every rank can have its own GPU, else CPU + gloo.")  # fmt: skip
@click.option("--nproc", type=click.IntRange(min=1), default=2, show_default=True, help="Ranks per run.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help=f"Seconds per run before it counts as a hang [default: {FIXTURE_TIMEOUT_SECONDS:g} per fixture, "
                   f"{SCRIPT_TIMEOUT_SECONDS:g} for SCRIPT].")  # fmt: skip
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Fixture runs at a time [default: CPU cores / nproc, at least 2; 2 on CUDA]. "
                   "Not for SCRIPT: it is one run.")  # fmt: skip
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="pool", show_default=True,
              help="pool: rank servers import torch once and fork each run; "
                   "torchrun: one torchrun per fixture. SCRIPT always runs under its own torchrun.")  # fmt: skip
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--keep-runs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep every run's events, logs and stack dumps in this directory.")  # fmt: skip
def confirm(
    script: Path | Entry | str | None,
    script_args: tuple[str, ...],
    module: Entry | None,
    rules: tuple[type[Rule], ...],
    device: str,
    nproc: int,
    timeout: float | None,
    jobs: int | None,
    launcher: str,
    output_format: str,
    keep_runs: Path | None,
) -> None:
    """Run each rule's fixtures under torchrun with probes and confirm, by observing the runs, that
    every bad fixture fails the way its rule documents and every good fixture trains cleanly.

    With SCRIPT (and `-- ARGS` for it), run your own training script the same way and show, next
    to the static findings for it, which ones the run confirmed, which it never reached, and
    which failures the static pass missed. A project runs the same way, its findings in all its
    files: `-m MODULE` in its directory, or SCRIPT a project directory with an ENTRY file.

    Exit status: 0 when every bad fixture is confirmed and every good one is clean (for SCRIPT:
    when the run showed no failure), 1 otherwise, 2 when the harness cannot run. On SIGTERM or
    SIGHUP, as on Ctrl-C, every process it started is stopped and its temporary files are removed
    before it ends (killed by that signal, as its caller expects).
    """
    if not torch_available():
        click.echo(INSTALL_HINT, err=True)
        sys.exit(2)
    try:
        with _terminating_signals_unwind(), _run_root(keep_runs) as root:
            if module is not None and script is not None:
                script_args = (str(script), *script_args)
            entry = module or (script if isinstance(script, Entry) else None)
            if entry is not None or script is not None:
                from fsdp2_lint.runtime.harness.confirm_script import run_script_check

                started = entry.script if entry is not None else Path(script)  # type: ignore[arg-type]
                code = run_script_check(
                    started, script_args, rules, device, nproc, timeout or SCRIPT_TIMEOUT_SECONDS, root, output_format,
                    entry,
                )  # fmt: skip
            else:
                code = _run_fixtures(rules, device, nproc, timeout, jobs, launcher, root, output_format)
    except (HarnessError, DeviceUnavailable) as error:
        click.echo(f"fsdp2-lint confirm: {error}", err=True)
        sys.exit(2)
    except _Terminated as stop:
        sys.stdout.flush()
        sys.stderr.flush()
        exit_like(-stop.signum)
    sys.exit(code)


def _run_fixtures(
    rules: tuple[type[Rule], ...],
    device: str,
    nproc: int,
    timeout: float | None,
    jobs: int | None,
    launcher: str,
    root: Path,
    output_format: str,
) -> int:
    from fsdp2_lint.runtime.harness.confirm_fixtures import confirm_fixtures
    from fsdp2_lint.runtime.harness.progress import FixtureProgress
    from fsdp2_lint.runtime.harness.report import as_json, passed, print_table, report_console

    report = confirm_fixtures(
        rules, device, nproc, timeout or FIXTURE_TIMEOUT_SECONDS, jobs, launcher, root, progress=FixtureProgress()
    )
    if output_format == "json":
        click.echo(as_json(report.settings, report.results, report.notes, report.wall_seconds))
    else:
        print_table(report_console(), report.settings, report.results, report.notes, report.wall_seconds)
    return 0 if passed(report.results) else 1
