"""`fsdp2-lint lsp` driven over stdio by a real LSP client (pytest-lsp), as editors drive it.

Each client announces the capabilities of a real editor release: VS Code 1.65 (push diagnostics,
UTF-16 columns, versioned edits, file watching), Neovim 0.11 (pull diagnostics, UTF-8 columns, no
file watching) and Emacs 29 (push, UTF-32 columns); and VS Code 1.65's with pull and refresh added,
as today's VS Code has them. A second server has faults planted in its lints (lsp_faulty_server.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import pytest_lsp
from click.testing import CliRunner
from lsp_faulty_server import CRASH, HANG, RAISE, RULE_RAISES
from lsp_faulty_server import TIMEOUT_SECONDS as FAULT_TIMEOUT
from lsprotocol import types
from project_cases import MODEL, PARALLEL
from pygls.uris import to_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from samples import BAD_WITH_FIX as BAD
from samples import write

from fsdp2_lint.cli import main
from fsdp2_lint.diagnostics import Diagnostic, Related, Severity
from fsdp2_lint.lsp import features, server
from fsdp2_lint.lsp.text import DocumentText

# `fsdp2-lint lsp` with torch unimportable: the editor install (`fsdp2-lint[lsp]`) has no torch
BLOCKED = "import sys; sys.modules[{!r}] = None; from fsdp2_lint.cli import main; main()"
SERVER = [sys.executable, "-c", BLOCKED.format("torch"), "lsp"]
WAIT_SECONDS = 30  # a generous bound for a busy 2-core CI machine; events end the waits long before

GOOD = BAD.replace("opt = torch.optim.AdamW(model.parameters())\n", "").replace(
    "out = model.forward(batch)", "opt = torch.optim.AdamW(model.parameters())\nout = model(batch)"
)
FORWARD_LINE = "out = model.forward(batch)"
OPTIMIZER_LINE = "opt = torch.optim.AdamW(model.parameters())"
VSCODE = "visual-studio-code@v1.65.2"  # pushes, UTF-16 columns, versioned edits, watches files
NEOVIM = "neovim@v0.11.0"  # pulls, UTF-8 columns
EMACS = "emacs@v29.1"  # pushes, UTF-32 columns
VSCODE_PULL = "visual-studio-code@v1.65.2 + pull"  # as today's VS Code: pulls, and re-pulls when asked
PLAIN_HOVERS = "visual-studio-code@v1.65.2, plain-text hovers"  # as a client that renders no Markdown
ASYNC = pytest.mark.asyncio(loop_scope="module")


def editors(*names: str):
    """Run the test against a server initialized as each of these editors."""
    return pytest.mark.parametrize("client", names, indirect=True)


# One server per editor for the whole module (each test uses its own files): starting one costs
# seconds on a busy CI machine.
@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), scope="module", params=[VSCODE])
async def client(lsp_client: LanguageClient, request, tmp_path_factory):
    lsp_client.registered = asyncio.Queue()
    lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: lsp_client.registered.put_nowait(params))
    root = tmp_path_factory.mktemp("workspace").as_uri()
    params = types.InitializeParams(capabilities=capabilities(request.param), root_uri=root)
    lsp_client.server_capabilities = (await lsp_client.initialize_session(params)).capabilities
    yield
    await lsp_client.shutdown_session()


def capabilities(editor: str) -> types.ClientCapabilities:
    if editor not in (VSCODE_PULL, PLAIN_HOVERS):
        return client_capabilities(editor)
    adapted = client_capabilities(VSCODE)
    if editor == PLAIN_HOVERS:
        adapted.text_document.hover = types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText])
        return adapted
    adapted.text_document.diagnostic = types.DiagnosticClientCapabilities(related_document_support=False)
    adapted.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return adapted


def open_document(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    item = types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    return uri


def change_document(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def published(client: LanguageClient, uri: str, until=bool, replacing=None) -> Sequence[types.Diagnostic]:
    """The diagnostics pushed for ``uri`` once ``until(their codes)`` holds; with ``replacing``
    (an earlier result), only those of a later publication."""

    def current():
        return client.diagnostics.get(uri, replacing)

    async def wait() -> Sequence[types.Diagnostic]:
        while current() is replacing or not until(codes(current())):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return current()

    return await asyncio.wait_for(wait(), WAIT_SECONDS)


def codes(diagnostics) -> list[str]:
    return [d.code for d in diagnostics]


def cli_json(path: Path, text: str) -> list[dict]:
    """What `fsdp2-lint check` reports for ``text`` as the file ``path`` (named by an editor: the
    configured `exclude` applies to it, as it does for the pre-commit hook)."""
    command = ["check", "--output-format", "json", "--force-exclude", "--stdin-filename", str(path)]
    result = CliRunner().invoke(main, command, input=text.encode("utf-8", "surrogatepass"))
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def span(d: types.Diagnostic) -> tuple[int, int, int, int]:
    return d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character


def apply_edit(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    """Apply a workspace edit to ``text`` as an editor does (UTF-16 columns, edits in reverse)."""
    edits = [e for change in edit.document_changes or () for e in change.edits] or edit.changes[uri]
    lines, end = text.splitlines(keepends=True), len(text)

    def offset(position: types.Position) -> int:
        if position.line == len(lines):  # the empty line after a final newline
            return end
        line = lines[position.line].encode("utf-16-le")[: 2 * position.character].decode("utf-16-le")
        return sum(len(previous) for previous in lines[: position.line]) + len(line)

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


@ASYNC
@editors(VSCODE)
async def test_push_on_open_change_and_save_matches_the_cli_with_project_config(client: LanguageClient, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nper-file-ignores = { "scripts/*" = ["FSDP003"] }\n')
    path = write(tmp_path / "train.py", GOOD)  # on disk: clean; the editor's buffer is what counts
    uri = open_document(client, path, BAD)
    found = await published(client, uri)
    expected = [
        (d["code"], d["message"], d["line"] - 1, d["column"] - 1, d["end_line"] - 1, d["end_column"] - 1)
        for d in cli_json(path, BAD)
    ]
    assert [(d.code, d.message, *span(d)) for d in found] == expected
    assert codes(found) == ["FSDP001", "FSDP003"]
    assert found[0].source == "fsdp2-lint" and found[0].severity == types.DiagnosticSeverity.Error
    assert found[0].code_description.href.endswith("/docs/rules/FSDP001.md")
    assert client.server_capabilities.diagnostic_provider is None  # VS Code 1.65 cannot pull

    change_document(client, uri, BAD.replace("model.parameters())", "model.parameters())  # noqa: FSDP001"), 2)
    await published(client, uri, lambda found: found == ["FSDP003"])
    change_document(client, uri, GOOD, 3)
    await published(client, uri, lambda found: found == [])

    scripted = write(tmp_path / "scripts" / "train.py", BAD)  # per-file-ignores: FSDP003 is off here
    scripted_uri = open_document(client, scripted, BAD)
    before_save = await published(client, scripted_uri)
    assert codes(before_save) == ["FSDP001"]
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=scripted_uri))
    )
    assert codes(await published(client, scripted_uri, replacing=before_save)) == ["FSDP001"]


@ASYNC
@editors(VSCODE)
async def test_code_actions_fix_and_noqa_applied_by_the_client_clear_the_diagnostics(client: LanguageClient, tmp_path):
    uri = open_document(client, tmp_path / "train.py", BAD)
    forward = (await published(client, uri))[1]
    actions = await request_actions(client, uri, forward)
    titles = [action.title for action in actions]
    assert titles == [
        "Fix FSDP003: call the module instead of `.forward`",
        "Suppress FSDP003 on this line (# noqa: FSDP003)",
    ]
    fix, noqa = actions
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred and list(fix.diagnostics) == [forward]
    assert fix.edit.document_changes[0].text_document.version == 1  # VS Code takes versioned edits

    assert apply_edit(BAD, noqa.edit, uri).splitlines()[8] == FORWARD_LINE + "  # noqa: FSDP003"
    fixed = apply_edit(BAD, fix.edit, uri)
    assert fixed.splitlines()[8] == "out = model(batch)"
    change_document(client, uri, fixed, 2)
    (optimizer,) = await published(client, uri, lambda found: found == ["FSDP001"])

    *_, noqa = await request_actions(client, uri, optimizer, only=[types.CodeActionKind.QuickFix])
    assert noqa.title == "Suppress FSDP001 on this line (# noqa: FSDP001)"
    assert await request_actions(client, uri, optimizer, only=[types.CodeActionKind.Refactor]) is None
    change_document(client, uri, apply_edit(fixed, noqa.edit, uri), 3)
    await published(client, uri, lambda found: found == [])


@ASYNC
@editors(VSCODE)
async def test_an_unsafe_fix_is_offered_but_never_as_the_preferred_action(client: LanguageClient, tmp_path):
    uri = open_document(client, tmp_path / "train.py", BAD)
    optimizer, forward = await published(client, uri)
    [unsafe] = [
        action for action in await request_actions(client, uri, optimizer) if action.edit and "Fix" in action.title
    ]
    assert unsafe.title.endswith("(unsafe)") and not unsafe.is_preferred  # an editor applies a preferred one unasked
    [safe] = [action for action in await request_actions(client, uri, forward) if action.title.startswith("Fix")]
    assert safe.is_preferred


@ASYNC
@editors(VSCODE)
async def test_edits_in_quick_succession_are_linted_once_typing_pauses(client: LanguageClient, tmp_path):
    uri = open_document(client, tmp_path / "train.py", BAD)
    await published(client, uri)
    publications: list[list[str]] = []

    class Recording(dict):
        def __setitem__(self, key, value):
            if key == uri:
                publications.append(codes(value))
            super().__setitem__(key, value)

    seen = client.diagnostics
    client.diagnostics = Recording(seen)
    try:
        for version in range(2, 7):  # keystrokes well inside the debounce delay
            change_document(client, uri, GOOD if version == 6 else BAD, version)
        await published(client, uri, lambda found: found == [])
        await asyncio.sleep(server.DEBOUNCE_SECONDS * 5)  # room for any late publication to arrive
    finally:
        seen.update(client.diagnostics)
        client.diagnostics = seen
    assert publications == [[]]  # one publication, of the last text


async def request_actions(client: LanguageClient, uri: str, diagnostic: types.Diagnostic, only=None):
    context = types.CodeActionContext(diagnostics=[diagnostic], only=only)
    identifier = types.TextDocumentIdentifier(uri=uri)
    return await client.text_document_code_action_async(
        types.CodeActionParams(text_document=identifier, range=diagnostic.range, context=context)
    )


@ASYNC
@editors(VSCODE)
async def test_noqa_extends_an_existing_list_and_skips_lines_that_cannot_take_a_comment(
    client: LanguageClient, tmp_path
):
    text = BAD.replace(FORWARD_LINE, FORWARD_LINE + "  # noqa: E501").replace(
        "opt = torch.optim.AdamW(model.parameters())",
        "opt = torch.optim.AdamW(model.parameters()) \\\n    if True else None",
    )
    uri = open_document(client, tmp_path / "train.py", text)
    optimizer, forward = await published(client, uri)
    assert not [
        a for a in await request_actions(client, uri, optimizer) if a.title.startswith("Suppress")
    ]  # a comment after the backslash would end the code
    noqa = (await request_actions(client, uri, forward))[-1]
    assert apply_edit(text, noqa.edit, uri).splitlines()[9] == FORWARD_LINE + "  # noqa: E501, FSDP003"


@ASYNC
@editors(VSCODE)
async def test_noqa_goes_inside_a_list_followed_by_a_comment_and_over_trailing_whitespace(
    client: LanguageClient, tmp_path
):
    text = BAD.replace(FORWARD_LINE, FORWARD_LINE + "  #noqa: E501  # a long line").replace(
        OPTIMIZER_LINE, OPTIMIZER_LINE + " \t"
    )
    uri = open_document(client, tmp_path / "train.py", text)
    optimizer, forward = await published(client, uri)
    suppressed = apply_edit(text, (await request_actions(client, uri, optimizer))[-1].edit, uri)
    assert suppressed.splitlines()[4] == OPTIMIZER_LINE + "  # noqa: FSDP001"
    suppressed = apply_edit(text, (await request_actions(client, uri, forward))[-1].edit, uri)
    assert suppressed.splitlines()[8] == FORWARD_LINE + "  #noqa: E501, FSDP003  # a long line"


@ASYNC
@editors(VSCODE)
async def test_hover_on_a_diagnostic_shows_its_rule_summary(client: LanguageClient, tmp_path):
    document = types.TextDocumentIdentifier(uri=open_document(client, tmp_path / "train.py", BAD))
    optimizer, _ = await published(client, document.uri)
    shown = await client.text_document_hover_async(
        types.HoverParams(text_document=document, position=optimizer.range.end)
    )
    assert shown.contents.kind == types.MarkupKind.Markdown
    assert shown.contents.value.startswith(
        "**FSDP001** `optimizer-before-shard` (error): optimizer built from parameters"
    )
    assert "help: build the optimizer after the last `fully_shard`" in shown.contents.value
    assert shown.contents.value.endswith(f"\n\n[FSDP001 documentation]({optimizer.code_description.href})")
    assert shown.range == optimizer.range
    elsewhere = types.HoverParams(text_document=document, position=types.Position(line=0, character=0))
    assert await client.text_document_hover_async(elsewhere) is None


@ASYNC
@editors(PLAIN_HOVERS)
async def test_a_client_that_renders_no_markdown_gets_plain_text_hovers(client: LanguageClient, tmp_path):
    document = types.TextDocumentIdentifier(uri=open_document(client, tmp_path / "train.py", BAD))
    optimizer, _ = await published(client, document.uri)
    shown = await client.text_document_hover_async(
        types.HoverParams(text_document=document, position=optimizer.range.start)
    )
    assert shown.contents.kind == types.MarkupKind.PlainText
    summary, hint, link = shown.contents.value.split("\n")
    assert summary.startswith("FSDP001 optimizer-before-shard (error): optimizer built from parameters")
    assert hint.startswith("help: build the optimizer after the last `fully_shard`")
    assert link == optimizer.code_description.href


@ASYNC
@editors(VSCODE, NEOVIM, EMACS)
async def test_columns_follow_the_negotiated_position_encoding(client: LanguageClient, tmp_path):
    prefix = 'label = "π😀"; out = '
    document = types.TextDocumentIdentifier(
        uri=open_document(client, tmp_path / "train.py", BAD.replace(FORWARD_LINE, prefix + "model.forward(batch)"))
    )
    if client.capabilities.text_document.diagnostic:
        found = (
            await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
        ).items
    else:
        found = await published(client, document.uri)
    encoding = (client.capabilities.general.position_encodings or ["utf-16"])[0]
    units = {"utf-8": len(prefix.encode()), "utf-16": len(prefix.encode("utf-16-le")) // 2, "utf-32": len(prefix)}[
        encoding
    ]
    assert span(found[1]) == (8, units, 8, units + len("model.forward(batch)"))


@ASYNC
@editors(NEOVIM)
async def test_pull_client_gets_reports_and_no_pushes(client: LanguageClient, tmp_path):
    assert client.server_capabilities.diagnostic_provider.identifier == "fsdp2-lint"
    document = types.TextDocumentIdentifier(uri=open_document(client, tmp_path / "train.py", BAD))
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert report.kind == "full" and codes(report.items) == ["FSDP001", "FSDP003"]
    again = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=document, previous_result_id=report.result_id)
    )
    assert again.kind == "unchanged" and again.result_id == report.result_id
    change_document(client, document.uri, GOOD, 2)
    changed = await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=document, previous_result_id=report.result_id)
    )
    assert changed.kind == "full" and list(changed.items) == []
    assert client.diagnostics == {}  # a pull client is never pushed to: no diagnostic shows twice


@ASYNC
@editors(VSCODE)
async def test_configuration_changes_are_picked_up_from_the_watched_pyproject(client: LanguageClient, tmp_path):
    registration = await asyncio.wait_for(client.registered.get(), WAIT_SECONDS)
    assert [r.method for r in registration.registrations] == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    config = write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nignore = ["FSDP001"]\n')
    uri = open_document(client, tmp_path / "train.py", BAD)
    assert codes(await published(client, uri)) == ["FSDP003"]

    write(config, '[tool.fsdp2-lint]\nignore = ["FSDP00"]\nselct = 1\n')
    changed = types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]
    )
    client.workspace_did_change_watched_files(changed)
    await published(client, uri, lambda found: found == [])
    (message,) = [m for m in client.messages if "selct" in m.message]  # shown before the (empty) publication
    assert message.type == types.MessageType.Error and "unknown key(s) in [tool.fsdp2-lint]: selct" in message.message

    write(config, '[tool.fsdp2-lint]\nignore = ["FSDP003"]\n')
    client.workspace_did_change_watched_files(changed)
    assert codes(await published(client, uri, lambda found: found == ["FSDP001"])) == ["FSDP001"]


@ASYNC
@editors(VSCODE)
async def test_unparsable_document_gives_one_fsdp000_and_the_server_goes_on(client: LanguageClient, tmp_path):
    broken = open_document(client, tmp_path / "broken.py", "from torch.distributed.fsdp import fully_shard\ndef f(:\n")
    (parse_error,) = await published(client, broken)
    assert parse_error.code == "FSDP000" and parse_error.message.startswith("syntax error")
    assert parse_error.range.start.line == 1
    assert list(await request_actions(client, broken, parse_error)) == []  # a noqa comment cannot silence FSDP000
    shown = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=broken), position=parse_error.range.start)
    )
    assert shown.contents.value.startswith(  # no rule, so no documentation link
        "**FSDP000** `unreadable-file` (error): the file cannot be read or parsed, so nothing else in it was checked"
    )
    assert "documentation" not in shown.contents.value
    beyond = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=broken), position=types.Position(line=99, character=99)
    )
    assert await client.text_document_hover_async(beyond) is None

    untitled = "untitled:Untitled-1"  # never saved: no path, settings from the server's directory
    item = types.TextDocumentItem(uri=untitled, language_id="python", version=1, text=BAD)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    assert codes(await published(client, untitled)) == ["FSDP001", "FSDP003"]


def test_without_pygls_lsp_says_how_to_install_it():
    command = [sys.executable, "-c", BLOCKED.format("pygls"), "lsp"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 2 and "pip install 'fsdp2-lint[lsp]'" in result.stderr


NO_SYNC = textwrap.dedent(
    """\
    from torch.distributed.fsdp import fully_shard

    model = Net()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters())
    for batch in loader:
        with model.no_sync():
            model(batch).sum().backward()  # π😀"""
)  # no newline at the end: the fix's second edit runs to the end of the file


