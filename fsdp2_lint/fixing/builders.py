"""What rules build their rewrites with: how this file can name a symbol (:func:`reference`: the
expression, and the import to add if nothing provides it yet), statements inserted or moved, the
names a statement binds or mentions, a call's arguments laid out again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from fsdp2_lint.analysis.syntax import dotted
from fsdp2_lint.fixing.rewrite import NeededImport, Replacements

if TYPE_CHECKING:
    from fsdp2_lint.analysis.facts import FileFacts

# Submodules that `import torch` itself loads, so `torch.nn.utils.clip_grad_norm_` needs no import.
LOADED_BY_TORCH = frozenset({"torch", "torch.nn", "torch.nn.utils", "torch.nn.functional", "torch.cuda", "torch.optim"})


def reference(module: cst.Module, qname: str) -> tuple[cst.BaseExpression, NeededImport | None]:
    """An expression naming ``qname`` (``package.Name``, or a module) in this file's import style,
    and the import to add when nothing in the file provides it yet."""
    package, _, name = qname.rpartition(".")
    imports = list(_top_level_imports(module))
    for stmt, imported, local in imports:  # from package import name [as local]
        if isinstance(stmt, cst.ImportFrom) and dotted(stmt.module) == package and imported == name:
            return cst.Name(local), None
    for stmt, imported, local in imports:  # import package [as local]; `import os.path` binds os
        if isinstance(stmt, cst.Import) and imported in (qname, package):
            return _expression(local if imported == qname else f"{local}.{name}"), None
        if isinstance(stmt, cst.Import) and local == imported and imported.split(".")[0] == qname:
            return cst.Name(qname), None
    for stmt, imported, local in imports:  # import torch
        if isinstance(stmt, cst.Import) and imported == local == "torch" and package in LOADED_BY_TORCH:
            return _expression(qname), None
    if package in LOADED_BY_TORCH:  # `torch.cuda.set_device`, as torch's own documentation writes it
        return _expression(qname), NeededImport("torch", None)
    if not package:
        return cst.Name(qname), NeededImport(qname, None)
    return cst.Name(name), NeededImport(package, name)


def insert_before(facts: FileFacts, node: cst.CSTNode, code: str) -> Replacements | None:
    """Insert the statements in ``code`` before the statement that contains ``node`` (the comments
    above that statement stay above the inserted code)."""
    found = facts.statement_of(node)
    if found is None:
        return None
    statement, _ = found
    inserted = list(cst.parse_module(code).body)
    inserted[0] = inserted[0].with_changes(leading_lines=statement.leading_lines)
    return {statement: cst.FlattenSentinel([*inserted, statement.with_changes(leading_lines=())])}


def insert_after(facts: FileFacts, node: cst.CSTNode, code: str) -> Replacements | None:
    """Insert the statements in ``code`` right after the statement that contains ``node``."""
    found = facts.statement_of(node)
    if found is None:
        return None
    statement, _ = found
    return {statement: cst.FlattenSentinel([statement, *cst.parse_module(code).body])}


@dataclass(frozen=True)
class Move:
    """A statement moved down its block: the ``replacements`` that do it, and the statements it now
    follows (``passed``: those it jumps over, the anchor's statement last)."""

    replacements: Replacements
    statement: cst.BaseStatement
    passed: tuple[cst.BaseStatement, ...]


def move_after(facts: FileFacts, moved: cst.CSTNode, anchor: cst.CSTNode) -> Move | None:
    """Move the statement holding ``moved`` to just after the statement of the same block that
    holds ``anchor`` (directly, or in a nested block), when ``moved`` comes first. The comments
    above the moved statement go with it, the blank lines before them stay where they separate code;
    a line with several statements is not split."""
    found = facts.statement_of(moved)
    if found is None:
        return None
    statement, block = found
    target = statement_in(facts, anchor, block)
    if target is None or (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) != 1):
        return None
    body = list(block.body)
    source, destination = body.index(statement), body.index(target)
    if source >= destination:
        return None
    lines = list(statement.leading_lines)
    first_comment = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
    following = body[source + 1]
    separated = bool(following.leading_lines) and following.leading_lines[0].comment is None
    blank = [] if separated else lines[:first_comment]
    successor = following.with_changes(leading_lines=[*blank, *following.leading_lines]) if blank else following
    landed = statement.with_changes(leading_lines=lines[first_comment:])
    replacements: dict[cst.CSTNode, cst.CSTNode | cst.FlattenSentinel | cst.RemovalSentinel] = {
        statement: cst.RemoveFromParent(),
        target: cst.FlattenSentinel([successor if following is target else target, landed]),
    }
    if following is not target and successor is not following:
        replacements[following] = successor
    return Move(replacements, statement, tuple(body[source + 1 : destination + 1]))


