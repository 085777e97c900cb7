"""The one-pass layout gives every node the range libcst's PositionProvider gives it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch.distributed.fsdp
from fixture_marks import FIXTURES
from libcst.metadata import MetadataWrapper, PositionProvider

from fsdp2_lint.analysis.syntax import Layout, generate, source_lines
from fsdp2_lint.rule import all_rules

EDGE_CASES = {
    "crlf-no-final-newline": "import torch\r\nif x:\r\n    y = (1,\r\n         2)\r\nz = 3",
    "old-mac-newlines": "a = 1\rb = [\r    2,\r]\r",
    "tabs-and-unicode": 'def f():\n\tπ = "😀"; g(π)  # ü\n\t@dec\n\tdef h(): return 1\n',
    "comments-decorators-blocks": "# head\n\n@a\n# between\n@b(1)\nclass C:\n    '''doc'''\n\n    x: int = 1\n"
    "    # tail of the class\n\n# after\ntry:\n    pass\nexcept E as e:\n    raise\nelse:\n    pass\n"
    "finally:\n    pass\n",
    "backslash-continuation": "x = 1 + \\\n    2\nwith a as b, \\\n     c:\n    pass\n",
}
TORCH_FSDP = Path(torch.distributed.fsdp.__file__).parent
SOURCES = (
    [pytest.param(text, id=name) for name, text in EDGE_CASES.items()]
    + [pytest.param(path.read_text(), id=f"fixture-{path.parent.name}-{path.stem}") for path in FIXTURES.glob("*/*.py")]
    + [
        pytest.param(source, id=f"{rule.code}-invalid{i}")
        for rule in all_rules()
        for i, source in enumerate(rule.invalid)
    ]
    + [pytest.param(path.read_text(), id=f"torch-{path.name}") for path in sorted(TORCH_FSDP.rglob("*.py"))]
)


@pytest.mark.parametrize("source", SOURCES)
def test_every_nodes_position_is_libcsts(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    layout = Layout(module)
    assert {id(node): layout.position(node) for node in expected} == {id(n): r for n, r in expected.items()}


@pytest.mark.parametrize("source", [pytest.param(text, id=name) for name, text in EDGE_CASES.items()])
def test_statement_lines_hold_exactly_each_statements_code(source):
    module = cst.parse_module(source)
    layout, lines = Layout(module), source_lines(source)
    checked = 0
    for statement, indent in _statements(module, (), module.default_indent):
        first, end = layout.statement_lines(statement)
        code = generate(module, [statement], indent)
        if end - 1 == len(lines) and not source.endswith(("\n", "\r")):
            code = code.removesuffix(module.default_newline)
        assert "".join(lines[first - 1 : end - 1]) == code
        checked += 1
    assert checked >= len(module.body)


def _statements(node: cst.CSTNode, indent: tuple[str, ...], default: str):
    """Every statement with the indentation of its block, outermost first."""
    if isinstance(node, cst.IndentedBlock):
        indent = (*indent, node.indent if node.indent is not None else default)
    for child in node.children:
        if isinstance(child, cst.BaseStatement):
            yield child, indent
        yield from _statements(child, indent, default)