@ASYNC
@editors(VSCODE)
async def test_a_multi_line_fix_applied_by_the_client_is_the_rules_fix(client: LanguageClient, tmp_path):
    uri = open_document(client, tmp_path / "train.py", NO_SYNC)
    (no_sync,) = await published(client, uri)
    assert no_sync.code == "FSDP005"
    fix, _ = await request_actions(client, uri, no_sync)
    assert fix.title.startswith("Fix FSDP005: ")
    fixed = apply_edit(NO_SYNC, fix.edit, uri)
    assert fixed.split("for batch in loader:\n")[1] == textwrap.indent(
        "model.set_requires_gradient_sync(False)\ntry:\n    model(batch).sum().backward()  # π😀\n"
        "finally:\n    model.set_requires_gradient_sync(True)",
        "    ",
    )
    change_document(client, uri, fixed, 2)
    assert list(await published(client, uri, lambda found: "FSDP005" not in found)) == []


@ASYNC
@editors(VSCODE)
async def test_severity_follows_the_rule(client: LanguageClient, tmp_path):
    root_only = BAD.replace("    fully_shard(block)\n", "    pass\n").replace(FORWARD_LINE, "out = model(batch)")
    error, warning = await published(client, open_document(client, tmp_path / "train.py", root_only))
    assert (error.code, error.severity) == ("FSDP001", types.DiagnosticSeverity.Error)
    assert (warning.code, warning.severity) == ("FSDP034", types.DiagnosticSeverity.Warning)
    assert warning.code_description.href.endswith("/docs/rules/FSDP034.md")


