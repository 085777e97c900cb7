"""The fsdp2-lint language server (``fsdp2-lint lsp``, stdio).

Each document is linted with the CLI's own code path on the buffer's text, so the editor shows what
``fsdp2-lint check --force-exclude --stdin-filename FILE`` prints for the same text,
``[tool.fsdp2-lint]`` and ``# noqa`` included. Lints run one at a time in a child process (see
``worker``), at most once per document version, and every request and notification of that version
shares the result.

Diagnostics are pushed (``textDocument/publishDiagnostics``) on open, save and, debounced, on
change, unless the client declared pull support: then the server offers ``textDocument/diagnostic``,
the client asks, and nothing is pushed, so no editor shows a diagnostic twice.

A lint follows the document's imports into the project's other modules, reading every other open
document's unsaved text instead of its file. Each lint says which modules it read: when one of them
is edited, opened or closed, the open documents whose lints read it are linted again (pushed, or
the client is asked to pull again). A save changes no text a lint reads, so it re-lints no other
document. A finding a lint places in another open document (a helper wrong on its own, made a misuse
by what the linted file does) is shown in that document too, after its own lint's findings.

Messages are read by ``transport``: a client's framing mistake costs that message, not the session.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from fsdp2_lint import __version__
from fsdp2_lint.diagnostics import Applicability, Diagnostic
from fsdp2_lint.discovery import SUFFIXES
from fsdp2_lint.lsp import features, transport
from fsdp2_lint.lsp.text import DocumentText
from fsdp2_lint.lsp.worker import LintWorker

DEBOUNCE_SECONDS = 0.1
CONFIG_FILE = "pyproject.toml"
WATCHER_ID = "fsdp2-lint-configuration"
logger = logging.getLogger(__name__)
Placed = Mapping[Path, tuple[features.Finding, ...]]  # findings a lint placed in other files, by resolved path


@dataclass(frozen=True)
class Analysis:
    """The lint of one version of a document."""

    version: int | None
    result_id: str
    text: DocumentText
    found: tuple[features.Finding, ...]
    config_error: str | None = None
    reads: frozenset[Path] = frozenset()  # the project modules the lint read (resolved paths)
    elsewhere: Placed = field(default_factory=dict)  # what it found in other open documents

    @property
    def lsp_diagnostics(self) -> list[types.Diagnostic]:
        return [finding.lsp for finding in self.found]


@dataclass(frozen=True)
class _Pending:
    version: int | None
    source: str
    result: asyncio.Future[Analysis]


class Fsdp2LintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fsdp2-lint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.worker = LintWorker()
        self._analyses: dict[str, _Pending] = {}
        self._debounced: dict[str, asyncio.Task[None]] = {}
        self._linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsdp2-lint")
        self._result_ids = itertools.count(1)
        self._shown_config_error: str | None = None
        self._invalidations: dict[str, int] = {}  # per document: how often a module its lint read changed
        self._refresh: asyncio.Task[None] | None = None
        self._placed: dict[str, Placed] = {}  # per document: what its lint found in other open documents
        self._placed_version = 0  # counts changes to _placed: part of a pulled report's id

    def capability(self, field: str) -> object:
        return get_capability(self.client_capabilities, field, None)

    @property
    def pulls(self) -> bool:
        """Whether the client asks for diagnostics itself (LSP 3.17 pull model)."""
        return self.capability("text_document.diagnostic") is not None

    def open_python_document(self, uri: str) -> TextDocument | None:
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        is_python = document.language_id == "python" or PurePosixPath(urlparse(uri).path).suffix in SUFFIXES
        return document if is_python else None

    async def analysis(self, document: TextDocument) -> Analysis:
        """The lint of the document's current text: run once per version and shared by every caller
        (shielded: a cancelled request leaves it running for the others). A version edited again
        before its turn on the worker is skipped, and its callers get the newer version's lint."""
        while True:
            pending = self._analyses.get(document.uri)
            if pending is None or pending.version != document.version or pending.source != document.source:
                pending = self._start_analysis(document)
            result = await asyncio.shield(pending.result)
            if result is not None:
                return result
            if self._analyses.get(document.uri) is pending:
                del self._analyses[document.uri]  # skipped: never serve it again
            document = self.workspace.text_documents.get(document.uri, document)

    def _start_analysis(self, document: TextDocument) -> _Pending:
        uri, version, worker = document.uri, document.version, self.worker
        text = DocumentText(document.source, self.workspace.position_encoding)
        others = self.other_files(uri)
        result_id = str(next(self._result_ids))
        invalidations = self._invalidations.get(uri, 0)

        def run() -> Analysis | None:
            current = self.workspace.text_documents.get(uri)
            if current is not None and current.version != version:
                return None  # superseded while queued
            if self._invalidations.get(uri, 0) != invalidations:
                return None  # a module it would read changed while queued
            return analyse(uri, version, text, others, worker, result_id)

        pending = _Pending(version, document.source, asyncio.get_running_loop().run_in_executor(self._linter, run))
        self._analyses[uri] = pending
        return pending

    def other_files(self, uri: str) -> dict[Path, DocumentText]:
        """The text of every other open Python document that is a file: what a lint of ``uri``
        reads instead of those files."""
        return {
            document_path(other): DocumentText(document.source, self.workspace.position_encoding)
            for other in self.workspace.text_documents
            if other != uri and is_file(other) and (document := self.open_python_document(other)) is not None
        }

    def relint_readers(self, uri: str) -> None:
        """The text of ``uri`` changed for the other documents' lints (edited, opened, or closed
        back to its file): the lints that read it, or may have (not finished), are dropped, and
        those documents linted again."""
        path = real_path(uri)
        if path is None:
            return
        readers = [other for other, pending in self._analyses.items() if other != uri and _may_read(pending, path)]
        for reader in readers:
            del self._analyses[reader]
            self._invalidations[reader] = self._invalidations.get(reader, 0) + 1
        self.outdated(readers, DEBOUNCE_SECONDS)

    def outdated(self, uris: list[str], delay: float) -> None:
        """The diagnostics shown for ``uris`` are out of date: publish them again (or have the client
        pull again) after ``delay`` seconds."""
        if uris and not self.pulls:
            for uri in uris:
                self.schedule_publish(uri, delay)
        elif uris and self.capability("workspace.diagnostics.refresh_support"):
            self.schedule_refresh(delay)

    def place(self, uri: str, elsewhere: Placed) -> None:
        """Record what the lint of ``uri`` found in other open documents; those whose share changed
        are shown again."""
        before = self._placed.pop(uri, {})
        if elsewhere:
            self._placed[uri] = elsewhere
        changed = {path for path in before.keys() | elsewhere.keys() if _shown(before, path) != _shown(elsewhere, path)}
        if not changed:
            return
        self._placed_version += 1
        self.outdated(
            [other for other in self.workspace.text_documents if other != uri and real_path(other) in changed], 0
        )

    def diagnostics(self, uri: str, analysis: Analysis) -> list[types.Diagnostic]:
        """The document's own findings, then those other documents' lints placed in it (each once)."""
        shown = analysis.lsp_diagnostics
        path = real_path(uri)
        for other, placed in self._placed.items():
            if other != uri:
                shown.extend(diagnostic for diagnostic in _shown(placed, path) if diagnostic not in shown)
        return shown

    def report_id(self, uri: str, analysis: Analysis) -> str:
        """A pulled report's id: the lint's, and the version of what others placed in it, if anything."""
        path = real_path(uri)
        placed = any(path in placed for other, placed in self._placed.items() if other != uri)
        return f"{analysis.result_id}.{self._placed_version}" if placed else analysis.result_id

    def schedule_refresh(self, delay: float) -> None:
        """Ask the client to pull every document again after ``delay`` seconds without a newer ask."""
        if self._refresh is not None:
            self._refresh.cancel()
        self._refresh = asyncio.ensure_future(self._refresh_after(delay))

    async def _refresh_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self.workspace_diagnostic_refresh(None)

    async def fixed(self, uri: str, text: DocumentText) -> str | None:
        """``text`` with every safe fix applied (None: nothing to fix), on the linting thread."""
        source = text.to_bytes()
        return await asyncio.get_running_loop().run_in_executor(
            self._linter, self.worker.fix, document_path(uri), source
        )

    def schedule_publish(self, uri: str, delay: float) -> None:
        """Publish the document's diagnostics after ``delay`` seconds without a newer schedule."""
        previous = self._debounced.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self._debounced[uri] = asyncio.ensure_future(self._publish_after(uri, delay))

    async def _publish_after(self, uri: str, delay: float) -> None:
        await asyncio.sleep(delay)
        try:
            await self.publish(uri)
        except Exception as error:  # a bug of ours must cost one document's result, not the session
            logger.exception("fsdp2-lint failed on %s", uri)
            message = f"fsdp2-lint failed on {uri}: {type(error).__name__}: {error}"
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    async def publish(self, uri: str) -> None:
        document = self.open_python_document(uri)
        if document is None:
            return
        analysis = await self.analysis(document)
        if self.workspace.text_documents.get(uri) is not document or document.version != analysis.version:
            return  # closed or edited meanwhile: the newer version publishes its own
        self.surface_config_error(analysis.config_error)
        self.place(uri, analysis.elsewhere)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, version=analysis.version, diagnostics=self.diagnostics(uri, analysis)
            )
        )

    def forget(self, uri: str) -> None:
        pending = self._debounced.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._analyses.pop(uri, None)
        self.place(uri, {})

    def configuration_changed(self) -> None:
        """A pyproject.toml changed: lint every open document again (each lint reads the settings)."""
        self._analyses.clear()
        if not self.pulls:
            for uri in list(self.workspace.text_documents):
                self.schedule_publish(uri, 0)
        elif self.capability("workspace.diagnostics.refresh_support"):
            self.workspace_diagnostic_refresh(None)

    def surface_config_error(self, error: str | None) -> None:
        """Show a configuration error once (the CLI exits 2 on it; here no diagnostics are shown)."""
        if error is not None and error != self._shown_config_error:
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=f"fsdp2-lint: {error}")
            )
        self._shown_config_error = error


