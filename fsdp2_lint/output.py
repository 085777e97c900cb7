"""Report formats for ``fsdp2-lint check`` (Ruff's names and conventions).

``text`` and ``concise`` are for people (coloured on a terminal, plain when piped); ``json`` and
``json-lines`` are data; ``github``, ``gitlab``, ``junit`` and ``sarif`` are what CI systems read.
CI formats give paths relative to the enclosing git work tree, which is what those systems resolve
them against, so a report made from a subdirectory still points at the right files.

Every format is valid Unicode whatever the file names: a byte of a name that is not UTF-8 (which
the OS hands Python as a surrogate escape) is written as ``\\xNN`` (:func:`printable`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import quote

from fsdp2_lint import __version__
from fsdp2_lint.diagnostics import PARSE_ERROR, PARSE_ERROR_NAME, Applicability, Diagnostic, Severity
from fsdp2_lint.rule import Rule, all_rules

if TYPE_CHECKING:  # rich is imported by what styles text: a clean run into a pipe writes its one line as is
    from rich.console import Console
    from rich.text import Text

FORMATS = ("text", "concise", "json", "json-lines", "github", "gitlab", "junit", "sarif")
# How each CI format spells a severity: GitHub's workflow commands and SARIF have no "info" (a
# notice, a note), GitLab Code Quality has no "error"/"warning".
GITHUB_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
GITLAB_SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}
SARIF_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
STYLES = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold blue"}
HOMEPAGE = "https://github.com/fsdp2-lint/fsdp2-lint"
PARSE_ERROR_SUMMARY = "the file cannot be read or parsed, so nothing else in it was checked"
PARSE_ERROR_DESCRIPTION = (
    "Reported once for a file that cannot be read, decoded or parsed (the message gives the reason and "
    "position), or whose analysis failed inside fsdp2-lint; no rule ran on it. The other files are still linted."
)
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def printable(text: str) -> str:
    """``text`` with each byte the OS could not decode as UTF-8 (a surrogate escape) shown as ``\\xNN``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte (a Windows name): shown as \\udNNN
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


COLOR_CHOICES = ("auto", "always", "never")
_color = "auto"  # --color: `auto` colours a terminal only (NO_COLOR and FORCE_COLOR honoured)


@contextmanager
def colored(when: str) -> Iterator[None]:
    """Within the block, the consoles of :func:`console` colour ``always``, ``never``, or (``auto``)
    when they write to a terminal: ``--color``, as Ruff's."""
    global _color
    previous, _color = _color, when
    try:
        yield
    finally:
        _color = previous


def console(stream: TextIO) -> Console:
    from rich.console import Console

    if _color == "always":
        return Console(file=stream, highlight=False, soft_wrap=True, emoji=False, force_terminal=True,
                       color_system="standard", no_color=False)  # fmt: skip
    if _color == "never":
        return Console(file=stream, highlight=False, soft_wrap=True, emoji=False, color_system=None)
    return Console(file=stream, highlight=False, soft_wrap=True, emoji=False)


@dataclass(frozen=True)
class Fixing:
    """What the report says about fixes: ``unsafe`` when unsafe fixes are enabled (they count as
    applicable), ``applied`` how many diagnostics ``--fix`` fixed (None when not fixing)."""

    unsafe: bool = False
    applied: int | None = None

    def applicable(self, diagnostic: Diagnostic) -> bool:
        return diagnostic.fix is not None and (self.unsafe or diagnostic.fix.applicability is Applicability.SAFE)


def write_report(
    diagnostics: Sequence[Diagnostic],
    output_format: str,
    stream: TextIO,
    summary: bool = True,
    fixing: Fixing = Fixing(),
) -> None:
    """Write ``diagnostics`` in ``output_format``; ``summary`` adds the closing count lines to
    ``text`` and ``concise`` (``--quiet`` turns it off), which mark applicable fixes with ``[*]``."""
    diagnostics = [replace(d, path=printable(d.path)) for d in diagnostics]  # no format can write a surrogate
    if output_format in ("text", "concise") and not diagnostics and _unstyled(stream):
        if summary:  # what rich writes here
            stream.write(f"{_summary_words(diagnostics, fixing)[0]}\n")
        return
    if output_format == "text":
        write_text(diagnostics, console(stream), summary, fixing)
    elif output_format == "concise":
        write_concise(diagnostics, console(stream), summary, fixing)
    else:
        _DATA_WRITERS[output_format](diagnostics, stream)


# --- for people ---