@ASYNC
@editors(VSCODE)
async def test_files_the_project_excludes_get_no_diagnostics(client: LanguageClient, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nexclude = ["generated/"]\n')
    generated = tmp_path / "generated" / "train.py"
    assert list(await published(client, open_document(client, generated, BAD), until=lambda found: True)) == []
    assert cli_json(generated, BAD) == []
    assert codes(await published(client, open_document(client, tmp_path / "train.py", BAD))) == ["FSDP001", "FSDP003"]


@ASYNC
@editors(NEOVIM)
async def test_a_client_that_watches_no_files_still_gets_the_current_configuration(client: LanguageClient, tmp_path):
    config = write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nignore = ["FSDP001"]\n')
    document = types.TextDocumentIdentifier(uri=open_document(client, tmp_path / "train.py", BAD))
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert codes(report.items) == ["FSDP003"]
    write(config, '[tool.fsdp2-lint]\nignore = ["FSDP003"]\n')  # Neovim on Linux does not tell the server
    change_document(client, document.uri, BAD + "\n", 2)
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert codes(report.items) == ["FSDP001"]


@ASYNC
@editors(VSCODE)
async def test_garbage_huge_and_vanished_documents_get_diagnostics_and_the_server_goes_on(
    client: LanguageClient, tmp_path
):
    header = "from torch.distributed.fsdp import fully_shard\n"
    garbage = {
        "surrogate.py": header + 'name = "\udcff"\n',  # a lone surrogate: no encoding can save it
        "nul.py": header + 'name = "\x00"\n',
        "cookie.py": "# -*- coding: klingon -*-\n" + header,
        "latin.py": "# -*- coding: latin-1 -*-\n" + header + 'name = "😀"\n',  # text the declared codec cannot hold
    }
    for name, text in garbage.items():
        found = await published(client, open_document(client, tmp_path / name, text), until=lambda found: True)
        assert [(d.code, d.message) for d in found] == [
            (d["code"], d["message"]) for d in cli_json(tmp_path / name, text)
        ], name

    # so deeply nested that libcst's native parser overflows its stack (the CLI dies of SIGSEGV)
    nested = open_document(client, tmp_path / "nested.py", header + "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    assert codes(await published(client, nested)) == ["FSDP000"]

    huge = BAD + "".join(f"x{number} = {number}\n" for number in range(3000)) + FORWARD_LINE + "\n"
    found = await published(client, open_document(client, tmp_path / "huge.py", huge))
    assert [(d.code, d.range.start.line) for d in found] == [("FSDP001", 4), ("FSDP003", 8), ("FSDP003", 3010)]

    vanishing = write(tmp_path / "gone" / "train.py", BAD)
    uri = open_document(client, vanishing, BAD)
    before_save = await published(client, uri)
    shutil.rmtree(vanishing.parent)  # deleted (or moved away) while open, then saved
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert codes(await published(client, uri, replacing=before_save)) == ["FSDP001", "FSDP003"]


FAULTY_SERVER = [sys.executable, str(Path(__file__).parents[1] / "support" / "lsp_faulty_server.py")]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAULTY_SERVER), scope="module")
async def faulty_client(lsp_client: LanguageClient, tmp_path_factory):
    lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    root = tmp_path_factory.mktemp("faulty").as_uri()
    await lsp_client.initialize_session(types.InitializeParams(capabilities=client_capabilities(VSCODE), root_uri=root))
    yield
    await lsp_client.shutdown_session()


