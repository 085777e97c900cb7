"""The facts every rule reads, computed once per file: :func:`interpret` runs the abstract
interpreter (:mod:`fsdp2_lint.analysis.interpreter`) from each *entry point* (the module body, and
every function or method that no code in the file calls) and makes each run a
:class:`~fsdp2_lint.analysis.trace.Trace`; :class:`FileFacts` holds a file's traces and an index of
its syntax (positions, source text, parents and enclosing statements).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import libcst as cst
from libcst.metadata import CodeRange

from fsdp2_lint.analysis.interpreter.core import Interpreter
from fsdp2_lint.analysis.model import Event
from fsdp2_lint.analysis.syntax import Layout, child_nodes, dotted, source_lines
from fsdp2_lint.analysis.trace import Trace, share_class_sharding


def interpret(module: cst.Module, source: bytes) -> list[Trace]:
    """The traces of a parsed file, one per entry point, the module body's first."""
    traces = [Trace(run.entry, run.events, instance=run.instance) for run in Interpreter(module, source).run()]
    share_class_sharding(traces)
    return traces


class FileFacts:
    """Everything rules know about one file."""

    def __init__(self, path: str, source: bytes, module: cst.Module, traces: list[Trace]) -> None:
        self.path = path
        self.source = source
        self.module = module
        self.traces = traces

    @cached_property
    def layout(self) -> Layout:
        # Computed only for files that have findings: it costs a code-generation pass.
        return Layout(self.module)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self.layout.position(node)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @cached_property
    def module_code(self) -> str:
        return self.module.code

    @cached_property
    def code_lines(self) -> list[str]:
        """The module's lines as Python and editors count them, line ends kept (its code is the
        decoded file: libcst round-trips it)."""
        return source_lines(self.source.decode(self.module.encoding))

    @cached_property
    def parents(self) -> dict[int, cst.CSTNode]:
        """The parent of every syntax node (by ``id``) but the module."""
        parents: dict[int, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            for child in child_nodes(node):
                parents[id(child)] = node
                stack.append(child)
        return parents

    def statement_of(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, cst.Module | cst.IndentedBlock] | None:
        """The statement that contains ``node`` and the block (module or indented block) it is in."""
        current = node
        while id(current) in self.parents:
            parent = self.parents[id(current)]
            if isinstance(current, cst.BaseStatement) and isinstance(parent, (cst.Module, cst.IndentedBlock)):
                return current, parent
            current = parent
        return None

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        """The nearest ancestor of ``node`` of the given syntax type."""
        current = self.parents.get(id(node))
        while current is not None and not isinstance(current, kind):
            current = self.parents.get(id(current))
        return current

    def expects_exception(self, node: cst.CSTNode) -> bool:
        """Is ``node`` inside ``with pytest.raises(...)`` or ``with self.assertRaises...(...)`` (or a
        name bound to one in the same function): code a test runs to watch it fail, on purpose?"""
        block = self.enclosing(node, cst.With)
        while block is not None:
            if any(self._expectation(item.item, block) for item in block.items):  # type: ignore[attr-defined]
                return True
            block = self.enclosing(block, cst.With)
        return False

    def _expectation(self, item: cst.BaseExpression, block: cst.CSTNode) -> bool:
        if isinstance(item, cst.Call):
            return dotted(item.func).rpartition(".")[2] in _EXPECTS_EXCEPTION
        if not isinstance(item, cst.Name):
            return False
        scope = self.enclosing(block, cst.FunctionDef) or self.module
        return any(
            isinstance(value, cst.Call) and self._expectation(value, block) for value in _assigned(scope, item.value)
        )

    def events(self) -> Iterator[tuple[Trace, Event]]:
        for trace in self.traces:
            for event in trace.events:
                yield trace, event


# Context managers that expect the code they hold to raise (pytest, unittest).
_EXPECTS_EXCEPTION = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def _assigned(scope: cst.CSTNode, name: str) -> Iterator[cst.BaseExpression]:
    """The values assigned to ``name`` anywhere in ``scope`` (in any branch)."""
    stack = [scope]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign) and any(
            isinstance(target.target, cst.Name) and target.target.value == name for target in node.targets
        ):
            yield node.value
        stack.extend(child_nodes(node))