def write_text(
    diagnostics: Sequence[Diagnostic], out: Console, summary: bool = True, fixing: Fixing = Fixing()
) -> None:
    for diagnostic in diagnostics:
        out.print(_diagnostic_text(diagnostic, fixing))
    if summary:
        _print_summary(diagnostics, out, fixing)


def _diagnostic_text(d: Diagnostic, fixing: Fixing = Fixing()) -> Text:
    from rich.cells import cell_len

    text = _location_and_code(d, fixing)
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


def write_concise(
    diagnostics: Sequence[Diagnostic], out: Console, summary: bool = True, fixing: Fixing = Fixing()
) -> None:
    """One line per diagnostic: ``path:line:column: CODE [*] message``."""
    for diagnostic in diagnostics:
        out.print(_location_and_code(diagnostic, fixing).append(f" {diagnostic.message}"))
    if summary:
        _print_summary(diagnostics, out, fixing)


def _location_and_code(d: Diagnostic, fixing: Fixing = Fixing()) -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"{d.path}:{d.place}:", style="bold")
    text.append(" ")
    text.append(d.code, style=STYLES[d.severity])
    if fixing.applicable(d):
        text.append(" [*]", style="bold cyan")
    return text


def _print_summary(diagnostics: Sequence[Diagnostic], out: Console, fixing: Fixing) -> None:
    out.print(_summary(diagnostics, fixing))
    available = _fixes_available(diagnostics, fixing)
    if available:
        out.print(available, markup=False)


def _summary(diagnostics: Sequence[Diagnostic], fixing: Fixing = Fixing()) -> Text:
    from rich.text import Text

    return Text(*_summary_words(diagnostics, fixing))


def _summary_words(diagnostics: Sequence[Diagnostic], fixing: Fixing = Fixing()) -> tuple[str, str]:
    """The summary line, and its style."""
    if fixing.applied:
        total = len(diagnostics) + fixing.applied
        counts = f"{fixing.applied} fixed, {len(diagnostics)} remaining"
        return f"Found {_count(total, 'problem')} ({counts}).", "bold"
    if not diagnostics:
        return "All checks passed!", "bold green"
    counts = [(sum(d.severity is severity for d in diagnostics), severity.value) for severity in Severity]
    parts = [_count(count, word) for count, word in counts if count]
    return f"Found {_count(len(diagnostics), 'problem')} ({', '.join(parts)}).", "bold"


def _unstyled(stream: TextIO) -> bool:
    """Would rich write to ``stream`` without styles (rich's ``Console.is_terminal`` is false: not a
    terminal, and neither TTY_COMPATIBLE=1 nor FORCE_COLOR says otherwise)? ``--color`` decides first."""
    if _color != "auto":
        return _color == "never"
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "0"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force == ""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream: rich takes it for no terminal
        return True


def _fixes_available(diagnostics: Sequence[Diagnostic], fixing: Fixing) -> str:
    """Ruff's line about the fixes left: how many ``--fix`` applies, how many need ``--unsafe-fixes``."""
    applicable = sum(fixing.applicable(d) for d in diagnostics)
    hidden = sum(d.fix is not None for d in diagnostics) - applicable
    note = f"{_count(hidden, 'hidden fix', 'hidden fixes')} can be enabled with the `--unsafe-fixes` option"
    if applicable:
        return f"[*] {applicable} fixable with the `--fix` option" + (f" ({note})." if hidden else ".")
    return f"No fixes available ({note})." if hidden else ""


