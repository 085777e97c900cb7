"""Report formats for ``fsdp2-lint check``: text (coloured on a terminal, plain when piped) and json."""

from __future__ import annotations

import json
from typing import Sequence, TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from fsdp2_lint.engine import Diagnostic
from fsdp2_lint.rule import Severity

STYLES = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow"}


def console(stream: TextIO) -> Console:
    return Console(file=stream, highlight=False, soft_wrap=True, emoji=False)


def write_text(diagnostics: Sequence[Diagnostic], out: Console, summary: bool = True) -> None:
    for diagnostic in diagnostics:
        out.print(_diagnostic_text(diagnostic))
    if summary:
        out.print(_summary(diagnostics))


def _diagnostic_text(d: Diagnostic) -> Text:
    text = Text()
    text.append(f"{d.path}:{d.line}:{d.column}:", style="bold")
    text.append(" ")
    text.append(d.code, style=STYLES[d.severity])
    text.append(f" {d.message}\n")
    if d.source_line:
        gutter = " " * len(str(d.line))
        line = d.source_line.expandtabs(4)
        start = cell_len(d.source_line[: d.column - 1].expandtabs(4))
        end_column = d.end_column if d.end_line == d.line else len(d.source_line) + 1
        width = max(1, cell_len(d.source_line[: end_column - 1].expandtabs(4)) - start)
        text.append(f"{gutter} |\n", style="blue")
        text.append(f"{d.line} | ", style="blue")
        text.append(f"{line.rstrip()}\n")
        text.append(f"{gutter} | ", style="blue")
        text.append(" " * start + "^" * width + "\n", style=STYLES[d.severity])
        text.append(f"{gutter} = ", style="blue")
    else:
        text.append("  = ", style="blue")
    text.append("help: ", style="bold cyan")
    text.append(d.hint)
    return text


def _summary(diagnostics: Sequence[Diagnostic]) -> Text:
    if not diagnostics:
        return Text("All checks passed!", style="bold green")
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    noun = "problem" if len(diagnostics) == 1 else "problems"
    parts = [f"{count} {word}{'' if count == 1 else 's'}" for count, word in ((errors, "error"), (warnings, "warning")) if count]
    return Text(f"Found {len(diagnostics)} {noun} ({', '.join(parts)}).", style="bold")


def write_json(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    json.dump([d.to_json() for d in diagnostics], stream, indent=2)
    stream.write("\n")
