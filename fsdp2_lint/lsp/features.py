"""What the server answers, built from the engine's diagnostics: LSP diagnostics, hovers and code
actions. Pure functions of one document's text and lint results, so each is tested directly."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from fsdp2_lint.diagnostics import PARSE_ERROR, Applicability, Diagnostic, Fix, Related, Severity
from fsdp2_lint.lsp.text import DocumentText
from fsdp2_lint.output import PARSE_ERROR_SUMMARY
from fsdp2_lint.rule import Rule, all_rules

SOURCE = "fsdp2-lint"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
QUICK_FIX = types.CodeActionKind.QuickFix
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.fsdp2-lint"
# an existing list of codes after `noqa:` in a comment, which a new code extends
_NOQA_LIST = re.compile(r"#\s*noqa\s*:\s*[A-Za-z]+\d+(?:\s*,?\s*[A-Za-z]+\d+)*", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """An engine diagnostic with its LSP form, positioned in the text it was found in."""

    diagnostic: Diagnostic
    lsp: types.Diagnostic


# The text of the file a related location is in (None: unreadable), by the path the engine reports
TextOf = Callable[[str], DocumentText | None]


def findings(diagnostics: Sequence[Diagnostic], text: DocumentText, text_of: TextOf) -> tuple[Finding, ...]:
    return tuple(Finding(d, lsp_diagnostic(d, text, text_of)) for d in diagnostics)


def lsp_diagnostic(d: Diagnostic, text: DocumentText, text_of: TextOf) -> types.Diagnostic:
    rule = _rule(d.code)
    return types.Diagnostic(
        range=text.range(d.line, d.column, d.end_line, d.end_column),
        message=d.message,
        severity=SEVERITIES[d.severity],
        code=d.code,
        code_description=types.CodeDescription(href=rule.url()) if rule else None,
        source=SOURCE,
        related_information=[_related(r, text_of(r.path)) for r in d.related] or None,
    )


def _related(related: Related, text: DocumentText | None) -> types.DiagnosticRelatedInformation:
    """Another place that makes the diagnostic a misuse, in the file it is in (opened or not),
    positioned in that file's ``text`` (as the document's own ranges are); in characters when it
    cannot be read."""
    if text is not None:
        position = text.range(related.line, related.column, related.end_line, related.end_column)
    else:
        position = types.Range(
            types.Position(related.line - 1, related.column - 1),
            types.Position(related.end_line - 1, related.end_column - 1),
        )
    uri = Path(os.path.abspath(related.path)).as_uri()
    return types.DiagnosticRelatedInformation(types.Location(uri, position), related.message)


def at(found: Sequence[Finding], position: types.Position) -> list[Finding]:
    """The findings whose range holds ``position`` (its end included: the cursor just after a word)."""
    return [f for f in found if _before_or_at(f.lsp.range.start, position) and _before_or_at(position, f.lsp.range.end)]


def overlapping(found: Sequence[Finding], span: types.Range) -> list[Finding]:
    return [
        f for f in found if _before_or_at(f.lsp.range.start, span.end) and _before_or_at(span.start, f.lsp.range.end)
    ]


def _before_or_at(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) <= (b.line, b.character)


def hover(found: Sequence[Finding], markdown: bool) -> types.Hover | None:
    """What each diagnostic under the cursor means: its rule's summary, the fix and the docs."""
    if not found:
        return None
    parts = [_hover_text(f.diagnostic, markdown) for f in found]
    separator = "\n\n---\n\n" if markdown else "\n\n"
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(contents=types.MarkupContent(kind=kind, value=separator.join(parts)), range=found[0].lsp.range)


def _hover_text(d: Diagnostic, markdown: bool) -> str:
    rule = _rule(d.code)
    summary = rule.summary if rule else PARSE_ERROR_SUMMARY
    if not markdown:
        return f"{d.code} {d.name} ({d.severity.value}): {summary}\nhelp: {d.hint}" + (
            f"\n{rule.url()}" if rule else ""
        )
    text = f"**{d.code}** `{d.name}` ({d.severity.value}): {summary}\n\nhelp: {d.hint}"
    return text + (f"\n\n[{d.code} documentation]({rule.url()})" if rule else "")


