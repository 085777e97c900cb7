"""Applying rule fixes: one libcst transformation of the whole module, so everything a fix does not
replace round-trips byte for byte (comments, whitespace, line endings, encoding line, BOM); the
few bytes libcst's own round trip drops (form feeds before a statement, a lone ``\\r`` ending the
file) are put back by :func:`fixed_bytes`.

Rules build replacement nodes; :func:`reference` tells a rule how this file can name a symbol
(``CPUOffloadPolicy`` after ``from torch.distributed.fsdp import ...``, ``fsdp.CPUOffloadPolicy``
after ``import torch.distributed.fsdp as fsdp``) and which import, if any, must be added for it.
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from fsdp2_lint.analysis.syntax import dotted, source_lines
from fsdp2_lint.rule import NeededImport, Replace, RuleFix

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


def apply(module: cst.Module, fixes: Iterable[RuleFix], parents: dict[int, cst.CSTNode] | None = None) -> cst.Module:
    """The module with every fix's replacements made and the imports they need added once. Given
    the module's ``parents`` map, only the replaced nodes' ancestors are visited and rebuilt: every
    other node stays the same object, and the work follows the fix, not the file."""
    fixes = list(fixes)
    replacements = {id(change.old): change.new for fix in fixes for change in fix.changes}
    fixed = module.visit(_Replace(replacements, _ancestors(replacements, parents) if parents is not None else None))
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


@dataclass(frozen=True)
class Move:
    """A statement moved down its block: the ``changes`` that do it, and the statements it now
    follows (``passed``: those it jumps over, the anchor's statement last)."""

    changes: tuple[Replace, ...]
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
    changes = [
        Replace(statement, cst.RemoveFromParent()),
        Replace(target, cst.FlattenSentinel([successor if following is target else target, landed])),
    ]
    if following is not target and successor is not following:
        changes.append(Replace(following, successor))
    return Move(tuple(changes), statement, tuple(body[source + 1 : destination + 1]))


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


@dataclass(frozen=True)
class LineEdit:
    """Replace lines ``start`` .. ``end - 1`` (1-based) with ``text`` (whole lines, newlines included)."""

    start: int
    end: int
    text: str


def line_edits(old: str, new: str) -> list[LineEdit]:
    """The smallest set of whole-line replacements that turns ``old`` into ``new``. The lines both
    share at the start and at the end are set aside first: matching repeated lines costs difflib
    time quadratic in their number."""
    before, after = source_lines(old), source_lines(new)
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    before, after = before[head : len(before) - tail], after[head : len(after) - tail]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    return [
        LineEdit(head + i1 + 1, head + i2 + 1, "".join(after[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


# What libcst's round trip drops from a line that starts a statement: the whitespace up to the
# line's last form feed (Python resets the indentation column there, so it is not indentation).
_DROPPED_PREFIX = re.compile(r"[ \t\f]*\f")


def fixed_bytes(original: bytes, module: cst.Module, fixed: cst.Module) -> bytes:
    """The bytes of ``fixed`` (``module``, parsed from ``original``, with fixes applied), with what
    libcst's round trip of ``original`` drops put back."""
    text = original.decode(module.encoding)
    if "\f" not in text and not text.endswith("\r"):
        return fixed.bytes  # nothing libcst drops
    kept = keep_dropped(text, module.code, fixed.code)
    return fixed.bytes if kept is None else kept.encode(fixed.encoding)


def keep_dropped(text: str, rendered: str, fixed: str) -> str | None:
    """``fixed`` (libcst's code for a fixed version of ``text``, ``rendered`` being its code for
    ``text`` itself) with the bytes libcst drops put back: form feeds before a statement and a lone
    ``\\r`` ending the file. Lines the fix leaves alone are ``text``'s own; the first line of each
    replaced run keeps its form feeds (it starts a statement too: what precedes it is unchanged).
    None when ``rendered`` differs from ``text`` in another way."""
    if text == rendered:
        return fixed
    dropped = _dropped(text, rendered)
    if dropped is None:
        return None
    lines, prefixes, tail = dropped
    result: list[str] = []
    done = 0
    for edit in line_edits(rendered, fixed):
        result.extend(lines[done : edit.start - 1])
        replacement = source_lines(edit.text)
        if replacement and edit.end > edit.start:
            replacement[0] = prefixes[edit.start - 1] + replacement[0]
        result.extend(replacement)
        done = edit.end - 1
    result.extend(lines[done:])
    return "".join(result) + tail


def _dropped(text: str, rendered: str) -> tuple[list[str], list[str], str] | None:
    """``text``'s lines, what libcst dropped from the start of each, and the line ending it dropped
    from the end of the file; None when ``rendered`` is not ``text`` less such bytes."""
    lines = source_lines(rendered)
    for tail in ("", "\r") if text.endswith("\r") else ("",):
        originals = source_lines(text[: len(text) - len(tail)])
        if len(originals) != len(lines):
            continue
        prefixes = [_prefix(original, line) for original, line in zip(originals, lines, strict=True)]
        if None not in prefixes:
            return originals, prefixes, tail
    return None


def _prefix(original: str, rendered: str) -> str | None:
    if original == rendered:
        return ""
    prefix = original[: len(original) - len(rendered)]
    return prefix if original.endswith(rendered) and _DROPPED_PREFIX.fullmatch(prefix) else None


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """What fixing changes, as a unified diff (empty when nothing does)."""
    encoding = tokenize.detect_encoding(io.BytesIO(old).readline)[0]
    before = source_lines(old.decode(encoding, errors="replace"))
    after = source_lines(new.decode(encoding, errors="replace"))
    lines = difflib.unified_diff(before, after, fromfile=path, tofile=path)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


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
        added = cst.ImportAlias(cst.Name(name), comma=before if isinstance(before, cst.Comma) else separator)
        return [*names[:position], added, *names[position:]]
    last, between = names[-1], names[-2].comma if len(names) > 1 else separator
    between = between if isinstance(between, cst.Comma) else separator
    return [*names[:-1], last.with_changes(comma=between), cst.ImportAlias(cst.Name(name), comma=last.comma)]


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