@ASYNC
async def test_a_lint_that_raises_crashes_or_hangs_costs_one_document_not_the_server(
    faulty_client: LanguageClient, tmp_path
):
    client = faulty_client
    expected = {
        RAISE: "fsdp2-lint failed on this file: RuntimeError: planted fault",
        CRASH: "fsdp2-lint crashed on this file (killed by SIGSEGV)",
        HANG: f"fsdp2-lint gave up on this file after {FAULT_TIMEOUT} seconds",
    }
    for number, (marker, message) in enumerate(expected.items()):
        uri = open_document(client, tmp_path / f"planted{number}.py", BAD + marker + "\n")
        (failed,) = await published(client, uri)
        assert (failed.code, failed.message, failed.range.start.line) == ("FSDP000", message, 0)

    uri = open_document(client, tmp_path / "rule.py", BAD + RULE_RAISES + "\n")
    rule_failed, optimizer = await published(client, uri)  # one rule's crash hides no other rule's finding
    assert rule_failed.message == "internal error in rule FSDP003: RuntimeError: planted rule fault"
    assert optimizer.code == "FSDP001"

    uri = open_document(client, tmp_path / "train.py", BAD)
    assert codes(await published(client, uri)) == ["FSDP001", "FSDP003"]


@ASYNC
@editors(VSCODE)
async def test_fix_all_applies_every_safe_fix_as_the_cli_does_when_asked_by_name(client: LanguageClient, tmp_path):
    assert features.FIX_ALL in client.server_capabilities.code_action_provider.code_action_kinds
    # FSDP003, FSDP005: safe; FSDP001: unsafe. No final newline: the text is replaced to its last character.
    text = BAD + "with model.no_sync():\n    model(batch).sum().backward()"
    path = tmp_path / "train.py"
    uri = open_document(client, path, text)
    optimizer, *_ = await published(client, uri)
    everything = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
    quick_fixes = await request_actions(client, uri, optimizer, only=None)
    # quick fixes only, not a fix-all on every cursor move
    assert quick_fixes and all(action.kind == types.CodeActionKind.QuickFix for action in quick_fixes)

    for only in ([types.CodeActionKind.SourceFixAll], [types.CodeActionKind.Source]):
        context = types.CodeActionContext(diagnostics=[], only=only)
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=everything, context=context
        )
        (fix_all,) = await client.text_document_code_action_async(params)
        assert fix_all.kind == "source.fixAll.fsdp2-lint"
    fixed = apply_edit(text, fix_all.edit, uri)
    cli = CliRunner().invoke(main, ["check", "--fix", "--stdin-filename", str(path)], input=text)
    assert fixed == cli.stdout and "out = model(batch)" in fixed and "set_requires_gradient_sync(True)" in fixed
    change_document(client, uri, fixed, 2)
    assert codes(await published(client, uri, lambda found: "FSDP003" not in found)) == ["FSDP001"]


