"""Applying rewrites: one libcst transformation of the whole module, so everything a rewrite does not
replace round-trips byte for byte (what libcst's own round trip drops is put back by
:func:`fsdp2_lint.fixing.lines.fixed_bytes`), and the imports the rewrites need added once, in the
file's style."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from fsdp2_lint.analysis.syntax import dotted
from fsdp2_lint.fixing.rewrite import NeededImport, Rewrite


def apply_rewrites(
    module: cst.Module, rewrites: Iterable[Rewrite], parents: dict[int, cst.CSTNode] | None = None
) -> cst.Module:
    """The module with every rewrite's replacements made and the imports they need added once.
    Given the module's ``parents`` map, only the replaced nodes' ancestors are visited and rebuilt:
    every other node stays the same object, and the work follows the rewrite, not the file."""
    rewrites = list(rewrites)
    replacements = {id(old): new for rewrite in rewrites for old, new in rewrite.replacements.items()}
    fixed = module.visit(_Replace(replacements, _ancestors(replacements, parents) if parents is not None else None))
    needed = list(dict.fromkeys(needed for rewrite in rewrites for needed in rewrite.imports))
    return _add_imports(fixed, needed) if needed else fixed


def _ancestors(replacements: dict[int, object], parents: dict[int, cst.CSTNode]) -> set[int]:
    found: set[int] = set()
    for key in replacements:
        while key in parents and id(parents[key]) not in found:
            key = id(parents[key])
            found.add(key)
    return found


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, object], visited: set[int] | None) -> None:
        super().__init__()
        self.replacements = replacements
        self.visited = visited  # the nodes whose children may hold a replacement; None: all

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.visited is None or id(node) in self.visited

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
        position = _plain_import_position(body, item.module) if item.name is None else None
        if position is None:
            body.insert(_import_position(body), statement)
            continue
        following = body[position]
        if all(line.comment is None for line in following.leading_lines):  # the blank lines stay above
            statement = statement.with_changes(leading_lines=following.leading_lines)
            body[position] = following.with_changes(leading_lines=())
        body.insert(position, statement)
    return module.with_changes(body=body)


def _plain_import_position(body: list[cst.CSTNode], name: str) -> int | None:
    """Where isort puts ``import name`` in the first block of imports: before the ``from`` imports
    and the plain imports that sort after it."""
    seen = False
    for index, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
        if isinstance(small, cst.ImportFrom) and not (small.module and dotted(small.module) == "__future__"):
            return index
        if isinstance(small, cst.Import) and dotted(small.names[0].name) > name:
            return index
        if seen and not isinstance(small, (cst.Import, cst.ImportFrom)):
            return None
        seen = seen or isinstance(small, (cst.Import, cst.ImportFrom))
    return None


def _extend_from_import(body: list[cst.CSTNode], item: NeededImport) -> bool:
    """Add the name to an existing ``from <module> import ...`` line (not a star import)."""
    if item.name is None:
        return False
    for index, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.ImportFrom) and not small.relative and dotted(small.module) == item.module:
            if isinstance(small.names, cst.ImportStar):
                return True  # already in scope
            body[index] = stmt.with_changes(body=[small.with_changes(names=_with_name(list(small.names), item.name))])
            return True
    return False


def _with_name(names: list[cst.ImportAlias], name: str) -> list[cst.ImportAlias]:
    """The imported names with ``name`` added: where isort and Ruff would put it when the names are
    in their order (constants, classes, then functions), else last; separators in the line's style."""
    keys = [_import_order(dotted(alias.name)) for alias in names]
    position = len(names)
    if keys == sorted(keys):
        position = next((i for i, key in enumerate(keys) if key > _import_order(name)), len(names))
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if position < len(names):  # a comma follows the new name: the one after its predecessor
        before = names[position - 1].comma if position else names[0].comma
        before = _uncommented(before) if isinstance(before, cst.Comma) else separator
        return [*names[:position], cst.ImportAlias(cst.Name(name), comma=before), *names[position:]]
    last, between = names[-1], names[-2].comma if len(names) > 1 else separator
    between = _uncommented(between) if isinstance(between, cst.Comma) else separator
    ending = last.comma
    if _on_lines_of_their_own(between, ending):  # the comment ending the last name's line stays with it
        kept = ending.whitespace_after.first_line
        between = between.with_changes(whitespace_after=between.whitespace_after.with_changes(first_line=kept))
        ending = _uncommented(ending)
    return [*names[:-1], last.with_changes(comma=between), cst.ImportAlias(cst.Name(name), comma=ending)]


def _on_lines_of_their_own(*separators: object) -> bool:
    """Is each a comma that ends its name's line (a parenthesized import, one name a line)?"""
    return all(
        isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        for comma in separators
    )


def _uncommented(comma: cst.Comma) -> cst.Comma:
    """A separator copied from another name, less the comment that ends that name's line."""
    space = comma.whitespace_after
    if isinstance(space, cst.ParenthesizedWhitespace) and space.first_line.comment is not None:
        return comma.with_changes(whitespace_after=space.with_changes(first_line=cst.TrailingWhitespace()))
    return comma


def _import_order(name: str) -> tuple[int, str]:
    """isort's and Ruff's default order of imported names: CONSTANTS, Classes, functions."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name


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