def _count(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def write_fix_summary(fixed_by_file: Sequence[tuple[str, Sequence[Diagnostic]]], stream: TextIO, would: bool) -> None:
    """``--show-fixes``: per file (its displayed name and the diagnostics whose fixes were applied),
    how many diagnostics of each rule were fixed (Ruff's layout)."""
    fixed = [(display, diagnostics) for display, diagnostics in fixed_by_file if diagnostics]
    total = sum(len(diagnostics) for _, diagnostics in fixed)
    if not total:
        stream.write("No problems would be fixed.\n" if would else "No problems fixed.\n")
        return
    noun = "problem" if total == 1 else "problems"
    stream.write(f"{'Would fix' if would else 'Fixed'} {total} {noun}:\n")
    for display, diagnostics in fixed:
        stream.write(f"- {display}:\n")
        counts = Counter((d.code, d.name) for d in diagnostics)
        for (code, name), count in sorted(counts.items()):
            stream.write(f"    {count} × {code} ({name})\n")


def write_statistics(
    diagnostics: Sequence[Diagnostic],
    output_format: str,
    stream: TextIO,
    summary: bool = True,
    fixing: Fixing = Fixing(),
) -> None:
    """``--statistics``: how often each code was reported, most frequent first (Ruff's layout);
    ``[*]`` marks codes with a fix ``--fix`` applies."""
    import json  # the report formats' libraries load with their format: a clean text report needs none

    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.name for d in diagnostics}
    fixable = {d.code for d in diagnostics if fixing.applicable(d)}
    ranked = sorted(counts, key=lambda code: (-counts[code], code))
    if output_format == "json":
        rows = [{"code": c, "name": names[c], "count": counts[c], "fixable": c in fixable} for c in ranked]
        json.dump(rows, stream, indent=2)
        stream.write("\n")
        return
    width = len(str(max(counts.values(), default=0)))
    marker = (lambda code: "[*] " if code in fixable else "[ ] ") if fixable else (lambda code: "")
    for code in ranked:  # tab-separated for `cut`/`awk`: written directly, rich would expand the tabs
        stream.write(f"{counts[code]:>{width}}\t{code}\t{marker(code)}{names[code]}\n")
    if summary:
        console(stream).print(_summary(diagnostics, fixing))


# --- data ---


