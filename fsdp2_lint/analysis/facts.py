"""The facts every rule reads, computed once per file: :func:`interpret` runs the abstract
interpreter (:mod:`fsdp2_lint.analysis.interpreter`) from each *entry point* (the module body, and
every function or method that no code in the file calls) and makes each run a
:class:`~fsdp2_lint.analysis.trace.Trace`; :class:`FileFacts` holds a file's traces and an index of
its syntax (positions, source text, parents and enclosing statements).

With a project, the runs follow calls into the project's other modules, so an event's node may sit
in another file: :meth:`FileFacts.text_of` says which (:class:`ModuleText`), and
:meth:`FileFacts.where` names a place for a message ("line 41", or "`trainer/parallel.py:41`").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange

from fsdp2_lint.analysis.interpreter.core import Interpreter
from fsdp2_lint.analysis.model import Event, Ref, Value, canonical, refs
from fsdp2_lint.analysis.project import Project
from fsdp2_lint.analysis.syntax import Layout, StatementLinks, child_nodes, dotted, parent_links, source_lines
from fsdp2_lint.analysis.trace import Trace, share_class_sharding


@dataclass(frozen=True)
class Analysis:
    """A file's traces, and the other project modules the runs read (path, source, parsed)."""

    traces: list[Trace]
    modules: tuple[tuple[Path, bytes, cst.Module], ...] = ()


def interpret(
    module: cst.Module,
    source: bytes,
    project: Project | None = None,
    path: Path | None = None,
    relevant: Callable[[bytes], bool] | None = None,
) -> Analysis:
    """The traces of a parsed file, one per entry point, the module body's first; with a project,
    the runs follow what the file imports from it (``relevant``: may a module's code matter to a rule?)."""
    interpreter = Interpreter(module, source, project, path, relevant)
    traces = [
        Trace(run.entry, run.events, instance=run.instance, body_start=run.body_start) for run in interpreter.run()
    ]
    share_class_sharding(traces)
    others = tuple(
        (scope.path, project.sources.get(scope.path), scope.module)
        for scope in interpreter.scopes
        if scope is not interpreter.main and project is not None
    )
    return Analysis(traces, others)


class ModuleText:
    """One module's text as findings in it are reported: its displayed path, source and layout."""

    def __init__(self, path: str, source: bytes, module: cst.Module, links: StatementLinks | None = None) -> None:
        """``links``: parent links kept from the module's earlier trees (see :func:`parent_links`)."""
        self.path = path
        self.source = source
        self.module = module
        self._kept_links = links

    @cached_property
    def layout(self) -> Layout:
        # Computed only for modules that have findings: it costs the parent links (a walk over
        # the syntax tree), then a code-generation pass of each top-level statement asked about.
        return Layout(self.module, self.source.decode(self.module.encoding), self.parents)

    @cached_property
    def parents(self) -> dict[int, cst.CSTNode]:
        """The parent of every syntax node (by ``id``) but the module."""
        return parent_links(self.module, self._kept_links)

    @cached_property
    def code_lines(self) -> list[str]:
        """The module's lines as Python and editors count them, line ends kept (its code is the
        decoded file: libcst round-trips it)."""
        return source_lines(self.source.decode(self.module.encoding))

    @cached_property
    def bare_lines(self) -> list[str]:
        """The lines without their ends (nor the first line's byte order mark), as reported."""
        lines = [line.rstrip("\r\n") for line in self.code_lines] or [""]
        lines[0] = lines[0].removeprefix("\ufeff")
        return lines


