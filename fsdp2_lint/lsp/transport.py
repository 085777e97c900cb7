"""The server's end of the stdio connection, robust to a client that frames messages wrongly.

A message is a ``Content-Length: N`` header (other headers may follow it), a blank line, then N
bytes of JSON. pygls's reader trusts N: a length a few bytes off glues every later header onto a
body, and from then on no request is answered and ``shutdown``/``exit`` are ignored. Here a body
that holds an object (every JSON-RPC message is one) ends where the object closes, and the stream
resynchronises on the next header:

- N too long: the message is handled as soon as its closing brace arrives (the client may be
  waiting for the answer), and what follows it is read as the next message;
- N too short, N not a number, or a body that is not JSON: the client gets a JSON-RPC parse error
  (-32700, id null), and what follows up to the next header is skipped.

Resynchronising on a header cannot be fooled by a message's content: a header line ends in CR LF,
and a JSON text holds no raw control characters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO

from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.io_ import StdoutWriter
from pygls.protocol import JsonRPCProtocol
from pygls.server import JsonRPCServer

LENGTH_HEADER = re.compile(rb"content-length:([^\r\n]{0,64})\r?\n", re.IGNORECASE)
TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # a header's name (RFC 7230)
OTHER_HEADER = re.compile(TOKEN + rb":[^\r\n]*\r?\n")
PARTIAL_HEADER = re.compile(rb"(?:" + TOKEN + rb"(?::[^\r\n]*)?)?\r?")  # a header line or the blank line, yet to end
HEADERS_END = re.compile(rb"\r?\n")
LONGEST_HEADER_LINE = 256  # what may still grow into a header while no header is complete
STRING_PART = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # up to a closing quote or a final backslash
OUTSIDE_STRINGS = re.compile(rb'[^"\[\]{}]*')
QUOTE, BACKSLASH, OPENING = ord('"'), ord("\\"), b"[{"
READ_SIZE = 1 << 16
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unreadable:
    """What came where a message should be: not one JSON value in UTF-8 (nested no deeper than
    Python's recursion limit), or no blank line after the header."""

    reason: str


class _Incomplete:
    """The buffer ends inside a message: wait for more bytes."""


INCOMPLETE = _Incomplete()


class MessageStream:
    """Splits the bytes a client sends into its messages (the decoded JSON values), whatever the
    chunks the bytes arrive in."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scan = _ValueScan()  # of the body at the front of the buffer

    def feed(self, data: bytes) -> list[Any | Unreadable]:
        """The messages completed by ``data``."""
        self._buffer += data
        messages = []
        while (message := self._next()) is not INCOMPLETE:
            messages.append(message)
        return messages

    def _next(self) -> Any | Unreadable | _Incomplete:
        header = LENGTH_HEADER.search(self._buffer)
        if header is None:
            del self._buffer[: max(0, len(self._buffer) - LONGEST_HEADER_LINE)]
            return INCOMPLETE
        declared, header_size = header.group(1).strip(b" \t"), header.end() - header.start()
        del self._buffer[: header.start()]  # the rest of a misframed message: already answered
        if not declared.isdigit():
            del self._buffer[:header_size]
            return Unreadable(f"Content-Length is not a number: {declared.decode('latin-1')!r}")
        length = int(declared)
        body_start = self._body_start(header_size)
        if body_start is INCOMPLETE:
            return INCOMPLETE
        if body_start is None:
            del self._buffer[:header_size]
            return Unreadable("no blank line after the Content-Length header")
        arrived = min(len(self._buffer), body_start + length)
        body_end = self._scan.value_end(self._buffer, body_start, arrived)
        if body_end is None and arrived < body_start + length:
            return INCOMPLETE
        if body_end is None:  # cut short, or not an object or array: the header's length it is
            body_end = body_start + length
        message = _decode(self._buffer[body_start:body_end])
        self._scan = _ValueScan()
        # after an unreadable body, resynchronise within it: a length too long takes in the next header
        del self._buffer[: body_start if isinstance(message, Unreadable) else body_end]
        return message

    def _body_start(self, position: int) -> int | None | _Incomplete:
        """Where the body starts after the headers from ``position``; None: no blank line follows
        the headers."""
        while True:
            if end := HEADERS_END.match(self._buffer, position):
                return end.end()
            if line := OTHER_HEADER.match(self._buffer, position):
                position = line.end()
                continue
            rest = self._buffer[position : position + LONGEST_HEADER_LINE]
            may_grow = len(rest) < LONGEST_HEADER_LINE and PARTIAL_HEADER.fullmatch(rest)
            return INCOMPLETE if may_grow else None


class _ValueScan:
    """Follows a body's brackets and strings as its bytes arrive, each byte once, to find where the
    object or array it holds ends: a body longer than its header says is read as soon as it is whole
    (its client may be waiting for the answer), not when the client sends more."""

    def __init__(self) -> None:
        self.followed = 0  # bytes of the body looked at so far
        self.depth = 0
        self.in_string = False

    def value_end(self, buffer: bytearray, start: int, stop: int) -> int | None:
        """Where the object or array of the body at ``start`` ends (just past it), once the bytes up
        to ``stop`` hold its end; None until then, and for a body of another JSON type."""
        position = start + self.followed
        while position < stop:
            if self.in_string:
                position = STRING_PART.match(buffer, position, stop).end()
                if position == stop or buffer[position] == BACKSLASH:  # cut inside the string
                    break
                self.in_string = False
            else:
                position = OUTSIDE_STRINGS.match(buffer, position, stop).end()
                if position == stop:
                    break
                if buffer[position] == QUOTE:
                    self.in_string = True
                else:
                    self.depth += 1 if buffer[position] in OPENING else -1
                    if self.depth <= 0:  # closed (below 0: a stray closing bracket, unreadable anyway)
                        return position + 1
            position += 1
        self.followed = position - start
        return None


def _decode(body: bytes) -> Any | Unreadable:
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return Unreadable(f"the {len(body)} bytes of the body are not one readable JSON value")


def serve(server: JsonRPCServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Run ``server`` over ``stdin``/``stdout`` until the client closes ``stdin`` or sends ``exit``
    (pygls's handler raises SystemExit: 0 after ``shutdown``, 1 without, as LSP says)."""
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(_receive(server.protocol, stdin.fileno()))
    finally:
        server.shutdown()


async def _receive(protocol: JsonRPCProtocol, fd: int) -> None:
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def read() -> None:  # a daemon thread: a read blocked on a silent client cannot hold the process after `exit`
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                data = b""
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, data)
            except RuntimeError:  # the loop is gone: the server exited
                return
            if not data:
                return

    threading.Thread(target=read, name="fsdp2-lint-stdin", daemon=True).start()
    stream = MessageStream()
    while data := await chunks.get():
        for message in stream.feed(data):
            _handle(protocol, message)