def _shown(placed: Placed, path: Path | None) -> list[types.Diagnostic]:
    return [finding.lsp for finding in placed.get(path, ())] if path is not None else []


def _may_read(pending: _Pending, path: Path) -> bool:
    """Whether the lint read ``path``, or may have: it has not finished, or failed."""
    result = pending.result
    if not result.done() or result.cancelled() or result.exception() is not None:
        return True
    return result.result() is None or path in result.result().reads


def analyse(
    uri: str,
    version: int | None,
    text: DocumentText,
    others: dict[Path, DocumentText],
    worker: LintWorker,
    result_id: str,
) -> Analysis:
    """Lint one version of a document (on the linting thread), with the other open documents'
    texts (``others``) instead of their files. A document never saved has no path: its settings
    come from the server's working directory."""
    path = document_path(uri)
    result = worker.lint(path, text.to_bytes(), {other: other_text.to_bytes() for other, other_text in others.items()})
    texts = {Path(os.path.realpath(other)): other_text for other, other_text in others.items()}
    texts[Path(os.path.realpath(path))] = text

    def text_of(reported: str) -> DocumentText | None:
        """The text a related location's columns count in: an open document's, else its file's."""
        real = Path(os.path.realpath(reported))
        if real not in texts:
            texts[real] = file_text(real, text.encoding)
        return texts[real]

    own = str(path)
    found = features.findings([d for d in result.diagnostics if d.path == own], text, text_of)
    elsewhere: dict[Path, list[Diagnostic]] = {}
    for diagnostic in result.diagnostics:
        real = Path(os.path.realpath(diagnostic.path))
        if diagnostic.path != own and real in texts:  # placed in another open document
            elsewhere.setdefault(real, []).append(diagnostic)
    placed = {real: features.findings(there, texts[real], text_of) for real, there in elsewhere.items()}
    return Analysis(version, result_id, text, found, result.config_error, result.reads, placed)