class FileFacts:
    """Everything rules know about one file (and the other modules its runs read: ``others``)."""

    def __init__(
        self,
        path: str,
        source: bytes,
        module: cst.Module,
        traces: list[Trace],
        others: Sequence[ModuleText] = (),
        links: StatementLinks | None = None,
    ) -> None:
        self.path = path
        self.source = source
        self.module = module
        self.traces = traces
        self.text = ModuleText(path, source, module, links)
        self.others = tuple(others)

    @property
    def layout(self) -> Layout:
        return self.text.layout

    def text_of(self, node: cst.CSTNode) -> ModuleText:
        """The module that holds ``node``: this file, or another module its runs read."""
        if not self.others or self.text.layout.holds(node):
            return self.text
        return next((other for other in self.others if other.layout.holds(node)), self.text)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self.text_of(node).layout.position(node)

    def where(self, node: cst.CSTNode, reported: cst.CSTNode) -> str:
        """Where ``node`` is, for the message of a finding reported at ``reported``: "line 41" in
        the same file, "`trainer/parallel.py:41`" in another."""
        text = self.text_of(node)
        line = text.layout.position(node).start.line
        return f"line {line}" if text is self.text_of(reported) else f"`{text.path}:{line}`"

    def name_as_written(self, module: Ref, reported: cst.CSTNode) -> str:
        """The module as the code at ``reported`` names it, for a message: the first expression
        there (in source order, outermost first) whose text is a name the module goes by, its own
        (``model``) or from its outermost owner (``box.item`` once ``box.item = model``); else the
        latter. A message then quotes ``model.no_sync()`` as ``model``, the way the user wrote it."""
        owned = canonical(module).text
        names = {module.text, owned}
        pending = [reported]
        while pending:
            node = pending.pop(0)
            if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
                text = self.code(node)
                if text in names:
                    return text
            if isinstance(node, cst.Attribute):  # `.model` of `self.model` names nothing on its own
                pending.insert(0, node.value)
            elif isinstance(node, cst.Arg):  # nor does the keyword of `f(model=x)`
                pending.insert(0, node.value)
            else:
                pending[0:0] = child_nodes(node)
        return owned

    def sharded_elsewhere(self, name: str, shard: object, reported: cst.CSTNode) -> tuple[str, tuple]:
        """For a finding at ``reported`` that holds because module ``name`` is sharded by ``shard``
        (the ``fully_shard`` event, or True when it is not known): " at `trainer/parallel.py:41`"
        for its message, and the related location, when that is in another file; nothing when it is
        in this one, where the reader sees it."""
        if not isinstance(shard, Event) or self.text_of(shard.node) is self.text_of(reported):
            return "", ()
        return f" at {self.where(shard.node, reported)}", ((shard.node, f"`{name}` is sharded here"),)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @cached_property
    def module_code(self) -> str:
        return self.module.code

    @property
    def code_lines(self) -> list[str]:
        return self.text.code_lines

    @property
    def parents(self) -> dict[int, cst.CSTNode]:
        return self.text.parents

    def _parents_of(self, node: cst.CSTNode) -> dict[int, cst.CSTNode]:
        """The parent links of the module that holds ``node`` (this file's unless another's has it)."""
        if id(node) in self.text.parents or not self.others:
            return self.text.parents
        return next((other.parents for other in self.others if id(node) in other.parents), self.text.parents)

    def statement_of(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, cst.Module | cst.IndentedBlock] | None:
        """The statement that contains ``node`` and the block (module or indented block) it is in,
        in whichever module holds ``node``."""
        parents = self._parents_of(node)
        current = node
        while id(current) in parents:
            parent = parents[id(current)]
            if isinstance(current, cst.BaseStatement) and isinstance(parent, (cst.Module, cst.IndentedBlock)):
                return current, parent
            current = parent
        return None

    def leaves_after(self, node: cst.CSTNode) -> bool:
        """Does the block that holds ``node``'s statement leave the function (``return``,
        ``raise``) or the loop iteration (``continue``) unconditionally, at or after it?"""
        found = self.statement_of(node)
        if found is None:
            return False
        statement, block = found
        body = list(block.body)
        return any(
            isinstance(line, cst.SimpleStatementLine)
            and any(isinstance(small, (cst.Return, cst.Raise, cst.Continue)) for small in line.body)
            for line in body[body.index(statement) :]
        )

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        """The nearest ancestor of ``node`` of the given syntax type."""
        parents = self._parents_of(node)
        current = parents.get(id(node))
        while current is not None and not isinstance(current, kind):
            current = parents.get(id(current))
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

    def stored_in(self, attribute: Ref) -> list[Value]:
        """What the file's runs store in an instance's attribute (``self.state``), in any method
        of its class: an entry point that starts in a method does not see ``__init__``'s stores."""
        whole = canonical(attribute)
        if whole.root.cls is None or len(whole.path) != 1:
            return []
        return [
            store.args[0]
            for store in self._stores_of.get(whole.path[0], ())
            if any(
                not owner.path and owner.root.cls is whole.root.cls for owner in map(canonical, refs(store.receiver))
            )
        ]

    def objects_in(self, ref: Ref) -> list[Ref]:
        """The whole objects ``ref`` names: the object itself, or for an attribute of an instance
        (``self.model``) the objects the class's methods store in it (none when it is unknown)."""
        whole = canonical(ref)
        if not whole.path:
            return [whole]
        return [obj for value in self.stored_in(whole) for obj in refs(value)]

    def defines(self, ref: Ref, name: str) -> bool:
        """Does every object ``ref`` may name have ``name`` of its own: a method, property or class
        attribute of its class or of a base class the project defines, or an attribute the file stores on it
        (``self.module = inner``)? Such a name is the code's own, not the torch API of that name:
        ``fully_shard`` makes the model's class a subclass of its class, which keeps its methods."""
        objects = self.objects_in(ref)
        return bool(objects) and all(
            not obj.path and ((obj.root.cls is not None and obj.root.cls.defines(name)) or self._stores(obj, name))
            for obj in objects
        )

    def _stores(self, obj: Ref, name: str) -> bool:
        """Does the file store attribute ``name`` on ``obj``, or (in a method of its class) on any
        instance of its class?"""
        whole, cls = canonical(obj), obj.root.cls
        return any(
            owner == whole or (cls is not None and not owner.path and owner.root.cls is cls)
            for store in self._stores_of.get(name, ())
            for owner in map(canonical, refs(store.receiver))
        )

    @cached_property
    def _stores_of(self) -> dict[str, list[Event]]:
        """The attribute stores of the file's runs, by attribute name."""
        index: dict[str, list[Event]] = {}
        for trace in self.traces:
            for store in trace.stores:
                index.setdefault(store.name, []).append(store)
        return index


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


def sharded_note(module: str, at: str) -> str:
    """A message's note that the module is sharded in another file, "(`model` is sharded at
    `trainer/parallel.py:41`)", for ``at`` from :meth:`FileFacts.sharded_elsewhere`; nothing when
    ``at`` is empty (the sharding is in the same file)."""
    return f" (`{module}` is sharded{at})" if at else ""