@ASYNC
@editors(VSCODE_PULL)
async def test_a_pulling_client_is_asked_to_pull_again_when_the_configuration_changes(client: LanguageClient, tmp_path):
    await asyncio.wait_for(client.registered.get(), WAIT_SECONDS)  # the pyproject.toml watcher
    config = write(tmp_path / "pyproject.toml", '[tool.fsdp2-lint]\nignore = ["FSDP001"]\n')
    document = types.TextDocumentIdentifier(uri=open_document(client, tmp_path / "train.py", BAD))
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert codes(report.items) == ["FSDP003"]

    write(config, '[tool.fsdp2-lint]\nignore = ["FSDP003"]\n')
    changed = types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[changed]))
    await asyncio.wait_for(wait_until(lambda: client.diagnostic_refresh_count > 0), WAIT_SECONDS)
    again = types.DocumentDiagnosticParams(text_document=document, previous_result_id=report.result_id)
    report = await client.text_document_diagnostic_async(again)  # same text, new settings: a new report
    assert report.kind == "full" and codes(report.items) == ["FSDP001"]


async def wait_until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.05)


async def edit_back_and_forth_then_close(
    client: LanguageClient, edited: str, texts: tuple[str, str], watched: str, found_with_second: list[str]
) -> None:
    """Edit document ``edited`` to the first of ``texts`` (``watched`` then shows nothing), back to the
    second (``watched`` shows ``found_with_second``), then close it (``watched`` shows nothing)."""
    first, second = texts
    change_document(client, edited, first, 2)
    await published(client, watched, lambda found: found == [])
    change_document(client, edited, second, 3)
    await published(client, watched, lambda found: found == found_with_second)
    closed = types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=edited))
    client.text_document_did_close(closed)
    await published(client, watched, lambda found: found == [])