def write_json(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    import json

    json.dump([d.to_json() for d in diagnostics], stream, indent=2)
    stream.write("\n")


def write_json_lines(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    import json

    for diagnostic in diagnostics:
        stream.write(json.dumps(diagnostic.to_json()) + "\n")


# --- CI systems ---


def write_github(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    """GitHub Actions workflow commands: each diagnostic becomes an annotation on its line."""
    root = repository_root(Path.cwd())
    for d in diagnostics:
        properties = {
            "title": f"fsdp2-lint ({d.code})",
            "file": repository_path(d.path, root),
            "line": d.line,
            "col": d.column,
            "endLine": d.end_line,
            "endColumn": d.end_column,
        }
        fields = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
        data = _escape_data(f"{d.path}:{d.place}: {d.code} {d.message}")
        stream.write(f"::{GITHUB_LEVELS[d.severity]} {fields}::{data}\n")


def _in_cell(d: Diagnostic, separator: str = ": ") -> str:
    """``cell N: `` before a notebook diagnostic's message (its lines count in that cell), else nothing."""
    return "" if d.cell is None else f"cell {d.cell}{separator}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_gitlab(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    """GitLab Code Quality report (``artifacts:reports:codequality``)."""
    import json

    root = repository_root(Path.cwd())
    fingerprints = stable_fingerprints(diagnostics, root)
    report = [
        {
            "description": f"{d.code} {_in_cell(d)}{d.message}",
            "check_name": d.code,
            "fingerprint": fingerprint,
            "severity": GITLAB_SEVERITIES[d.severity],
            "location": {"path": repository_path(d.path, root), "lines": {"begin": d.line, "end": d.end_line}},
        }
        for d, fingerprint in zip(diagnostics, fingerprints, strict=True)
    ]
    json.dump(report, stream, indent=2)
    stream.write("\n")


def stable_fingerprints(diagnostics: Sequence[Diagnostic], root: Path) -> list[str]:
    """One fingerprint per diagnostic that survives edits elsewhere in the file: it hashes the
    code, the file and the reported line's text (not its number), plus the occurrence count of
    that triple, so identical lines in one file still get distinct fingerprints."""
    import hashlib

    seen: Counter[tuple[str, str, str]] = Counter()
    fingerprints = []
    for d in diagnostics:
        key = (d.code, repository_path(d.path, root), d.source_line.strip() or d.message)
        seen[key] += 1
        fingerprints.append(hashlib.sha256("\0".join((*key, str(seen[key]))).encode()).hexdigest())
    return fingerprints


def write_junit(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    """JUnit XML: one test suite per file, one test case per diagnostic, failed unless its severity
    is ``info`` (a passed case whose ``system-out`` says what it found)."""
    import xml.etree.ElementTree as ET  # the report formats' libraries load with their format

    failing = sum(d.severity.fails for d in diagnostics)
    suites = ET.Element("testsuites", name="fsdp2-lint", tests=str(max(1, len(diagnostics))),
                        failures=str(failing), errors="0")  # fmt: skip
    by_path: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    for path, found in by_path.items():
        suite = ET.SubElement(
            suites, "testsuite", name=path, tests=str(len(found)),
            failures=str(sum(d.severity.fails for d in found)), errors="0",
        )  # fmt: skip
        for d in found:
            case = ET.SubElement(suite, "testcase", name=f"fsdp2-lint.{d.code}", classname=path, file=path,
                                 line=str(d.line), column=str(d.column))  # fmt: skip
            text = f"{_in_cell(d, ', ')}line {d.line}, col {d.column}, {d.message}"
            if d.severity.fails:
                failure = ET.SubElement(case, "failure", message=d.message, type=d.code)
                failure.text = text
            else:
                ET.SubElement(case, "system-out").text = f"{d.severity.value}: {d.code} {text}"
    if not diagnostics:
        suite = ET.SubElement(suites, "testsuite", name="fsdp2-lint", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="No problems found", classname="fsdp2-lint")
    ET.indent(suites)
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n")


def write_sarif(diagnostics: Sequence[Diagnostic], stream: TextIO) -> None:
    """SARIF 2.1.0 for GitHub code scanning: every rule in ``tool.driver``, one result per diagnostic."""
    import json

    root = repository_root(Path.cwd())
    rules = [_sarif_parse_error_rule()] + [_sarif_rule(rule) for rule in all_rules()]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    fingerprints = stable_fingerprints(diagnostics, root)
    results = [
        _sarif_result(d, index[d.code], fingerprint, root)
        for d, fingerprint in zip(diagnostics, fingerprints, strict=True)
    ]
    run = {
        "tool": {"driver": {"name": "fsdp2-lint", "version": __version__, "informationUri": HOMEPAGE, "rules": rules}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",  # Diagnostic columns count characters
        "results": results,
    }
    json.dump({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, stream, indent=2)
    stream.write("\n")


def _sarif_rule(rule: type[Rule]) -> dict[str, object]:
    from fsdp2_lint.rule_docs import rule_markdown

    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.docs.strip(), "markdown": rule.docs.strip()},
        "help": {"text": rule.hint, "markdown": rule_markdown(rule)},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": SARIF_LEVELS[rule.severity]},
        "properties": {"tags": ["fsdp2", "correctness"]},
    }


def _sarif_parse_error_rule() -> dict[str, object]:
    return {
        "id": PARSE_ERROR,
        "name": PARSE_ERROR_NAME,
        "shortDescription": {"text": PARSE_ERROR_SUMMARY},
        "fullDescription": {"text": PARSE_ERROR_DESCRIPTION},
        "help": {"text": "fix the file so that Python can parse it"},
        "defaultConfiguration": {"level": "error"},
    }


def _sarif_result(d: Diagnostic, rule_index: int, fingerprint: str, root: Path) -> dict[str, object]:
    result: dict[str, object] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": SARIF_LEVELS[d.severity],
        "message": {"text": f"{_in_cell(d)}{d.message}\nhelp: {d.hint}"},
        "locations": [{"physicalLocation": _sarif_place(d.path, d.line, d.column, d.end_line, d.end_column, root)}],
        "partialFingerprints": {"fsdp2-lint/v1": fingerprint},
    }
    if d.related:
        result["relatedLocations"] = [
            {
                "id": number,
                "physicalLocation": _sarif_place(r.path, r.line, r.column, r.end_line, r.end_column, root),
                "message": {"text": r.message if r.cell is None else f"cell {r.cell}: {r.message}"},
            }
            for number, r in enumerate(d.related, start=1)
        ]
    return result


def _sarif_place(path: str, line: int, column: int, end_line: int, end_column: int, root: Path) -> dict[str, object]:
    shown = repository_path(path, root)
    if Path(shown).is_absolute():
        location: dict[str, str] = {"uri": Path(shown).as_uri()}
    else:
        location = {"uri": quote(shown), "uriBaseId": "%SRCROOT%"}
    region = {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}
    return {"artifactLocation": location, "region": region}


def repository_root(start: Path) -> Path:
    """The enclosing git work tree, or ``start`` outside one."""
    return next((folder for folder in (start, *start.parents) if (folder / ".git").exists()), start)


def repository_path(path: str, root: Path) -> str:
    """``path`` (as displayed, relative to the working directory) relative to ``root``, with ``/``
    separators; absolute when the file lies outside ``root``."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


_DATA_WRITERS: dict[str, Callable[[Sequence[Diagnostic], TextIO], None]] = {
    "json": write_json,
    "json-lines": write_json_lines,
    "github": write_github,
    "gitlab": write_gitlab,
    "junit": write_junit,
    "sarif": write_sarif,
}
