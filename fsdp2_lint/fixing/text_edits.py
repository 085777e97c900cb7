"""A rewrite as text edits, at a cost that follows the rewrite rather than the file.

Editors and ``--output-format json`` get each fix as whole-line edits. Applying the rewrite to the
module only rebuilds the replaced nodes' ancestors (:func:`fsdp2_lint.fixing.apply.apply_rewrites`
with the file's parent map), so every statement the rewrite leaves alone is the same object in both trees:
comparing the two trees by identity finds the statements that changed, and only those are
generated again and compared line by line. A change that does not sit in whole statements (the
module's header) falls back to comparing the two files.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from fsdp2_lint.analysis.syntax import generate
from fsdp2_lint.diagnostics import Edit
from fsdp2_lint.fixing.apply import apply_rewrites
from fsdp2_lint.fixing.lines import keep_dropped, line_edits
from fsdp2_lint.fixing.rewrite import Rewrite

if TYPE_CHECKING:
    from fsdp2_lint.analysis.facts import FileFacts

# Parts of compound statements that hold the blocks nested in them (`else:`, `except:`, `elif`).
_BLOCK_HOLDERS = (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.If, cst.MatchCase)


@dataclasses.dataclass(frozen=True)
class _Region:
    """Statements of one block replaced by others: ``old`` (maybe none, for an insertion) lies
    between the statements ``previous`` and ``following`` of the original block."""

    indent: tuple[str, ...]
    old: tuple[cst.BaseStatement, ...]
    new: tuple[cst.BaseStatement, ...]
    previous: cst.BaseStatement | None
    following: cst.BaseStatement | None


def text_edits(facts: FileFacts, rewrite: Rewrite) -> list[Edit]:
    """The whole-line edits that make the file what applying ``rewrite`` alone makes it."""
    module = facts.module
    fixed = apply_rewrites(module, [rewrite], facts.parents)
    regions = _changed_blocks(module, fixed, (), module.default_indent)
    edits = [] if regions is not None else None
    for region in regions or ():
        found = _region_edits(facts, fixed, region)
        if found is None:
            edits = None
            break
        edits.extend(found)
    if edits is None:
        text = "".join(facts.code_lines)
        kept = keep_dropped(text, facts.module_code, fixed.code)
        return line_edits(facts.module_code, fixed.code) if kept is None else line_edits(text, kept)
    return edits


def _changed_blocks(
    old: cst.Module | cst.IndentedBlock, new: cst.Module | cst.IndentedBlock, indent: tuple[str, ...], default: str
) -> list[_Region] | None:
    """The regions of ``old``'s statements that ``new`` replaces, looking into a statement whose
    only changes are in its own blocks; None when something besides statements changed."""
    if old is new:
        return []
    if type(old) is not type(new) or not _same_except(old, new, "body"):
        return None
    if isinstance(old, cst.IndentedBlock):
        indent = (*indent, default if old.indent is None else old.indent)
    old_body, new_body = list(old.body), list(new.body)
    matcher = difflib.SequenceMatcher(None, [id(s) for s in old_body], [id(s) for s in new_body], autojunk=False)
    regions: list[_Region] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 - i1 == j2 - j1 == 1 and type(old_body[i1]) is type(new_body[j1]):
            nested = _changed_parts(old_body[i1], new_body[j1], indent, default)
            if nested is not None:
                regions.extend(nested)
                continue
        previous = old_body[i1 - 1] if i1 > 0 else None
        following = old_body[i2] if i2 < len(old_body) else None
        regions.append(_Region(indent, tuple(old_body[i1:i2]), tuple(new_body[j1:j2]), previous, following))
    return regions


def _changed_parts(old: object, new: object, indent: tuple[str, ...], default: str) -> list[_Region] | None:
    """The regions of the blocks nested in two versions of one compound statement (or of one of
    its ``else``/``except``/``elif`` parts), when those blocks are all that differ."""
    if isinstance(old, cst.IndentedBlock) and isinstance(new, cst.IndentedBlock):
        return _changed_blocks(old, new, indent, default)
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) == len(new):
        parts = zip(old, new, strict=True)
    elif type(old) is type(new) and isinstance(old, (cst.BaseCompoundStatement, *_BLOCK_HOLDERS)):
        parts = ((getattr(old, f.name), getattr(new, f.name)) for f in dataclasses.fields(old))
    else:
        return None
    regions: list[_Region] = []
    for old_part, new_part in parts:
        if old_part is new_part:
            continue
        found = _changed_parts(old_part, new_part, indent, default)
        if found is None:
            return None
        regions.extend(found)
    return regions


def _same_except(old: cst.CSTNode, new: cst.CSTNode, name: str) -> bool:
    return all(_same(getattr(old, f.name), getattr(new, f.name)) for f in dataclasses.fields(old) if f.name != name)


def _same(old: object, new: object) -> bool:
    """The same object, or sequences of the same objects (libcst rebuilds a visited sequence)."""
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))
    return old is new


def _region_edits(facts: FileFacts, fixed: cst.Module, region: _Region) -> list[Edit] | None:
    """The region's old lines against its statements generated again, as edits of the file."""
    lines, span = facts.code_lines, facts.layout.statement_lines
    if region.old:
        start, end = span(region.old[0])[0], span(region.old[-1])[1]
    elif region.following is not None:
        start = end = span(region.following)[0]
    elif region.previous is not None:
        start = end = span(region.previous)[1]
    else:
        return None
    if start > 1 and not lines[start - 2].endswith(("\n", "\r")):
        return None  # inserting after a last line that has no line break
    old_lines: Sequence[str] = lines[start - 1 : end - 1]
    last_line = bool(old_lines) and not old_lines[-1].endswith(("\n", "\r"))  # the file's, without a line end
    new = _code(fixed, region.new, region.indent, last_line)
    old = "".join(old_lines)
    if "\f" in old:  # form feeds before statements, which libcst's code drops (as fix_source does)
        new = keep_dropped(old, _code(facts.module, region.old, region.indent, last_line), new) or new
    return [
        replace(edit, line=start + edit.line - 1, end_line=start + edit.end_line - 1) for edit in line_edits(old, new)
    ]


def _code(module: cst.Module, statements: Sequence[cst.BaseStatement], indent: tuple[str, ...], last: bool) -> str:
    code = generate(module, statements, indent)
    return code.removesuffix(module.default_newline) if last else code
