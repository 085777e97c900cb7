"""Applying rule fixes: one libcst transformation of the whole module, so everything a fix does not
replace round-trips byte for byte (comments, whitespace, line endings, encoding line, BOM).

Rules build replacement nodes; :func:`reference` tells a rule how this file can name a symbol
(``CPUOffloadPolicy`` after ``from torch.distributed.fsdp import ...``, ``fsdp.CPUOffloadPolicy``
after ``import torch.distributed.fsdp as fsdp``) and which import, if any, must be added for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from fsdp2_lint.rule import NeededImport, Replace, RuleFix
from fsdp2_lint.syntax import dotted

if TYPE_CHECKING:
    from fsdp2_lint.facts import FileFacts

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
    if not package:
        return cst.Name(qname), NeededImport(qname, None)
    return cst.Name(name), NeededImport(package, name)


def apply(module: cst.Module, fixes: Iterable[RuleFix]) -> cst.Module:
    """The module with every fix's replacements made and the imports they need added once."""
    fixes = list(fixes)
    replacements = {id(change.old): change.new for fix in fixes for change in fix.changes}
    fixed = module.visit(_Replace(replacements))
    needed = list(dict.fromkeys(needed for fix in fixes for needed in fix.imports))
    return _add_imports(fixed, needed) if needed else fixed


def insert_before(facts: FileFacts, node: cst.CSTNode, code: str) -> Replace | None:
    """Insert the statements in ``code`` before the statement that contains ``node`` (the comments
    above that statement stay above the inserted code)."""
    found = facts.statement_of(node)
    if found is None:
        return None
    statement, _ = found
    inserted = list(cst.parse_module(code).body)
    inserted[0] = inserted[0].with_changes(leading_lines=statement.leading_lines)
    return Replace(statement, cst.FlattenSentinel([*inserted, statement.with_changes(leading_lines=())]))


def move_after(facts: FileFacts, moved: cst.CSTNode, anchor: cst.CSTNode) -> Replace | None:
    """Move the statement holding ``moved`` to just after the statement holding ``anchor``, when both
    are in the same block and ``moved`` comes first."""
    first, second = facts.statement_of(moved), facts.statement_of(anchor)
    if first is None or second is None or first[1] is not second[1]:
        return None
    block = first[1]
    body = list(block.body)
    source, target = body.index(first[0]), body.index(second[0])
    if source >= target:
        return None
    body.insert(target + 1, body.pop(source))
    return Replace(block, block.with_changes(body=body))


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@dataclass(frozen=True)
class LineEdit:
    """Replace lines ``start`` .. ``end - 1`` (1-based) with ``text`` (whole lines, newlines included)."""

    start: int
    end: int
    text: str


def line_edits(old: str, new: str) -> list[LineEdit]:
    """The smallest set of whole-line replacements that turns ``old`` into ``new``."""
    before, after = old.splitlines(keepends=True), new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    return [
        LineEdit(i1 + 1, i2 + 1, "".join(after[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, object]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        return self.replacements.get(id(original_node), updated_node)


def _add_imports(module: cst.Module, needed: list[NeededImport]) -> cst.Module:
    body = list(module.body)
    for item in needed:
        if _extend_from_import(body, item):
            continue
        statement = cst.parse_statement(
            f"from {item.module} import {item.name}\n" if item.name else f"import {item.module}\n"
        )
        body.insert(_import_position(body), statement)
    return module.with_changes(body=body)


def _extend_from_import(body: list[cst.CSTNode], item: NeededImport) -> bool:
    """Add the name to an existing ``from <module> import ...`` line (not a star import)."""
    if item.name is None:
        return False
    for index, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.ImportFrom) and not small.relative and dotted(small.module) == item.module:
            if isinstance(small.names, cst.ImportStar):
                return True  # already in scope
            names = list(small.names)
            names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            names.append(cst.ImportAlias(cst.Name(item.name)))
            body[index] = stmt.with_changes(body=[small.with_changes(names=names)])
            return True
    return False


def _import_position(body: list[cst.CSTNode]) -> int:
    """After the last top-level import (or the docstring and ``__future__`` imports)."""
    position = 0
    for index, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        is_docstring = index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
        if is_docstring or isinstance(small, (cst.Import, cst.ImportFrom)):
            position = index + 1
        elif position:
            break
    return position


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