# A project whose train.py loads on rank 0 only and calls a helper that may shard: FSDP010 in
# train.py, its related location the helper's first `fully_shard` (in the helper's file).
LOADER = textwrap.dedent(
    """\
    import torch
    import torch.distributed as dist

    from trainer.parallel import shard_model


    def main(model):
        if dist.get_rank() == 0:
            model.load_state_dict(torch.load("pretrained.pt"))
        shard_model(model)
    """
)
SHARDING = textwrap.dedent(
    """\
    from torch.distributed.fsdp import fully_shard


    def shard_model(model):
        for layer in model.layers:
            label = "π😀"; fully_shard(layer)
        fully_shard(model)
        return model
    """
)
NOT_SHARDING = "def shard_model(model):\n    return model\n"
SHARD_PREFIX = '        label = "π😀"; '  # before the related `fully_shard(layer)`, on line 6


def loader_project(root: Path, helper_on_disk: str) -> tuple[Path, Path]:
    write(root / "pyproject.toml", "")
    write(root / "trainer" / "__init__.py", "")
    return write(root / "trainer" / "train.py", LOADER), write(root / "trainer" / "parallel.py", helper_on_disk)


def related_span(diagnostic: types.Diagnostic) -> tuple[Path, tuple[int, int, int, int]]:
    (related,) = diagnostic.related_information
    where = related.location.range
    path = Path(to_fs_path(related.location.uri)).resolve()
    return path, (where.start.line, where.start.character, where.end.line, where.end.character)


