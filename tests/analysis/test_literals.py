"""Literals are read as Python reads them, without compiling the common spellings."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from fsdp2_lint.analysis.interpreter.expressions import literal_value

SPELLINGS = [
    "0", "00", "7", "1_000", "0x1F", "0X_ff", "0o17", "0b1_01",
    "1.5", "1.", ".5", "1e3", "1E-3", "1_0.5e1_0", "0.1",
    '"a"', "'a'", '""', '""""""', "'''x\ny'''", '"""a "quoted" b"""', '"é"',
    "r'\\d'", "b'x'", "'\\n'", "u'x'", "'\\x41'", "R'a\\'b'", "rb'\\x00'",
]  # fmt: skip


@pytest.mark.parametrize("text", SPELLINGS)
def test_a_literal_is_what_python_reads(text):
    node = cst.parse_expression(text)
    value = literal_value(node)
    assert value == ast.literal_eval(text)
    assert type(value) is type(ast.literal_eval(text))
