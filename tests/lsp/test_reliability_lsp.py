"""`fsdp2-lint lsp` against a misbehaving client and a hostile working directory (issue 13, D and F).

The server is driven over stdio with raw bytes, so that a test can get the framing wrong the way a
buggy client does: a ``Content-Length`` a few bytes off, a body that is not JSON. Every later
request must still be answered, and ``shutdown``/``exit`` must still end the process.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from samples import BAD_WITH_FIX as BAD

# the server as editors run it, without torch (the editor install has none)
SERVER = [
    sys.executable,
    "-c",
    "import sys; sys.modules['torch'] = None; from fsdp2_lint.cli import main; main()",
    "lsp",
]
WAIT_SECONDS = 30  # a generous bound for a busy 2-core CI machine; the replies end the waits long before
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def frame(body: bytes, length_error: int = 0) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) + length_error) + body


def encode(message: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def hover(request_id: int) -> bytes:
    """A request every server answers (null: the document is not open)."""
    params = {"textDocument": {"uri": "file:///nowhere/train.py"}, "position": {"line": 0, "character": 0}}
    return encode({"id": request_id, "method": "textDocument/hover", "params": params})


class RawClient:
    """An LSP client that writes whatever bytes a test gives it, and reads the server's messages."""

    def __init__(self, command: list[str], cwd: Path, stderr: Path):
        self.stderr = stderr
        with stderr.open("wb") as log:
            self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.received: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        while header := stdout.readline():  # the server's framing is right: Content-Length comes first
            length = int(header.partition(b":")[2])
            while stdout.readline().strip():
                pass
            self.received.put(json.loads(stdout.read(length)))
        self.received.put(None)  # the server closed its output

    def send(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def next_reply(self) -> dict:
        """The next response (the server's own messages are skipped)."""
        return self.next_message(lambda message: "method" not in message)

    def next_message(self, wanted) -> dict:
        while True:
            message = self.received.get(timeout=WAIT_SECONDS)
            assert message is not None, "the server closed its output:\n" + self.stderr.read_text()[-3000:]
            if wanted(message):
                return message

    def published(self, uri: str) -> list[str]:
        """The codes of the next diagnostics pushed for ``uri``."""
        published = self.next_message(
            lambda message: (
                message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri
            )
        )
        return [diagnostic["code"] for diagnostic in published["params"]["diagnostics"]]

    def open(self, path: Path, text: str) -> str:
        item = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": text}
        self.send(frame(encode({"method": "textDocument/didOpen", "params": {"textDocument": item}})))
        return item["uri"]

    def initialize(self, root: Path) -> None:
        self.send(
            frame(encode({"id": 0, "method": "initialize", "params": {"capabilities": {}, "rootUri": root.as_uri()}}))
        )
        assert "capabilities" in self.next_reply()["result"]
        self.send(frame(encode({"method": "initialized", "params": {}})))

    def shut_down(self) -> int:
        """``shutdown`` then ``exit``, with stdin left open (as a client that waits for the process):
        the exit status."""
        self.send(frame(encode({"id": 99, "method": "shutdown"})))
        assert self.next_reply() == {"jsonrpc": "2.0", "id": 99, "result": None}
        self.send(frame(encode({"method": "exit"})))
        return self.process.wait(WAIT_SECONDS)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


@pytest.fixture
def raw_client(tmp_path):
    client = RawClient(SERVER, tmp_path, tmp_path / "server.log")
    client.initialize(tmp_path)
    yield client
    client.close()


def failed(code: int, request_id: int | None = None) -> tuple[int | None, int]:
    return request_id, code


def reply_of(reply: dict) -> tuple:
    """A reply as (id, result) or (id, error code)."""
    return (reply["id"], reply["error"]["code"]) if "error" in reply else (reply["id"], reply["result"])


@pytest.mark.parametrize("length_error", [-3, -1, 1, 3], ids=lambda error: f"length{error:+d}")
def test_a_wrong_content_length_costs_one_message_and_later_requests_are_answered(raw_client, length_error):
    """Too short: the body is cut, and answered with a parse error. Too long: the body is whole,
    and answered as soon as it is, whether the client waits for the answer or has sent more."""
    misframed_answer = failed(PARSE_ERROR) if length_error < 0 else (1, None)
    raw_client.send(frame(hover(1), length_error))  # and waits for the answer
    assert reply_of(raw_client.next_reply()) == misframed_answer
    raw_client.send(frame(hover(2)))
    assert reply_of(raw_client.next_reply()) == (2, None)

    raw_client.send(frame(hover(1), length_error) + frame(hover(3)))  # sent with the next one
    assert reply_of(raw_client.next_reply()) == misframed_answer
    assert reply_of(raw_client.next_reply()) == (3, None)
    assert raw_client.shut_down() == 0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": ', failed(PARSE_ERROR)),
        (b"\xff\xfe not even text", failed(PARSE_ERROR)),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": "\xff"}', failed(PARSE_ERROR)),
        (b"", failed(PARSE_ERROR)),
        (b"[" * 100_000 + b"]" * 100_000, failed(PARSE_ERROR)),
        (b"[1, 2]", failed(INVALID_REQUEST)),
        (b'"just a string"', failed(INVALID_REQUEST)),
        (b'{"jsonrpc": "2.0"}', failed(INVALID_REQUEST)),
        (b'{"id": 1, "method": "textDocument/hover"}', failed(INVALID_REQUEST, 1)),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {}}', failed(INVALID_PARAMS, 1)),
    ],
    ids=[
        "cut-json",
        "binary",
        "invalid-utf8",
        "empty",
        "too-deep",
        "array",
        "string",
        "no-method",
        "no-version",
        "bad-params",
    ],
)
def test_a_message_that_is_not_a_json_rpc_request_gets_a_json_rpc_error_and_the_session_goes_on(
    raw_client, body, expected
):
    raw_client.send(frame(body))
    assert reply_of(raw_client.next_reply()) == expected
    raw_client.send(frame(hover(2)))
    assert reply_of(raw_client.next_reply()) == (2, None)
    assert raw_client.shut_down() == 0