UTF16_START = len(SHARD_PREFIX.encode("utf-16-le")) // 2  # the emoji is two UTF-16 units, one character
SHARD_SPAN = (5, UTF16_START, 5, UTF16_START + len("fully_shard(layer)"))


@ASYNC
@editors(VSCODE)
async def test_an_open_helpers_unsaved_text_is_what_its_importers_lints_read(client: LanguageClient, tmp_path):
    train, parallel = loader_project(tmp_path, NOT_SHARDING)  # on disk, the helper shards nothing
    train_uri = open_document(client, train, LOADER)
    assert list(await published(client, train_uri, until=lambda found: True)) == []

    parallel_uri = open_document(client, parallel, SHARDING)  # unsaved: the buffer shards
    (loaded,) = await published(client, train_uri, lambda found: found == ["FSDP010"])
    assert "sharded at" in loaded.message and "parallel.py:6" in loaded.message
    assert related_span(loaded) == (parallel.resolve(), SHARD_SPAN)  # UTF-16 columns of the buffer's line

    # closed unsaved: the file again, which shards nothing
    await edit_back_and_forth_then_close(client, parallel_uri, (NOT_SHARDING, SHARDING), train_uri, ["FSDP010"])


@ASYNC
@editors(VSCODE)
async def test_a_related_location_in_a_file_not_open_has_the_clients_columns(client: LanguageClient, tmp_path):
    train, parallel = loader_project(tmp_path, SHARDING)
    (loaded,) = await published(client, open_document(client, train, LOADER))
    assert loaded.code == "FSDP010" and related_span(loaded) == (parallel.resolve(), SHARD_SPAN)


