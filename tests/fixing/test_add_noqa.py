"""``check --add-noqa``'s edit of a file's bytes: where the comment goes, how an existing code list
grows, and that every other byte stays (the command line's own tests: tests/cli/test_cli_ruff_options.py)."""

from __future__ import annotations

import pytest

from fsdp2_lint.fixing.noqa import add_noqa


def test_the_comment_goes_at_the_end_of_each_reported_line_with_its_codes_sorted():
    source = b"import torch\nmodel = Net()\nfully_shard(model)\n"
    assert add_noqa(source, {2: {"FSDP003", "FSDP001"}, 3: {"FSDP010"}}) == (
        b"import torch\nmodel = Net()  # noqa: FSDP001, FSDP003\nfully_shard(model)  # noqa: FSDP010\n",
        2,
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (b"a = 1\nb = 2", b"a = 1\nb = 2  # noqa: FSDP001"),  # the last line, without a line end
        (b"a = 1\r\nb = 2\r\nc = 3\r\n", b"a = 1\r\nb = 2  # noqa: FSDP001\r\nc = 3\r\n"),
        (b"a = 1\rb = 2\rc = 3\r", b"a = 1\rb = 2  # noqa: FSDP001\rc = 3\r"),  # a lone \r ends a line too
        (b"a = 1\n\xe9 = 2\n", b"a = 1\n\xe9 = 2  # noqa: FSDP001\n"),  # bytes that are not UTF-8 stay
    ],
    ids=["no-final-newline", "crlf", "cr", "latin-1"],
)
def test_line_ends_and_other_bytes_stay_as_they_were(source, expected):
    assert add_noqa(source, {2: {"FSDP001"}}) == (expected, 1)


def test_codes_are_added_after_an_existing_list_which_keeps_its_own_spelling_and_what_follows_it():
    source = b"x = f()  # NOQA:fsdp002 , E501 -- keep this\n"
    assert add_noqa(source, {1: {"FSDP001", "FSDP002", "FSDP003"}}) == (
        b"x = f()  # NOQA:fsdp002 , E501, FSDP001, FSDP003 -- keep this\n",
        1,
    )
    assert add_noqa(source, {1: {"FSDP002"}}) == (source, 0)  # listed already, whatever its case


def test_lines_outside_the_file_lines_without_codes_and_continued_lines_are_left_alone():
    source = b"a = 1 + \\\n    2\nb = 3\n"
    assert add_noqa(source, {0: {"FSDP001"}, 1: {"FSDP001"}, 3: set(), 4: {"FSDP001"}}) == (source, 0)
    assert add_noqa(source, {4: {"FSDP001"}, 1: set(), 3: {"FSDP001"}}) == (  # the others are still marked
        b"a = 1 + \\\n    2\nb = 3  # noqa: FSDP001\n",
        1,
    )
    assert add_noqa(source, {2: {"FSDP001"}, 3: {"FSDP001"}}) == (
        b"a = 1 + \\\n    2  # noqa: FSDP001\nb = 3  # noqa: FSDP001\n",
        2,
    )