def test_exit_without_shutdown_ends_the_server_with_status_1(tmp_path):
    client = RawClient(SERVER, tmp_path, tmp_path / "server.log")
    try:
        client.initialize(tmp_path)
        client.send(frame(encode({"method": "exit"})))
        assert client.process.wait(WAIT_SECONDS) == 1
    finally:
        client.close()


SHADOWED = ("signal", "socket", "threading", "pickle", "multiprocessing", "json", "tokenize", "pygls")
CONSOLE_SCRIPT = """\
import re
import sys
from fsdp2_lint.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""  # what pip writes for `fsdp2-lint`: run with this Python, it imports the fsdp2_lint under test


def shadowing_project(root: Path) -> Path:
    """A project whose root holds modules named like the standard library's and the linter's
    dependencies; each leaves a ``NAME.imported`` file when something imports it."""
    project = root / "project"
    project.mkdir()
    for name in SHADOWED:
        (project / f"{name}.py").write_text(f"open({str(project / name)!r} + '.imported', 'w').close()\n")
    return project


def imported(project: Path) -> list[str]:
    return sorted(path.stem for path in project.glob("*.imported"))


@pytest.mark.parametrize("launch", ["console-script", "python-m"])
def test_modules_in_the_editors_directory_are_never_imported(tmp_path, launch):
    """The server runs in a shadowing project: neither the server nor its lint process imports
    the project's modules, and linting works."""
    project = shadowing_project(tmp_path)
    script = tmp_path / "bin" / "fsdp2-lint"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT)
    command = (
        [sys.executable, str(script), "lsp"]
        if launch == "console-script"
        else [sys.executable, "-m", "fsdp2_lint", "lsp"]
    )
    client = RawClient(command, project, tmp_path / "server.log")
    try:
        client.initialize(project)
        found = client.published(client.open(project / "train.py", BAD))
        status = client.shut_down()
    finally:
        client.close()
    assert (imported(project), found, status) == ([], ["FSDP001", "FSDP003"], 0)


def test_python_m_fsdp2_lint_check_imports_nothing_from_the_working_directory(tmp_path):
    project = shadowing_project(tmp_path)
    (project / "train.py").write_text(BAD)
    command = [sys.executable, "-m", "fsdp2_lint", "check", "--output-format", "json", "train.py"]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True)
    assert (imported(project), result.returncode) == ([], 1), result.stderr
    assert [d["code"] for d in json.loads(result.stdout)] == ["FSDP001", "FSDP003"]