def statement_in(
    facts: FileFacts, node: cst.CSTNode, block: cst.Module | cst.IndentedBlock
) -> cst.BaseStatement | None:
    """The statement of ``block`` that runs ``node``, if any (not one whose body merely defines a
    function or class holding it)."""
    found = facts.statement_of(node)
    while found is not None and found[1] is not block:
        found = facts.statement_of(found[1])
        if found is not None and isinstance(found[0], (cst.FunctionDef, cst.ClassDef)):
            return None
    return found[0] if found is not None else None


def bound_names(statement: cst.CSTNode) -> set[str]:
    """The names and attribute paths a simple statement assigns (``opt``, ``self.optimizer``)."""
    targets: list[cst.BaseExpression] = []
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
        if isinstance(small, cst.Assign):
            targets.extend(target.target for target in small.targets)
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets.append(small.target)
    names: set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        elif dotted(target):
            names.add(dotted(target))
    return names


def mentioned_names(nodes: Iterable[cst.CSTNode]) -> set[str]:
    """Every name and attribute path the nodes mention, prefixes included (``self.opt.step``
    mentions ``self``, ``self.opt`` and ``self.opt.step``)."""
    collector = _Names()
    for node in nodes:
        node.visit(collector)
    return collector.names


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if dotted(node):
            self.names.add(dotted(node))


def bindings(scope: cst.Module | cst.FunctionDef, name: str) -> list[cst.CSTNode]:
    """Where ``name`` is bound in ``scope`` (a module, or a function with its parameters), not
    counting the functions, classes, lambdas and comprehensions nested in it: the assignments,
    loops, imports, ``with ... as``, ``except ... as``, definitions and parameters. A ``global`` or
    ``nonlocal`` declaration counts too (the name may be bound anywhere)."""
    finder = _Bindings(scope, name)
    scope.visit(finder)
    return finder.found


class _Bindings(cst.CSTVisitor):
    def __init__(self, scope: cst.CSTNode, name: str) -> None:
        super().__init__()
        self.scope, self.name = scope, name
        self.found: list[cst.CSTNode] = []

    def _bind(self, node: cst.CSTNode, target: cst.CSTNode | None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(node, element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(node, target.value)
        elif isinstance(target, cst.Name) and target.value == self.name:
            self.found.append(node)

    def _nested(self, node: cst.CSTNode, name: cst.Name | None = None) -> bool:
        if node is self.scope:
            return True
        self._bind(node, name)
        return False  # its body is another scope

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return self._nested(node, node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return self._nested(node, node.name)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return False

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return False

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return False

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node, node.name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(node, target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node, node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node, node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node, node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node, node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        self._bind(node, node.asname.name if node.asname else None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._bind(node, node.name.name if node.name else None)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        local = node.asname.name if node.asname else cst.Name(dotted(node.name).split(".")[0])
        self._bind(node, local)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._bind(node, item.name)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._bind(node, item.name)


def without_arguments(call: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` (the call's arguments, some dropped or rewritten) laid out to end the call as its
    original last argument did: its trailing comma or none, its line break before ``)``. The line
    comment of the argument that becomes last stays; a dropped argument's goes with it."""
    last = call.args[-1] if call.args else None
    if not args or last is None or args[-1] is last:
        return args
    kept = args[-1]
    own, closing, after = kept.comma, last.comma, last.whitespace_after_arg
    if isinstance(own, cst.Comma) and isinstance(own.whitespace_after, cst.ParenthesizedWhitespace):
        if isinstance(closing, cst.Comma) and isinstance(closing.whitespace_after, cst.ParenthesizedWhitespace):
            line_end = closing.whitespace_after.last_line
            closing = own.with_changes(whitespace_after=own.whitespace_after.with_changes(last_line=line_end))
        elif own.whitespace_after.first_line.comment is not None:  # keep the comment: end with a comma
            line_end = after.last_line if isinstance(after, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace("")
            closing = own.with_changes(whitespace_after=own.whitespace_after.with_changes(last_line=line_end))
            after = cst.SimpleWhitespace("")
    return [*args[:-1], kept.with_changes(comma=closing, whitespace_after_arg=after)]


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _top_level_imports(module: cst.Module) -> Iterable[tuple[cst.Import | cst.ImportFrom, str, str]]:
    """(statement, imported dotted name, local name) for each absolute top-level import."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, (cst.Import, cst.ImportFrom)) or getattr(small, "relative", ()):
                continue
            if isinstance(small.names, cst.ImportStar):
                continue
            for alias in small.names:
                imported = dotted(alias.name)
                yield small, imported, alias.asname.name.value if alias.asname else imported


def _expression(dotted: str) -> cst.BaseExpression:
    return cst.parse_expression(dotted)