def _handle(protocol: JsonRPCProtocol, message: Any | Unreadable) -> None:
    """Hand one message to pygls; answer what it cannot take with a JSON-RPC error."""
    if isinstance(message, Unreadable):
        logger.error("unreadable message from the client: %s", message.reason)
        _reply_error(protocol, None, JsonRpcParseError(f"Parse error: {message.reason}"))
        return
    if not _is_json_rpc(message):
        logger.error("invalid JSON-RPC message from the client: %.200r", message)
        _reply_error(protocol, _request_id(message), JsonRpcInvalidRequest())
        return
    try:
        structured = protocol.structure_message(message)
    except JsonRpcException as error:  # e.g. a request's params lack a required field
        if "method" in message and "id" in message:
            _reply_error(protocol, _request_id(message), error)
        return
    try:
        protocol.handle_message(structured)
    except Exception:  # as pygls's own reader: a bug in one handler must not end the session
        logger.exception("failed to handle a message from the client")


def _is_json_rpc(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != JsonRPCProtocol.VERSION:
        return False
    if "method" in message:
        return isinstance(message["method"], str) and _request_id(message) == message.get("id")
    return "id" in message and ("result" in message or "error" in message)


def _request_id(message: Any) -> int | str | None:
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, (int, str)) and not isinstance(request_id, bool) else None


def _reply_error(protocol: JsonRPCProtocol, request_id: int | str | None, error: JsonRpcException) -> None:
    """A JSON-RPC error response; sent as a plain object, since pygls drops a null id, which
    JSON-RPC requires."""
    reply = {
        "jsonrpc": JsonRPCProtocol.VERSION,
        "id": request_id,
        "error": {"code": error.code, "message": error.message},
    }
    protocol._send_data(reply)
