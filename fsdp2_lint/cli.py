"""The ``fsdp2-lint`` command line."""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple, TextIO

import click

from fsdp2_lint import __version__
from fsdp2_lint.cache import CACHE_DIR_ENV, DEFAULT_CACHE_DIR, Cache, is_cache, remove_cache
from fsdp2_lint.config import ConfigError, Selection
from fsdp2_lint.diagnostics import PARSE_ERROR, Diagnostic
from fsdp2_lint.discovery import DEFAULT_EXCLUDES, Skipped, Unlintable, discover
from fsdp2_lint.output import (
    COLOR_CHOICES,
    FORMATS,
    Fixing,
    colored,
    console,
    printable,
    write_fix_summary,
    write_report,
    write_statistics,
)
from fsdp2_lint.pipeline import (
    FileFix,
    LintTask,
    SettingsResolver,
    add_noqa_to_file,
    fix_file,
    importers_of,
    lint_files,
    remove_killed_runs_temporaries,
    unlintable,
)
from fsdp2_lint.rule import all_rules
from fsdp2_lint.torch_version import TorchVersion

# What `check` does not use is imported by the command that does: rich's markdown and tables, the
# rule documentation, the runtime harness (`confirm`). A check whose files the prefilter rejects
# imports no parser either (tests/cli/test_startup.py).
LAZY_COMMANDS = {"confirm": "fsdp2_lint.runtime.harness.command:confirm"}