def file_text(path: Path, encoding: str) -> DocumentText | None:
    try:
        return DocumentText.decoded(path.read_bytes(), encoding)
    except OSError:
        return None


def real_path(uri: str) -> Path | None:
    """The file a document is, links resolved; None for one that is no file."""
    return Path(os.path.realpath(document_path(uri))) if is_file(uri) else None


def is_file(uri: str) -> bool:
    return urlparse(uri).scheme == "file"


def document_path(uri: str) -> Path:
    file_path = to_fs_path(uri)
    return Path(file_path) if file_path else Path.cwd() / PurePosixPath(urlparse(uri).path).name


server = Fsdp2LintServer()


@server.feature(types.INITIALIZE)
def initialize(ls: Fsdp2LintServer, params: types.InitializeParams) -> None:
    """Offer pull diagnostics only to clients that pull: one that pulled from a server it also
    expects pushes from would show every diagnostic twice."""
    if ls.pulls:
        options = types.DiagnosticOptions(
            identifier="fsdp2-lint", inter_file_dependencies=True, workspace_diagnostics=False
        )
        ls.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, options)(pull_diagnostics)


@server.feature(types.INITIALIZED)
async def initialized(ls: Fsdp2LintServer, params: types.InitializedParams) -> None:
    ls.worker.start()  # its imports overlap the client's first requests
    if not ls.capability("workspace.did_change_watched_files.dynamic_registration"):
        return  # the client cannot watch files for us: each lint reads the configuration anyway
    watcher = types.FileSystemWatcher(glob_pattern=f"**/{CONFIG_FILE}")
    registration = types.Registration(
        id=WATCHER_ID,
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[watcher]),
    )
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
    except Exception as error:  # declared but refused: we still lint, with the settings read at startup
        logger.warning("the client refused to watch %s: %s", CONFIG_FILE, error)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: Fsdp2LintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)
    ls.relint_readers(params.text_document.uri)
    if not ls.pulls:
        ls.schedule_publish(params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: Fsdp2LintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.relint_readers(params.text_document.uri)
    if not ls.pulls:
        ls.schedule_publish(params.text_document.uri, DEBOUNCE_SECONDS)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: Fsdp2LintServer, params: types.DidSaveTextDocumentParams) -> None:
    if not ls.pulls:
        ls.schedule_publish(params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: Fsdp2LintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)
    ls.relint_readers(params.text_document.uri)
    if not ls.pulls:
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files_changed(ls: Fsdp2LintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(PurePosixPath(urlparse(change.uri).path).name == CONFIG_FILE for change in params.changes):
        ls.configuration_changed()


async def pull_diagnostics(
    ls: Fsdp2LintServer, params: types.DocumentDiagnosticParams
) -> types.DocumentDiagnosticReport:
    document = ls.open_python_document(params.text_document.uri)
    if document is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    uri = params.text_document.uri
    analysis = await ls.analysis(document)
    ls.surface_config_error(analysis.config_error)
    ls.place(uri, analysis.elsewhere)
    result_id = ls.report_id(uri, analysis)
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=ls.diagnostics(uri, analysis), result_id=result_id)


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: Fsdp2LintServer, params: types.HoverParams) -> types.Hover | None:
    document = ls.open_python_document(params.text_document.uri)
    if document is None:
        return None
    analysis = await ls.analysis(document)
    formats = ls.capability("text_document.hover.content_format") or [types.MarkupKind.Markdown]
    return features.hover(features.at(analysis.found, params.position), types.MarkupKind.Markdown in formats)


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[features.QUICK_FIX, features.FIX_ALL], resolve_provider=False),
)
async def code_action(ls: Fsdp2LintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    """Quick fixes for the diagnostics in the range; "fix all" (every safe fix, as `--fix` applies
    them) only when the client asks for that kind by name (VS Code's `editor.codeActionsOnSave`, its
    Source Action menu): computing it lints the file again, too slow for every cursor move."""
    only = params.context.only
    document = ls.open_python_document(params.text_document.uri)
    quick_fixes, fix_all = (
        features.wants_kind(only, features.QUICK_FIX),
        only is not None and features.wants_kind(only, features.FIX_ALL),
    )
    if document is None or not (quick_fixes or fix_all):
        return None
    analysis = await ls.analysis(document)
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=analysis.version)
    versioned = bool(ls.capability("workspace.workspace_edit.document_changes"))
    actions = []
    if quick_fixes:
        in_range = features.overlapping(analysis.found, params.range)
        actions += features.code_actions(in_range, analysis.text, identifier, versioned)
    if fix_all and any(
        f.diagnostic.fix is not None and f.diagnostic.fix.applicability is Applicability.SAFE for f in analysis.found
    ):
        fixed = await ls.fixed(document.uri, analysis.text)
        if fixed is not None:
            actions.append(features.fix_all_action(analysis.text, fixed, identifier, versioned))
    return actions


def serve() -> None:
    """Speak LSP on stdin/stdout until the client exits."""
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream
    transport.serve(server, sys.stdin.buffer, protocol_out)
