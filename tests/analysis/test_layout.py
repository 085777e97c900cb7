"""The layout gives every node the range libcst's PositionProvider gives it, generating the code of
only the top-level statements that hold the nodes asked about."""

from __future__ import annotations

import textwrap
from pathlib import Path

import hostile_inputs
import libcst as cst
import pytest
import torch.distributed
from fixture_marks import FIXTURES
from libcst.metadata import MetadataWrapper, PositionProvider
from style_cases import CASES as STYLE_CASES

from fsdp2_lint.analysis.syntax import Layout, generate, parent_links, source_lines
from fsdp2_lint.rule import all_rules

EDGE_CASES = {
    "crlf-no-final-newline": "import torch\r\nif x:\r\n    y = (1,\r\n         2)\r\nz = 3",
    "old-mac-newlines": "a = 1\rb = [\r    2,\r]\r",
    "tabs-and-unicode": 'def f():\n\tπ = "😀"; g(π)  # ü\n\t@dec\n\tdef h(): return 1\n',
    "comments-decorators-blocks": "# head\n\n@a\n# between\n@b(1)\nclass C:\n    '''doc'''\n\n    x: int = 1\n"
    "    # tail of the class\n\n# after\ntry:\n    pass\nexcept E as e:\n    raise\nelse:\n    pass\n"
    "finally:\n    pass\n",
    "backslash-continuation": "x = 1 + \\\n    2\nwith a as b, \\\n     c:\n    pass\n",
    "byte-order-mark": "\ufeff# coding: utf-8\nimport torch\nx = 1\n",
    "form-feeds": "a = 1\n\x0c\nb = 2\n\x0cc = 3\n",
    "decorators-over-lines": "# c\n@(\n    d)\n# x\n@ \\\n  e\nasync \\\n  def f(): pass\n",
    "semicolons": "a = 1; b = 2;\nif x: pass; y = 3\n(\n    c\n) = 4\n",
    "backslash-only-line": "x = 1\n\\\ny = 2\ndef f():\n    a = 1\n\\\n    b = 2\nz = 3\n",
    "deeper-comments-after-a-block": "if x:\n    pass\n    # deeper\n# level\n\n\nz = 1\n\n# footer\n\n",
    "comment-only": "# nothing but a comment",
    "empty": "",
    "one-newline": "\n",
}
TORCH_DISTRIBUTED = Path(torch.distributed.__file__).parent
TORCH_SAMPLE = sorted(TORCH_DISTRIBUTED.rglob("*.py"))[::12]  # spread over the package: 31 files, 0.9 MB
SOURCES = (
    [pytest.param(text, id=name) for name, text in EDGE_CASES.items()]
    + [pytest.param(path.read_text(), id=f"fixture-{path.parent.name}-{path.stem}") for path in FIXTURES.glob("*/*.py")]
    + [pytest.param(textwrap.dedent(text), id=f"style-{name}") for name, text in STYLE_CASES.items()]
    + [
        pytest.param(source, id=f"{rule.code}-{kind}{i}")
        for rule in all_rules()
        for kind, sources in (("valid", rule.valid), ("invalid", rule.invalid))
        for i, source in enumerate(sources)
    ]
    + [pytest.param(hostile_inputs.source(name, 20).decode(), id=f"hostile-{name}") for name in hostile_inputs.FORMS]
    + [pytest.param(path.read_text(), id=f"torch-{path.relative_to(TORCH_DISTRIBUTED)}") for path in TORCH_SAMPLE]
)
# A statement is placed where its code is found once in the text, else by CPython's line numbers,
# else after the statement before it. A form feed in the text rules out the first way, an
# unparsable text (given in place of the module's) both.
PLACEMENTS = {"found": lambda source: source, "parsed": lambda source: source + "\n\f", "in-turn": lambda _: "("}


@pytest.mark.parametrize("source", SOURCES)
def test_every_nodes_position_and_every_statements_lines_are_libcsts(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    parents = parent_links(module)
    # Syntax nodes last to first (a statement laid out before those above it), then whitespace and punctuation.
    nodes = [*reversed([node for node in expected if id(node) in parents or node is module])]
    nodes += [node for node in expected if id(node) not in parents and node is not module]
    statements = [node for node in expected if isinstance(node, cst.BaseStatement)]
    expected_lines = {id(statement): _lines(module, statement, expected) for statement in statements}
    for placement in PLACEMENTS.values():
        layout = Layout(module, placement(source), parents)
        assert {id(node): layout.position(node) for node in nodes} == {id(node): expected[node] for node in nodes}
        assert {id(statement): layout.statement_lines(statement) for statement in statements} == expected_lines


def _lines(module: cst.Module, statement: cst.BaseStatement, positions) -> tuple[int, int]:
    """The lines a statement's code occupies with its leading lines and decorators: from where
    libcst places the first of them, as many as its code has line breaks (its last one included)."""
    first = [*statement.leading_lines, *getattr(statement, "decorators", ()), statement][0]
    code = generate(module, [statement], ())
    line = positions[first].start.line
    return line, line + len(source_lines(code))


@pytest.mark.parametrize("placement", ["found", "parsed"])
def test_a_position_generates_only_the_statement_that_holds_the_node(monkeypatch, placement):
    source = "import torch\n\n\n@torch.no_grad()\ndef f():\n    return 1\n\n\nx = f()\n"
    module = cst.parse_module(source)
    call = module.body[-1].body[0].value
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)[call]
    layout = Layout(module, PLACEMENTS[placement](source), parent_links(module))

    def refuse(node, state) -> None:
        raise AssertionError(f"{type(node).__name__} generated")

    monkeypatch.setattr(cst.Import, "_codegen_impl", refuse)
    monkeypatch.setattr(cst.FunctionDef, "_codegen_impl", refuse)
    assert layout.position(call) == expected == cst.metadata.CodeRange((9, 4), (9, 7))


@pytest.mark.parametrize("source", [pytest.param(text, id=name) for name, text in EDGE_CASES.items()])
def test_statement_lines_hold_exactly_each_statements_code(source):
    module = cst.parse_module(source)
    layout, lines = Layout(module, source, parent_links(module)), source_lines(module.code)  # the lines libcst keeps
    checked = 0
    for statement, indent in _statements(module, (), module.default_indent):
        first, end = layout.statement_lines(statement)
        code = generate(module, [statement], indent)
        if end - 1 == len(lines) and not module.code.endswith(("\n", "\r")):
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
