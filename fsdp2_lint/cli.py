"""The ``fsdp2-lint`` command line."""

from __future__ import annotations

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
from fsdp2_lint.engine import raise_recursion_limit
from fsdp2_lint.output import console, write_json, write_text
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
@click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Report format."
)
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="pyproject.toml to use.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
def check(
    paths: tuple[Path, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    output_format: str,
    config: Path | None,
    isolated: bool,
) -> None:
    """Lint PATHS (files or directories; default: the current directory).

    Exit status: 0 when clean, 1 when anything is reported, 2 on usage or configuration errors.
    """
    raise_recursion_limit()
    selection = Selection(_codes(select) or None, _codes(ignore), _codes(extend_select))
    resolver = SettingsResolver(selection, config, isolated)
    diagnostics = []
    try:
        targets = list(paths) or [Path(".")]
        for target in targets:
            resolver.for_path(target)  # report configuration errors before any output
        for path in discover(targets, lambda p, is_dir: resolver.for_path(p, is_dir).is_excluded(p, is_dir)):
            diagnostics.extend(check_path(path, resolver.for_path(path), _display(path)))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    if output_format == "json":
        write_json(diagnostics, sys.stdout)
    else:
        write_text(diagnostics, console(sys.stdout))
    sys.exit(1 if diagnostics else 0)


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


def rule_markdown(rule: type[Rule]) -> str:
    """A rule's documentation: its docs, a bad and a good example from its tests, and the fix."""
    parts = [f"# {rule.code} {rule.name} ({rule.severity.value})", rule.summary, rule.docs.strip()]
    if rule.invalid:
        parts.append("## Example\n```python\n" + rule.invalid[0].strip() + "\n```")
    if rule.valid:
        parts.append("## Use instead\n```python\n" + rule.valid[0].strip() + "\n```")
    parts.append(f"## Fix\n{rule.hint}")
    evidence = f"`{rule.signature.evidence}`"
    if rule.signature.exception:
        evidence += f": {' or '.join(rule.signature.exception)} matching `{rule.signature.message}`"
    parts.append(f"## Runtime evidence (`fsdp2-lint confirm`)\n{evidence}. {rule.signature.note}".rstrip())
    return "\n\n".join(parts) + "\n"


from fsdp2_lint.runtime.command import confirm  # noqa: E402  (torch-free; registered last)
main.add_command(confirm)