def code_actions(
    found: Sequence[Finding],
    text: DocumentText,
    document: types.OptionalVersionedTextDocumentIdentifier,
    versioned_edits: bool,
) -> list[types.CodeAction]:
    """For each finding: the rule's fix where it has one, then a `# noqa` suppression.
    ``versioned_edits``: the client accepts ``documentChanges``, which it refuses to apply to a
    newer version of the document than the one the edits were computed for."""
    comment_columns = text.comment_columns()
    actions = []
    for finding in found:
        if finding.diagnostic.fix is not None:
            actions.append(_fix_action(finding, finding.diagnostic.fix, text, document, versioned_edits))
        noqa = _noqa_edit(finding.diagnostic, text, comment_columns)
        if noqa is not None:
            title = f"Suppress {finding.diagnostic.code} on this line (# noqa: {finding.diagnostic.code})"
            edit = _workspace_edit([noqa], document, versioned_edits)
            actions.append(types.CodeAction(title=title, kind=QUICK_FIX, diagnostics=[finding.lsp], edit=edit))
    return actions


def _fix_action(
    finding: Finding,
    fix: Fix,
    text: DocumentText,
    document: types.OptionalVersionedTextDocumentIdentifier,
    versioned_edits: bool,
) -> types.CodeAction:
    edits = [
        types.TextEdit(range=text.range(e.line, e.column, e.end_line, e.end_column), new_text=e.content)
        for e in fix.edits
    ]
    unsafe = "" if fix.applicability is Applicability.SAFE else " (unsafe)"
    return types.CodeAction(
        title=f"Fix {finding.diagnostic.code}: {fix.description}{unsafe}",
        kind=QUICK_FIX,
        diagnostics=[finding.lsp],
        edit=_workspace_edit(edits, document, versioned_edits),
        is_preferred=fix.applicability is Applicability.SAFE,
    )


def fix_all_action(
    text: DocumentText, fixed: str, document: types.OptionalVersionedTextDocumentIdentifier, versioned_edits: bool
) -> types.CodeAction:
    """Replace the whole text with ``fixed``: every safe fix applied, round after round."""
    last = len(text.lines)
    whole = types.Range(start=types.Position(line=0, character=0), end=text.position(last, len(text.lines[-1]) + 1))
    edit = _workspace_edit([types.TextEdit(range=whole, new_text=fixed)], document, versioned_edits)
    return types.CodeAction(title="Fix all fsdp2-lint problems with safe fixes", kind=FIX_ALL, edit=edit)


def _noqa_edit(d: Diagnostic, text: DocumentText, comment_columns: dict[int, int | None]) -> types.TextEdit | None:
    """Add ``d.code`` to the ``# noqa`` of the reported line (the line the engine reads it from),
    or a new ``# noqa`` at its end. None where it cannot work: FSDP000 is never suppressed, and a
    line that ends inside a string or with a backslash takes no comment."""
    if d.code == PARSE_ERROR or d.line not in comment_columns:
        return None
    line = text.lines[d.line - 1]
    comment = comment_columns[d.line]
    existing = _NOQA_LIST.search(line, comment) if comment is not None else None
    if existing is not None:
        where = text.position(d.line, existing.end() + 1)
        return types.TextEdit(range=types.Range(start=where, end=where), new_text=f", {d.code}")
    content_end = len(line.rstrip())
    start, end = text.position(d.line, content_end + 1), text.position(d.line, len(line) + 1)
    return types.TextEdit(range=types.Range(start=start, end=end), new_text=f"  # noqa: {d.code}")


def _workspace_edit(
    edits: list[types.TextEdit], document: types.OptionalVersionedTextDocumentIdentifier, versioned: bool
) -> types.WorkspaceEdit:
    if versioned:
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=document, edits=edits)])
    return types.WorkspaceEdit(changes={document.uri: edits})


def _rule(code: str) -> type[Rule] | None:
    return next((rule for rule in all_rules() if rule.code == code), None)


def wants_kind(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a code action request's ``only`` filter admits ``kind`` (kinds are hierarchical)."""
    return only is None or any(kind == wanted or kind.startswith(wanted + ".") for wanted in only)