def test_a_related_location_in_a_file_that_cannot_be_read_is_given_in_characters(tmp_path):
    """A helper deleted between the lint and the reading of its text: no client columns can be
    counted, so the related location keeps the engine's, made 0-based, rather than being lost."""
    train, parallel = loader_project(tmp_path, SHARDING)
    column = len(SHARD_PREFIX) + 1
    related = Related(str(parallel), 6, column, 6, column + len("fully_shard(layer)"), "sharded here")
    load = LOADER.splitlines()[8]  # the engine's FSDP010, shortened
    loaded = Diagnostic(
        code="FSDP010", name="rank0-only-load", message="loaded on rank 0", hint="load on every rank",
        severity=Severity.ERROR, path=str(train), line=9, column=9, end_line=9, end_column=len(load) + 1,
        source_line=load, related=(related,),
    )  # fmt: skip
    shown = features.lsp_diagnostic(loaded, DocumentText(LOADER), text_of=lambda path: None)
    assert related_span(shown) == (parallel.resolve(), (5, column - 1, 5, column - 1 + len("fully_shard(layer)")))


@ASYNC
@editors(VSCODE_PULL)
async def test_a_pulling_client_is_asked_to_pull_again_when_an_open_helper_changes(client: LanguageClient, tmp_path):
    assert client.server_capabilities.diagnostic_provider.inter_file_dependencies
    train, parallel = loader_project(tmp_path, SHARDING)
    document = types.TextDocumentIdentifier(uri=open_document(client, train, LOADER))
    parallel_uri = open_document(client, parallel, SHARDING)
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert codes(report.items) == ["FSDP010"]

    refreshes = client.diagnostic_refresh_count
    change_document(client, parallel_uri, NOT_SHARDING, 2)
    await asyncio.wait_for(wait_until(lambda: client.diagnostic_refresh_count > refreshes), WAIT_SECONDS)
    again = types.DocumentDiagnosticParams(text_document=document, previous_result_id=report.result_id)
    report = await client.text_document_diagnostic_async(again)
    assert report.kind == "full" and list(report.items) == []


# train.py shards the model, then calls a checkpoint helper that is wrong on its own for a sharded
# model: FSDP004 is placed in checkpoint.py (line 5), whichever file was linted.
CHECKPOINT = "import torch\n\n\ndef save(model, path):\n    torch.save(model.state_dict(), path)\n"
SAVER = textwrap.dedent(
    """\
    from trainer.checkpoint import save
    from trainer.model import Model
    from trainer.parallel import shard_model


    def main():
        model = shard_model(Model())
        save(model, "ckpt.pt")
    """
)
NOT_SAVING_SHARDED = SAVER.replace("shard_model(Model())", "Model()")


def saver_project(root: Path) -> tuple[Path, Path]:
    write(root / "pyproject.toml", "")
    write(root / "trainer" / "__init__.py", "")
    write(root / "trainer" / "model.py", textwrap.dedent(MODEL).lstrip())
    write(root / "trainer" / "parallel.py", textwrap.dedent(PARALLEL).lstrip())
    return write(root / "trainer" / "train.py", SAVER), write(root / "trainer" / "checkpoint.py", CHECKPOINT)


@ASYNC
@editors(VSCODE)
async def test_a_finding_another_documents_lint_places_in_an_open_document_is_shown_there(
    client: LanguageClient, tmp_path
):
    train, checkpoint = saver_project(tmp_path)
    checkpoint_uri = open_document(client, checkpoint, CHECKPOINT)
    assert list(await published(client, checkpoint_uri, until=lambda found: True)) == []  # alone: nothing sharded

    train_uri = open_document(client, train, SAVER)
    (placed,) = await published(client, checkpoint_uri, lambda found: found == ["FSDP004"])
    assert span(placed)[0] == 4 and "parallel.py:6`" in placed.message  # torch.save; the sharding
    assert list(await published(client, train_uri, until=lambda found: True)) == []  # not shown twice

    # closed: its finder is gone
    await edit_back_and_forth_then_close(client, train_uri, (NOT_SAVING_SHARDED, SAVER), checkpoint_uri, ["FSDP004"])


@ASYNC
@editors(VSCODE_PULL)
async def test_a_pulling_client_gets_what_another_documents_lint_placed_in_a_document(client: LanguageClient, tmp_path):
    train, checkpoint = saver_project(tmp_path)
    checkpoint_document = types.TextDocumentIdentifier(uri=open_document(client, checkpoint, CHECKPOINT))
    train_document = types.TextDocumentIdentifier(uri=open_document(client, train, SAVER))
    alone = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(checkpoint_document))
    assert list(alone.items) == []

    refreshes = client.diagnostic_refresh_count
    report = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(train_document))
    assert list(report.items) == []
    await asyncio.wait_for(wait_until(lambda: client.diagnostic_refresh_count > refreshes), WAIT_SECONDS)
    again = types.DocumentDiagnosticParams(checkpoint_document, previous_result_id=alone.result_id)
    placed = await client.text_document_diagnostic_async(again)
    assert placed.kind == "full" and codes(placed.items) == ["FSDP004"] and span(placed.items[0])[0] == 4