class _Commands(click.Group):
    """A group whose ``LAZY_COMMANDS`` are imported when one is run or listed (``--help``)."""

    def list_commands(self, context: click.Context) -> list[str]:
        return sorted({*super().list_commands(context), *LAZY_COMMANDS})

    def get_command(self, context: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            module, _, attribute = LAZY_COMMANDS[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(context, name)


def _torch_version(context: click.Context, parameter: click.Parameter, value: str | None) -> TorchVersion | None:
    try:
        return None if value is None else TorchVersion.parse(value)
    except ValueError as error:
        raise click.BadParameter(str(error), context, parameter) from None


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--select A,B --select C`` -> (A, B, C)."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fsdp2-lint")
def main() -> None:
    """Catch PyTorch FSDP2 (fully_shard) contract violations before they cost a training run."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False, path_type=Path))  # unreadable ones are FSDP000
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice((*FORMATS, "full")), default="text", show_default=True,
              envvar="FSDP2_LINT_OUTPUT_FORMAT", show_envvar=True,
              help="Report format (`full`: Ruff's name for `text`).")  # fmt: skip
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of standard output.")  # fmt: skip
@click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Colour the report: on a terminal only (auto), always, or never.")  # fmt: skip
@click.option("--exclude", multiple=True, metavar="PATTERN",
              help="Paths to leave out (gitignore-style, relative to the working directory; comma-separated "
              "or repeated): replaces the configured `exclude`.")  # fmt: skip
@click.option("--extend-exclude", multiple=True, metavar="PATTERN",
              help="Like --exclude, but adds to the configured `exclude`.")  # fmt: skip
@click.option("--show-files", is_flag=True, help="Print the files that would be linted, and exit.")
@click.option("--show-settings", is_flag=True,
              help="Print the settings used for the first file that would be linted, and exit.")  # fmt: skip
@click.option("--statistics", is_flag=True, help="Print how often each rule was reported instead of the diagnostics.")
@click.option("--exit-zero", is_flag=True, help="Exit with status 0 even when problems are reported.")
@click.option("-q", "--quiet", is_flag=True, help="Print the diagnostics and nothing else (no summary line).")
@click.option("--stdin-filename", metavar="NAME",
              help="Lint standard input, reported (and configured) as the file NAME.")  # fmt: skip
@click.option("--force-exclude", is_flag=True,
              help="Apply the configured `exclude` to files named explicitly too (what the pre-commit hook uses).")  # fmt: skip
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="pyproject.toml to use.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Processes that analyse files (default: all cores).")
@click.option("--max-file-size", type=click.IntRange(min=0), metavar="BYTES",
              help="Report larger files (FSDP000) instead of analysing them; 0: no limit "
              "(default: max-file-size in the configuration, else 1048576).")  # fmt: skip
@click.option("--torch-version", metavar="X.Y", callback=_torch_version,
              help="The torch the code runs on: rules whose failure does not happen there are not run "
              "(default: torch-version in the configuration, else the installed torch, else the newest supported).")  # fmt: skip
@click.option("--no-follow-imports", is_flag=True,
              help="Analyse each file on its own, without following calls into the project's other modules.")  # fmt: skip
@click.option("--with-importers", is_flag=True,
              help="Also analyse the project's files that import the files named (directly or not), and report "
              "those of their findings that are in a named file or point to a line in one (what the pre-commit "
              "hook uses: a staged helper is checked with its callers).")  # fmt: skip
@click.option("--no-cache", is_flag=True, help="Analyse every file again instead of reusing cached results.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar=CACHE_DIR_ENV, show_envvar=True,
              help="Where results are cached (default: .fsdp2-lint-cache in the project root).")  # fmt: skip
@click.option("--fix", is_flag=True,
              help="Apply the safe fixes in place (with --stdin-filename: print the fixed source).")  # fmt: skip
@click.option("--unsafe-fixes", is_flag=True,
              help="Treat fixes that change behaviour as applicable too (review them).")  # fmt: skip
@click.option("--diff", is_flag=True,
              help="Print a unified diff of what --fix would change and write nothing (exit 1 when there is one).")  # fmt: skip
@click.option("--show-fixes", is_flag=True, help="Summarise what --fix fixed (or --diff would fix).")
@click.option("--fix-only", is_flag=True,
              help="Apply the fixes, but do not report what is left (exit 0 unless --exit-non-zero-on-fix); implies --fix.")  # fmt: skip
@click.option("--exit-non-zero-on-fix", is_flag=True,
              help="Exit with status 1 when --fix changed a file, even if nothing is left to report.")  # fmt: skip
@click.option("-w", "--watch", is_flag=True,
              help="Lint again whenever a file to lint is added, removed or changed (stop with Ctrl-C).")  # fmt: skip
@click.option("--add-noqa", is_flag=True,
              help="Add `# noqa: CODE` to every line with a diagnostic (keeping the codes already there), and exit.")  # fmt: skip
def check(
    paths: tuple[Path, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    output_format: str,
    output_file: Path | None,
    color: str,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    show_files: bool,
    show_settings: bool,
    statistics: bool,
    exit_zero: bool,
    quiet: bool,
    stdin_filename: str | None,
    force_exclude: bool,
    config: Path | None,
    isolated: bool,
    jobs: int | None,
    max_file_size: int | None,
    torch_version: TorchVersion | None,
    no_follow_imports: bool,
    with_importers: bool,
    no_cache: bool,
    cache_dir: Path | None,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    show_fixes: bool,
    fix_only: bool,
    exit_non_zero_on_fix: bool,
    watch: bool,
    add_noqa: bool,
) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: standard input).

    Exit status: 0 when clean, 1 when anything is reported (after --fix: anything left; with
    --diff: a change to show), 2 on usage or configuration errors.
    """
    output_format = "text" if output_format == "full" else output_format
    selection = Selection(_codes(select) or None, _codes(ignore), _codes(extend_select))
    resolver = SettingsResolver(
        selection, config, isolated, max_file_size, no_follow_imports, torch_version,
        _codes(exclude) if exclude else None, _codes(extend_exclude),
    )  # fmt: skip
    reads_stdin = paths == (Path("-"),) or (stdin_filename is not None and not paths)
    fix = fix or fix_only
    if stdin_filename is not None and not reads_stdin:
        raise click.UsageError("--stdin-filename names standard input: pass no PATHS (or `-`) with it")
    if with_importers and (reads_stdin or fix or diff):
        raise click.UsageError("--with-importers checks files named on the command line, without --fix or --diff")
    if (add_noqa or show_files or show_settings) and (reads_stdin or fix or diff):
        raise click.UsageError("--add-noqa, --show-files and --show-settings work on files, without --fix or --diff")
    if watch and (reads_stdin or fix or diff or add_noqa or show_files or show_settings):
        raise click.UsageError("--watch lints files again as they change: without --fix, --diff or standard input")
    if watch:
        click.echo(f"[{time.strftime('%H:%M:%S')}] Starting linter in watch mode...", err=True)
    targets = list(paths) or [Path(".")]
    try:
        if show_files or show_settings:
            _show(targets, resolver, force_exclude, show_settings)
            sys.exit(0)
        if add_noqa:
            sys.exit(_add_noqa(targets, resolver, force_exclude, jobs, quiet))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    with colored(color), _report_stream(output_file) as out:
        if fix or diff:
            mode = _FixMode(unsafe_fixes, diff, show_fixes, output_format, statistics, quiet, fix_only, out)
            try:
                if reads_stdin:
                    status = _fix_stdin(Path(stdin_filename or "-"), resolver, force_exclude, mode)
                else:
                    status = _fix_paths(targets, resolver, force_exclude, mode)
            except ConfigError as error:
                raise click.UsageError(str(error)) from None
            status, changed = status
            if fix_only and not diff:  # with --diff, a diff still exits 1 (as Ruff)
                status = 0
            if changed and exit_non_zero_on_fix and not diff:
                status = 1
            sys.exit(0 if exit_zero else status)
        cache = None
        watched = _watched(targets, resolver, force_exclude) if watch else set()  # before the lint: no change missed
        try:
            if reads_stdin:
                diagnostics = _check_stdin(Path(stdin_filename or "-"), resolver, force_exclude)
            else:
                cache = _cache(no_cache, cache_dir, resolver)
                diagnostics = _check_paths(targets, resolver, force_exclude, jobs, cache, with_importers, quiet)
        except ConfigError as error:
            raise click.UsageError(str(error)) from None
        fixing = Fixing(unsafe=unsafe_fixes)
        while True:
            if statistics:
                write_statistics(diagnostics, output_format, out, summary=not quiet, fixing=fixing)
            else:
                write_report(diagnostics, output_format, out, summary=not quiet, fixing=fixing)
            if not watch:
                break
            out.flush()
            watched = _wait_for_a_change(watched, targets, resolver, force_exclude)
            click.echo(f"[{time.strftime('%H:%M:%S')}] File change detected...", err=True)
            diagnostics = _check_paths(targets, resolver, force_exclude, jobs, cache, with_importers, quiet=True)
    sys.exit(1 if any(d.severity.fails for d in diagnostics) and not exit_zero else 0)


_WATCH_POLL_SECONDS = 0.5


def _watched(targets: list[Path], resolver: SettingsResolver, force_exclude: bool) -> set[tuple[str, int, int]]:
    """``--watch``: each file to lint, with its modification time and size."""
    state = set()
    for file in discover(targets, lambda p, is_dir: resolver.for_path(p, is_dir).is_excluded(p, is_dir)):
        if isinstance(file, Path) and not (force_exclude and _excluded(file, resolver)):
            with suppress(OSError):
                status = file.stat()
                state.add((str(file), status.st_mtime_ns, status.st_size))
    return state


def _wait_for_a_change(
    before: set[tuple[str, int, int]], targets: list[Path], resolver: SettingsResolver, force_exclude: bool
) -> set[tuple[str, int, int]]:
    """``--watch``: once a file to lint is added, removed or modified since ``before`` (polled), the new state."""
    while True:
        now = _watched(targets, resolver, force_exclude)
        if now != before:
            return now
        time.sleep(_WATCH_POLL_SECONDS)


def _show(targets: list[Path], resolver: SettingsResolver, force_exclude: bool, settings: bool) -> None:
    """``--show-files``: the files a run would lint, absolute and sorted (Ruff's list);
    ``--show-settings``: the settings of the first of them."""
    files = sorted(os.path.abspath(item) for item in _files(targets, resolver, force_exclude) if isinstance(item, Path))
    if not settings:
        for file in files:
            click.echo(printable(file))
        return
    if files:
        click.echo(f'Resolved settings for: "{printable(files[0])}"')
        click.echo(resolver.for_path(Path(files[0]), is_dir=False).describe(Path(files[0])))


def _add_noqa(
    targets: list[Path], resolver: SettingsResolver, force_exclude: bool, jobs: int | None, quiet: bool
) -> int:
    """``--add-noqa``: a noqa comment for every diagnostic (FSDP000 aside), in whichever file it is."""
    files = [item for item in _files(targets, resolver, force_exclude, quiet) if isinstance(item, Path)]
    tasks = [LintTask.of(path, resolver.for_path(path), _display(path)) for path in files]
    paths = {task.display: task.path for task in tasks}
    by_file: dict[str, dict[int, set[str]]] = {}
    for diagnostics in lint_files(tasks, jobs, None):
        for d in diagnostics:
            if d.code != PARSE_ERROR:
                by_file.setdefault(d.path, {}).setdefault(d.line, set()).add(d.code)
    added, status = 0, 0
    for display, codes in by_file.items():
        count, problem = add_noqa_to_file(paths.get(display, Path(display)), codes)
        added += count
        if problem:
            click.echo(f"error: {display}: {problem}", err=True)
            status = 1
    if not quiet:
        click.echo(f"Added {added} noqa directive{'' if added == 1 else 's'}.", err=True)
    return status


@contextmanager
def _report_stream(output_file: Path | None) -> Iterator[TextIO]:
    """``-o FILE``: the report goes to FILE (its folders created), else to standard output."""
    if output_file is None:
        yield sys.stdout
        return
    try:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        stream = open(output_file, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as error:
        raise click.UsageError(f"cannot write the report to {output_file}: {error.strerror or error}") from None
    with stream:
        yield stream


def _check_paths(
    targets: list[Path],
    resolver: SettingsResolver,
    force_exclude: bool,
    jobs: int | None,
    cache: Cache | None,
    with_importers: bool = False,
    quiet: bool = False,
) -> list[Diagnostic]:
    """The diagnostics of the files found, in order; ``with_importers``: then those of their
    importers' findings that involve them."""
    found = _files(targets, resolver, force_exclude, quiet)
    files = [item for item in found if isinstance(item, Path)]
    importers = importers_of(files, resolver) if with_importers else []
    tasks = [LintTask.of(path, resolver.for_path(path), _display(path)) for path in [*files, *importers]]
    results = lint_files(tasks, jobs, cache)
    linted = iter(results[: len(files)])
    own = [d for item in found for d in (next(linted) if isinstance(item, Path) else item)]
    return own + _involving(files, results[len(files) :])


def _involving(files: list[Path], results: list[list[Diagnostic]]) -> list[Diagnostic]:
    """The diagnostics that are in one of ``files`` or have a related location in one."""
    named = {os.path.realpath(file) for file in files}
    return [
        d
        for found in results
        for d in found
        if os.path.realpath(d.path) in named or any(os.path.realpath(r.path) in named for r in d.related)
    ]


def _files(
    targets: list[Path], resolver: SettingsResolver, force_exclude: bool, quiet: bool = False
) -> list[Path | list[Diagnostic]]:
    """In the order found: each file to lint, or the FSDP000 of a path that cannot be linted (see
    ``discovery``; none where its settings leave FSDP000 out). Warns on standard error (unless
    ``quiet``, as Ruff) about each named file skipped as not Python, and when no file is left to lint."""
    for target in targets:
        resolver.for_path(target, _is_dir(target))  # report configuration errors before any output
    if force_exclude:
        targets = [target for target in targets if not _excluded(target, resolver)]
    found: list[Path | list[Diagnostic]] = []
    warnings = []
    for item in discover(targets, lambda p, is_dir: resolver.for_path(p, is_dir).is_excluded(p, is_dir)):
        if isinstance(item, Skipped):
            warnings.append(f"warning: skipping {_display(item.path)}: {item.reason}")
        else:
            found.append(_unlintable_diagnostic(item, resolver) if isinstance(item, Unlintable) else item)
    if not any(isinstance(item, Path) for item in found):
        warnings.append("warning: No Python files found under the given path(s)")
    if not quiet:
        for warning in warnings:
            click.echo(warning, err=True)
    return found


def _unlintable_diagnostic(found: Unlintable, resolver: SettingsResolver) -> list[Diagnostic]:
    """FSDP000 for a path that cannot be linted, unless its settings leave FSDP000 out."""
    return unlintable(found, resolver.for_path(found.path, found.is_dir), _display(found.path))


class _FixMode(NamedTuple):  # not a dataclass: compiling its methods would cost every start, --fix or not
    unsafe: bool
    diff: bool  # show what would change, write nothing
    show_fixes: bool
    output_format: str
    statistics: bool
    quiet: bool
    fix_only: bool = False  # report only how many were fixed
    out: TextIO = sys.stdout  # where the report goes (-o)


def _fix_paths(
    targets: list[Path], resolver: SettingsResolver, force_exclude: bool, mode: _FixMode
) -> tuple[int, bool]:
    """The exit status, and whether a file was (or, with --diff, would be) changed."""
    found = _files(targets, resolver, force_exclude, mode.quiet)
    if not mode.diff:
        remove_killed_runs_temporaries([item for item in found if isinstance(item, Path)])
    files = [_fix_found(item, resolver, mode) for item in found if item != []]
    for file in files:
        if file.problem:
            click.echo(f"error: {file.display}: {file.problem}", err=True)
    if mode.diff:
        return _report_diff(files, mode), any(file.changed for file in files)
    _report_fixed(files, mode, mode.out)
    failing = any(d.severity.fails for file in files for d in file.result.remaining)
    return 1 if failing else 0, any(file.changed for file in files)


def _fix_found(item: Path | list[Diagnostic], resolver: SettingsResolver, mode: _FixMode) -> FileFix:
    """Fix a file found, or stand for a path that cannot be linted with its FSDP000."""
    if isinstance(item, Path):
        return fix_file(LintTask.of(item, resolver.for_path(item), _display(item)), mode.unsafe, write=not mode.diff)
    return FileFix.unfixable(item[0].path, item)


def _fix_stdin(name: Path, resolver: SettingsResolver, force_exclude: bool, mode: _FixMode) -> tuple[int, bool]:
    """The fixed source goes to standard output (the diagnostics left, to standard error, or -o's file)."""
    settings = resolver.for_path(name, is_dir=False)
    source = sys.stdin.buffer.read()
    if force_exclude and _excluded(name, resolver):
        if not mode.diff:
            sys.stdout.buffer.write(source)
        return 0, False
    file = fix_file(LintTask.of(name, settings, _display(name), source), mode.unsafe, write=False)
    if mode.diff:
        return _report_diff([file], mode), file.changed
    sys.stdout.buffer.write(file.result.source)
    sys.stdout.flush()
    _report_fixed([file], mode, sys.stderr if mode.out is sys.stdout else mode.out)
    return 1 if any(d.severity.fails for d in file.result.remaining) else 0, file.changed


def _report_diff(files: list[FileFix], mode: _FixMode) -> int:
    """Ruff's `--diff`: the diffs on standard output, the count on standard error."""
    changed = [file for file in files if file.changed]
    for file in changed:
        sys.stdout.write(file.diff())
    if mode.show_fixes:
        write_fix_summary(_fixed_by_file(files), sys.stderr, would=True)
    elif not mode.quiet:
        count = sum(len(file.result.fixed) for file in changed)
        message = f"Would fix {count} problem{'' if count == 1 else 's'}." if count else "No fixes to apply."
        click.echo(message, err=True)
    return 1 if changed else 0


def _report_fixed(files: list[FileFix], mode: _FixMode, stream: TextIO) -> None:
    if mode.fix_only:  # Ruff's --fix-only: the count of fixes, nothing about what is left
        count = sum(len(file.result.fixed) for file in files)
        if count and not mode.quiet:
            stream.write(f"Fixed {count} problem{'' if count == 1 else 's'}.\n")
        if mode.show_fixes:
            write_fix_summary(_fixed_by_file(files), stream, would=False)
        return
    remaining = [d for file in files for d in file.result.remaining]
    fixing = Fixing(unsafe=mode.unsafe, applied=sum(len(file.result.fixed) for file in files))
    if mode.statistics:
        write_statistics(remaining, mode.output_format, stream, summary=not mode.quiet, fixing=fixing)
    else:
        write_report(remaining, mode.output_format, stream, summary=not mode.quiet, fixing=fixing)
    if mode.show_fixes:
        write_fix_summary(
            _fixed_by_file(files), stream if mode.output_format in ("text", "concise") else sys.stderr, would=False
        )


def _fixed_by_file(files: list[FileFix]) -> list[tuple[str, tuple[Diagnostic, ...]]]:
    return [(file.display, file.result.fixed) for file in files]


def _cache(no_cache: bool, cache_dir: Path | None, resolver: SettingsResolver) -> Cache | None:
    """The results cache: --cache-dir, else .fsdp2-lint-cache in the working directory's project root."""
    if no_cache:
        return None
    return Cache(cache_dir or resolver.for_path(Path.cwd(), is_dir=True).root / DEFAULT_CACHE_DIR)


def _check_stdin(name: Path, resolver: SettingsResolver, force_exclude: bool) -> list[Diagnostic]:
    settings = resolver.for_path(name, is_dir=False)
    source = sys.stdin.buffer.read()
    if force_exclude and _excluded(name, resolver):
        return []
    (diagnostics,) = lint_files([LintTask.of(name, settings, _display(name), source)])
    return diagnostics


def _excluded(target: Path, resolver: SettingsResolver) -> bool:
    is_dir = _is_dir(target)
    return resolver.for_path(target, is_dir).is_excluded(target.absolute(), is_dir)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # under a directory that cannot be searched: reported when it is linted
        return False


def _display(path: Path) -> str:
    """The path as given, or relative to the working directory when it is inside it; a byte of the
    name that is not UTF-8 is shown as ``\\xNN`` (every report format must be valid Unicode)."""
    return printable(_displayed(path))


def _displayed(path: Path) -> str:
    if not path.is_absolute():
        return os.path.normpath(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@main.command(name="rules")
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def list_rules(output_format: str) -> None:
    """List every rule (`markdown` prints README's rule table)."""
    import json

    from rich.table import Table

    from fsdp2_lint.rule_docs import rule_json, rules_table

    rules = all_rules()
    if output_format == "json":
        data = [rule_json(rule) for rule in rules]
        click.echo(json.dumps(data, indent=2))
        return
    if output_format == "markdown":
        click.echo(rules_table(rules))
        return
    table = Table("code", "name", "severity", "summary", box=None, pad_edge=False)
    for rule in rules:
        table.add_row(rule.code, rule.name, rule.severity.value, rule.summary)
    console(sys.stdout).print(table)


@main.command(name="rule")
@click.argument("code", required=False)
@click.option("--all", "every", is_flag=True, help="Explain every rule.")
def explain_rule(code: str | None, every: bool) -> None:
    """Explain rule CODE: what it flags, why it breaks, examples and the fix (`--all`: every rule)."""
    from rich.markdown import Markdown

    from fsdp2_lint.rule_docs import rule_markdown

    if every == (code is not None):
        raise click.UsageError("name one rule CODE, or pass --all")
    rules = {rule.code: rule for rule in all_rules()}
    chosen = list(rules.values()) if every else [rules.get(code.strip().upper())]
    if chosen == [None]:
        raise click.UsageError(f"unknown rule {code!r}; `fsdp2-lint rules` lists them")
    out = console(sys.stdout)
    for rule in chosen:
        out.print(Markdown(rule_markdown(rule)))


@main.command(name="clean")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar=CACHE_DIR_ENV, show_envvar=True,
              help="A cache directory to remove too (as `check --cache-dir` names it).")  # fmt: skip
def clean(cache_dir: Path | None) -> None:
    """Remove the results caches (.fsdp2-lint-cache) in the current directory and the folders below
    it, in the project root, and the one --cache-dir names."""
    found = []
    for folder, subfolders, _ in os.walk("."):
        if DEFAULT_CACHE_DIR in subfolders:
            found.append(Path(folder) / DEFAULT_CACHE_DIR)
        subfolders[:] = [name for name in subfolders if name not in DEFAULT_EXCLUDES]  # .git, .venv, caches
    try:
        root = SettingsResolver(Selection()).for_path(Path.cwd(), is_dir=True).root
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    candidates = [*found, root / DEFAULT_CACHE_DIR] + ([cache_dir] if cache_dir else [])
    status = 0
    for directory in dict.fromkeys(Path(os.path.abspath(candidate)) for candidate in candidates):
        if not directory.exists():
            continue
        if not is_cache(directory):
            click.echo(
                f"error: {directory} is not an fsdp2-lint cache (no CACHEDIR.TAG); it was left as it is", err=True
            )
            status = 1
            continue
        try:
            remove_cache(directory)
            click.echo(f"Removed cache at: {printable(str(directory))}", err=True)
        except OSError as error:
            click.echo(f"error: cannot remove {directory}: {error.strerror or error}", err=True)
            status = 1
    sys.exit(status)


LSP_INSTALL_HINT = (
    "fsdp2-lint lsp needs pygls, which is not installed.\nInstall the editor extra:  pip install 'fsdp2-lint[lsp]'"
)


@main.command(name="lsp")
def language_server() -> None:
    """Run the language server on standard input/output (editors start it; see README)."""
    import importlib.util

    if importlib.util.find_spec("pygls") is None:
        click.echo(LSP_INSTALL_HINT, err=True)
        sys.exit(2)
    from fsdp2_lint.lsp.server import serve

    serve()
