"""The language server's message framing (fsdp2_lint/lsp/transport.py): what a client sends,
framed right or wrong, split into its messages the same way whatever chunks the bytes arrive in."""

from __future__ import annotations

import json

import pytest

from fsdp2_lint.lsp.transport import MessageStream, Unreadable

UNREADABLE = "unreadable"
FIRST = {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"text": 'π😀 {[} "quoted" \\ ]'}}
SECOND = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
THIRD = {"jsonrpc": "2.0", "id": 3, "method": "shutdown"}
HEADER_IN_TEXT = {"jsonrpc": "2.0", "method": "didChange", "params": {"text": "Content-Length: 2\r\n\r\n{}"}}


def body(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode()


def frame(data: bytes, length_error: int = 0, headers: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    return headers % (len(data) + length_error) + data


CASES = {
    "well-framed": (frame(body(FIRST)) + frame(body(SECOND)), [FIRST, SECOND]),
    "other-headers-and-bare-newlines": (
        frame(body(FIRST), headers=b"content-length:%d\nContent-Type: application/vscode-jsonrpc; charset=utf-8\n\n")
        + frame(body(SECOND), headers=b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"),
        [FIRST, SECOND],
    ),
    "whitespace-around-the-body": (frame(b" \r\n" + body(FIRST) + b"\n") + frame(body(SECOND)), [FIRST, SECOND]),
    "too-short": (frame(body(FIRST), -3) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "too-long": (frame(body(FIRST), 3) + frame(body(SECOND)), [FIRST, SECOND]),
    "too-long-over-two-messages": (
        frame(body(FIRST), len(frame(body(SECOND))) + 5) + frame(body(SECOND)) + frame(body(THIRD)),
        [FIRST, SECOND, THIRD],
    ),
    "header-text-in-a-body-too-long": (frame(body(HEADER_IN_TEXT), 3) + frame(body(SECOND)), [HEADER_IN_TEXT, SECOND]),
    "string-too-long": (frame(b'"a string"', 3) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "not-json": (frame(b'{"jsonrpc": "2.0", "id": 1,') + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "not-json-too-long": (frame(b'{"jsonrpc": ', 20) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "invalid-utf8": (frame(body(FIRST).replace("π".encode(), b"\xcf")) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "too-deep": (frame(b"[" * 100_000 + b"]" * 100_000) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "empty-body": (frame(b"") + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "length-not-a-number": (b"Content-Length: -5\r\n\r\n" + body(FIRST) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "no-blank-line": (b"Content-Length: 5\r\n" + body(FIRST) + frame(body(SECOND)), [UNREADABLE, SECOND]),
    "garbage-between": (
        b"\x00\xffhello\r\n\r\n}" + frame(body(FIRST)) + b"Content-Type: x\r\n" + frame(body(SECOND)),
        [FIRST, SECOND],
    ),
    "cut-short-at-the-end": (frame(body(FIRST)) + frame(body(SECOND))[:-1], [FIRST]),
}


def readable(messages: list) -> list:
    return [UNREADABLE if isinstance(message, Unreadable) else message for message in messages]


@pytest.mark.parametrize(("stream", "expected"), CASES.values(), ids=CASES.keys())
def test_messages_are_the_same_whatever_the_chunks(stream, expected):
    at_once = MessageStream().feed(stream)
    byte_by_byte = MessageStream()
    one_at_a_time = [
        message for index in range(len(stream)) for message in byte_by_byte.feed(stream[index : index + 1])
    ]
    assert (readable(at_once), readable(one_at_a_time)) == (expected, expected)


def test_a_body_longer_than_its_header_says_is_taken_when_it_is_whole_before_the_rest_arrives():
    stream = MessageStream()
    assert stream.feed(frame(body(FIRST), 100)) == [FIRST]  # the client waits for the answer
    assert stream.feed(frame(body(SECOND))) == [SECOND]


def test_garbage_without_a_header_is_dropped_as_it_arrives():
    stream = MessageStream()
    for _ in range(100):
        assert stream.feed(b"x" * 100_000 + b"\r\n") == []
    assert len(stream._buffer) < 1000
    assert stream.feed(frame(body(FIRST))) == [FIRST]
