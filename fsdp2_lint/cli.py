"""The ``fsdp2-lint`` command line."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import click
from rich.markdown import Markdown
from rich.table import Table

from fsdp2_lint import __version__
from fsdp2_lint.config import ConfigError, Selection
from fsdp2_lint.discovery import discover
from fsdp2_lint.engine import Diagnostic, raise_recursion_limit
from fsdp2_lint.output import FORMATS, console, rule_markdown, write_report, write_statistics
from fsdp2_lint.rule import Rule, all_rules
from fsdp2_lint.runner import SettingsResolver, check_path


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--select A,B --select C`` -> (A, B, C)."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fsdp2-lint")
def main() -> None:
    """Catch PyTorch FSDP2 (fully_shard) contract violations before they cost a training run."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the selection.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True,
              envvar="FSDP2_LINT_OUTPUT_FORMAT", show_envvar=True, help="Report format.")  # fmt: skip
@click.option("--statistics", is_flag=True, help="Print how often each rule was reported instead of the diagnostics.")
@click.option("--exit-zero", is_flag=True, help="Exit with status 0 even when problems are reported.")
@click.option("-q", "--quiet", is_flag=True, help="Print the diagnostics and nothing else (no summary line).")
@click.option("--stdin-filename", metavar="NAME",
              help="Lint standard input, reported (and configured) as the file NAME.")  # fmt: skip
@click.option("--force-exclude", is_flag=True,
              help="Apply the configured `exclude` to files named explicitly too (what the pre-commit hook uses).")  # fmt: skip
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="pyproject.toml to use.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
def check(
    paths: tuple[Path, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    output_format: str,
    statistics: bool,
    exit_zero: bool,
    quiet: bool,
    stdin_filename: str | None,
    force_exclude: bool,
    config: Path | None,
    isolated: bool,
) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: standard input).

    Exit status: 0 when clean, 1 when anything is reported, 2 on usage or configuration errors.
    """
    raise_recursion_limit()
    selection = Selection(_codes(select) or None, _codes(ignore), _codes(extend_select))
    resolver = SettingsResolver(selection, config, isolated)
    reads_stdin = paths == (Path("-"),) or (stdin_filename is not None and not paths)
    if stdin_filename is not None and not reads_stdin:
        raise click.UsageError("--stdin-filename names standard input: pass no PATHS (or `-`) with it")
    try:
        if reads_stdin:
            diagnostics = _check_stdin(Path(stdin_filename or "-"), resolver, force_exclude)
        else:
            diagnostics = _check_paths(list(paths) or [Path(".")], resolver, force_exclude)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    if statistics:
        write_statistics(diagnostics, output_format, sys.stdout, summary=not quiet)
    else:
        write_report(diagnostics, output_format, sys.stdout, summary=not quiet)
    sys.exit(1 if diagnostics and not exit_zero else 0)


def _check_paths(targets: list[Path], resolver: SettingsResolver, force_exclude: bool) -> list[Diagnostic]:
    for target in targets:
        resolver.for_path(target)  # report configuration errors before any output
    if force_exclude:
        targets = [target for target in targets if not _excluded(target, resolver)]
    diagnostics = []
    for path in discover(targets, lambda p, is_dir: resolver.for_path(p, is_dir).is_excluded(p, is_dir)):
        diagnostics.extend(check_path(path, resolver.for_path(path), _display(path)))
    return diagnostics


def _check_stdin(name: Path, resolver: SettingsResolver, force_exclude: bool) -> list[Diagnostic]:
    settings = resolver.for_path(name, is_dir=False)
    source = sys.stdin.buffer.read()
    if force_exclude and _excluded(name, resolver):
        return []
    return check_path(name, settings, _display(name), source=source)


def _excluded(target: Path, resolver: SettingsResolver) -> bool:
    is_dir = target.is_dir()
    return resolver.for_path(target, is_dir).is_excluded(target.absolute(), is_dir)


def _display(path: Path) -> str:
    """The path as given, or relative to the working directory when it is inside it."""
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
    rules = all_rules()
    if output_format == "json":
        data = [_rule_json(rule) for rule in rules]
        click.echo(json.dumps(data, indent=2))
        return
    if output_format == "markdown":
        click.echo(rules_table(rules))
        return
    table = Table("code", "name", "severity", "summary", box=None, pad_edge=False)
    for rule in rules:
        table.add_row(rule.code, rule.name, rule.severity.value, rule.summary)
    console(sys.stdout).print(table)


def rules_table(rules: tuple[type[Rule], ...]) -> str:
    rows = ["| code | name | severity | what it catches | what happens at runtime |", "|---|---|---|---|---|"]
    for rule in rules:
        cells = (rule.code, f"`{rule.name}`", rule.severity.value, rule.summary, rule.failure)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def _rule_json(rule: type[Rule]) -> dict[str, object]:
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "hint": rule.hint,
        "runtime_evidence": rule.signature.evidence,
    }


@main.command(name="rule")
@click.argument("code")
def explain_rule(code: str) -> None:
    """Explain rule CODE: what it flags, why it breaks, examples and the fix."""
    rules = {rule.code: rule for rule in all_rules()}
    rule = rules.get(code.strip().upper())
    if rule is None:
        raise click.UsageError(f"unknown rule {code!r}; `fsdp2-lint rules` lists them")
    console(sys.stdout).print(Markdown(rule_markdown(rule)))


LSP_INSTALL_HINT = (
    "fsdp2-lint lsp needs pygls, which is not installed.\n"
    "Install the editor extra:  pip install 'fsdp2-lint[lsp]'"
)


@main.command(name="lsp")
def language_server() -> None:
    """Run the language server on standard input/output (editors start it; see README)."""
    if importlib.util.find_spec("pygls") is None:
        click.echo(LSP_INSTALL_HINT, err=True)
        sys.exit(2)
    from fsdp2_lint.lsp.server import serve

    serve()


from fsdp2_lint.runtime.command import confirm  # noqa: E402  (torch-free; registered last)
main.add_command(confirm)
