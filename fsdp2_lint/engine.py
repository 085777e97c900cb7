"""Lint one file's bytes (:mod:`fsdp2_lint.pipeline` is everything above one file), and fix them.

The prefilter (each selected rule's required tokens) decides whether the file can
violate anything at all; if so, and if it is no larger than ``max_file_size`` and nests no deeper
than libcst's parser handles (:mod:`fsdp2_lint.nesting`), it is parsed once, interpreted once into
facts, and every applicable rule reads those facts. Findings in code a test expects to raise (`with
pytest.raises(...)`) are dropped: the misuse is deliberate there. A rule that raises is
reported as an internal error of that rule and never hides the other rules' findings.

What it returns (:class:`~fsdp2_lint.diagnostics.Diagnostic`, FSDP000 for a file it cannot read or
parse) is defined in :mod:`fsdp2_lint.diagnostics`; the size limit's default in
:mod:`fsdp2_lint.sources`. :func:`fix_source` applies the rules' rewrites round after round
(:mod:`fsdp2_lint.fixing`).
"""

from __future__ import annotations

import gc
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from fsdp2_lint.diagnostics import PARSE_ERROR, Applicability, Diagnostic, Fix, Related, file_error
from fsdp2_lint.prefilter import applicable_rules
from fsdp2_lint.rule import Finding, Rule, RuleLike, loaded, rule_heads
from fsdp2_lint.sources import DEFAULT_MAX_FILE_SIZE, read_source, reason

# The parser, the analysis, the fixing and the nesting estimate are imported where a file is
# parsed: a run whose files the prefilter rejects imports none of them (tests/cli/test_startup.py).
if TYPE_CHECKING:
    import libcst as cst

    from fsdp2_lint.analysis.facts import FileFacts
    from fsdp2_lint.analysis.project import Project
    from fsdp2_lint.fixing.rewrite import Rewrite

# A suppression comment (case-insensitive): `re` compiles it when a diagnostic is first checked.
_NOQA = (
    r"#\s*(?:noqa(?P<noqa>\s*:\s*(?P<codes>[A-Za-z]+\d+(?:\s*,?\s*[A-Za-z]+\d+)*))?"
    r"|fsdp2-lint\s*:\s*disable\s*=\s*(?P<disabled>[A-Za-z]+\d+(?:\s*,\s*[A-Za-z]+\d+)*))"
)
_DECODE_HINT = "save the file as UTF-8, or declare its encoding (PEP 263): fsdp2-lint checked nothing else in it"
_READ_HINT = "check the path and its permissions"
_TOO_DEEP_HINT = "Python itself cannot compile this file: fsdp2-lint checked nothing else in it"
_LIMIT_HINT = "Python accepts this file: the limit is fsdp2-lint's, and it checked nothing else in this file"
_TOO_LARGE_HINT = "raise max-file-size in [tool.fsdp2-lint] (or pass --max-file-size) to have it checked"
_PYTHON_RECURSION_LIMIT = 1000  # what `python train.py` compiles the file with
# libcst's parser takes 0.5 s and 200 MB at this estimated depth (lambda, `x if c else`), and time
# and memory grow with its square; real code stays near 100 (torch's sources: at most 109)
MAX_NESTING = 1000
INTERNAL_HINT = "a bug in fsdp2-lint: please report it with the file; the other files were checked"
# Allocations between two collections of the youngest generation while a file is linted (Python's default:
# 700). The analysis makes short-lived values by the million while the project's parsed modules stay
# alive all run long, and the default has the collector rescan those: a sixth of a run's CPU.
YOUNG_COLLECTION_THRESHOLD = 10_000

_RULE_INSTANCES: dict[type[Rule], Rule] = {}
R = TypeVar("R", bound=RuleLike)


def lint_file(
    path: Path,
    rules: Sequence[RuleLike] | None = None,
    display_path: str | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    project: Project | None = None,
) -> list[Diagnostic]:
    shown = display_path if display_path is not None else str(path)
    try:
        data = read_source(path)
    except OSError as error:
        return [read_error(shown, error)]
    return lint_source(data, shown, rules, max_file_size, InProject(project, path) if project else None)


def read_error(path: str, error: OSError) -> Diagnostic:
    """FSDP000 for a file that cannot be read."""
    return file_error(path, f"cannot read file: {reason(error)}", hint=_READ_HINT)


class InProject(NamedTuple):  # not a dataclass: compiling its methods would cost every start
    """Where a file sits: the project whose modules its analysis follows, and the file's path."""

    project: Project
    file: Path


def lint_source(
    data: bytes,
    path: str,
    rules: Sequence[RuleLike] | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    where: InProject | None = None,
) -> list[Diagnostic]:
    """Diagnostics for one file's bytes, sorted by position (this file's first, then those the
    analysis found in other project modules it followed), suppressions applied. A MemoryError
    propagates: the caller knows what memory the process had (see :mod:`fsdp2_lint.isolation`)."""
    return _lint(data, path, rules, max_file_size, where).diagnostics


def reaches_parser(data: bytes, rules: Sequence[RuleLike] | None, max_file_size: int) -> bool:
    """Whether linting these bytes goes as far as the parser: a selected rule can fire on them
    and they are within ``max_file_size`` (0: no limit)."""
    return _oversized(data, "", max_file_size) is None and bool(
        applicable_rules(rule_heads() if rules is None else rules, data)
    )


def parseable(data: bytes) -> bool:
    """May a project module the analysis follows be parsed: no deeper than the parser handles?
    (A module too large to read is not read at all.)"""
    from fsdp2_lint.nesting import nesting_depth  # with the first file the prefilter admits

    return nesting_depth(data) <= MAX_NESTING


class _Linted:
    """One lint of a file's bytes: the diagnostics, each with the rule's rewrite it came with, and the
    facts they were computed from (None when the file was not analysed). A plain class: a dataclass's
    methods would be compiled at every start, and none is used."""

    __slots__ = ("findings", "facts", "broken")

    def __init__(
        self, findings: list[tuple[Diagnostic, Rewrite | None]], facts: FileFacts | None = None, broken: bool = False
    ) -> None:
        self.findings = findings
        self.facts = facts
        self.broken = broken  # the file could not be parsed or analysed

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [diagnostic for diagnostic, _ in self.findings]


@contextmanager
def _fewer_collections() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


@_fewer_collections()
def _lint(
    data: bytes, path: str, rules: Sequence[RuleLike] | None, max_file_size: int, where: InProject | None = None
) -> _Linted:
    import libcst as cst

    selected = rule_heads() if rules is None else rules
    applicable = applicable_in(selected, data, where)
    if not applicable:
        return _Linted([])
    refused = _oversized(data, path, max_file_size) or _too_deep(data, path)
    if refused is not None:
        return _Linted([(refused, None)], broken=True)
    try:
        module = where.project.parse_linted(where.file, data, cst.parse_module) if where else cst.parse_module(data)
    except cst.ParserSyntaxError as error:
        return _Linted([(_syntax_error(data, path, error), None)], broken=True)
    except (UnicodeDecodeError, LookupError, SyntaxError) as error:
        return _Linted([(file_error(path, f"cannot decode file: {error}", hint=_DECODE_HINT), None)], broken=True)
    try:
        facts = _facts(data, path, module, where, max_file_size)
    except RecursionError:
        return _Linted(
            [(file_error(path, "file is nested too deeply to analyse", hint=INTERNAL_HINT), None)], broken=True
        )
    except MemoryError:
        raise
    except Exception as error:  # a bug of ours must not cost the user the other files
        message = f"internal error while analysing the file: {type(error).__name__}: {error}"
        return _Linted([(file_error(path, message, hint=INTERNAL_HINT), None)], broken=True)
    findings: list[tuple[Diagnostic, Rewrite | None]] = []
    for rule in applicable:
        findings.extend(_run_rule(loaded(rule), facts))
    lines = {text.path: text.bare_lines for text in (facts.text, *facts.others)}
    kept = (pair for pair in findings if not _suppressed(pair[0], lines[pair[0].path]))
    order = lambda pair: (pair[0].path != path, pair[0].path, pair[0].line, pair[0].column, pair[0].code)  # noqa: E731
    return _Linted(sorted(kept, key=order), facts)


def _facts(data: bytes, path: str, module: cst.Module, where: InProject | None, max_file_size: int) -> FileFacts:
    """The file's facts; in a project, its runs follow its imports into the project's modules."""
    from fsdp2_lint.analysis.facts import FileFacts, ModuleText, interpret

    if where is None:
        return FileFacts(path, data, module, interpret(module, data).traces)
    analysis = interpret(module, data, where.project, where.file, _may_matter(where.project))
    others = [ModuleText(display_path(other), source, parsed) for other, source, parsed in analysis.modules]
    return FileFacts(path, data, module, analysis.traces, others, where.project.statement_links(where.file, module))


def applicable_in(rules: Sequence[R], data: bytes, where: InProject | None) -> list[R]:
    """The rules among ``rules`` that can report something in the file, judged on the code its
    analysis can read: its own, and in a project, that of every project module it imports (directly
    or not), each module's tokens found once per project."""
    if where is None:
        return applicable_rules(rules, data)
    imported = [text for _, text in where.project.imported_sources(where.file, data)]
    return applicable_rules(rules, data, imported, where.project.token_facts)


# Code that selects the rank's device (``set_device``, ``set_device_index``): FSDP011 asks whether a
# run did, wherever the helper is (torchtune's ``utils.get_device("cuda")`` is given only a string).
DEVICE_SELECTION_TOKEN = b"set_device"
# Code that builds modules on the meta device: FSDP006 asks whether the model a helper in another
# module built there is materialised, and that module need not name `fully_shard` itself.
META_DEVICE_TOKENS = (b'"meta"', b"'meta'", b"init_empty_weights")


def _may_matter(project: Project) -> Callable[[bytes], bool]:
    """May a project module's code matter to some rule (do its own tokens pass the prefilter, or does
    it select the device or build on the meta device)? Judged for every rule, so that selecting rules
    never changes what a selected one finds; each module's tokens found once per project."""
    return lambda data: (
        DEVICE_SELECTION_TOKEN in data
        or any(token in data for token in META_DEVICE_TOKENS)
        or bool(applicable_rules(rule_heads(), data, facts=project.token_facts))
    )


def display_path(path: Path) -> str:
    """How a project module the analysis followed is named in diagnostics: relative to the working
    folder when it is under it, else in full."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()


def _run_rule(rule: type[Rule], facts: FileFacts) -> Iterable[tuple[Diagnostic, Rewrite | None]]:
    instance = _RULE_INSTANCES.get(rule) or _RULE_INSTANCES.setdefault(rule, rule())
    seen: set[int] = set()
    found: list[tuple[Diagnostic, Rewrite | None]] = []
    try:
        for finding in instance.check(facts):
            if id(finding.node) not in seen and not facts.expects_exception(finding.node):
                seen.add(id(finding.node))
                found.append((_diagnostic(rule, finding, facts), finding.fix))
    except MemoryError:
        raise
    except Exception as error:  # one broken rule must not hide the others
        message = f"internal error in rule {rule.code}: {type(error).__name__}: {error}"
        return [(file_error(facts.path, message, hint=INTERNAL_HINT), None)]
    return found


def _diagnostic(rule: type[Rule], finding: Finding, facts: FileFacts) -> Diagnostic:
    """The finding as reported, in the file that holds its node. A fix is offered in the linted
    file only: the rules build fixes against it."""
    text = facts.text_of(finding.node)
    where = text.layout.position(finding.node)
    lines = text.bare_lines
    return Diagnostic(
        code=rule.code,
        name=rule.name,
        message=finding.message or rule.summary,
        hint=finding.hint or rule.hint,
        severity=finding.severity or rule.severity,
        path=text.path,
        line=where.start.line,
        column=where.start.column + 1,
        end_line=where.end.line,
        end_column=where.end.column + 1,
        source_line=lines[where.start.line - 1] if where.start.line <= len(lines) else "",
        fix=_fix(finding.fix, facts) if finding.fix and text is facts.text else None,
        related=tuple(_related(facts, node, message) for node, message in finding.related),
    )


def _related(facts: FileFacts, node: cst.CSTNode, message: str) -> Related:
    text = facts.text_of(node)
    where = text.layout.position(node)
    start, end = where.start, where.end
    return Related(text.path, start.line, start.column + 1, end.line, end.column + 1, message)


def _fix(rewrite: Rewrite, facts: FileFacts) -> Fix:
    """The rewrite as whole-line edits of the file (what applying it alone changes)."""
    from fsdp2_lint.fixing.text_edits import text_edits

    return Fix(rewrite.description, rewrite.applicability, tuple(text_edits(facts, rewrite)))


class FixResult(NamedTuple):  # not a dataclass: compiling its methods would cost every start, --fix or not
    """What fixing one file's bytes produced: the fixed bytes (the input itself when nothing was
    fixed), the diagnostics whose fixes were applied (as reported in the round that fixed them),
    and the diagnostics of the fixed bytes."""

    source: bytes
    fixed: tuple[Diagnostic, ...]
    remaining: tuple[Diagnostic, ...]


MAX_FIX_ROUNDS = 10


def fix_source(
    data: bytes,
    path: str,
    rules: Sequence[RuleLike] | None = None,
    unsafe: bool = False,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    where: InProject | None = None,
) -> FixResult:
    """Apply the fixes of the diagnostics :func:`lint_source` reports (safe ones; unsafe ones too
    with ``unsafe``), round after round until none is left, since a fix can expose another. Each
    round re-parses the file and applies every fix that does not overlap an earlier one in one libcst
    transformation. A round whose result does not parse or cannot be analysed is dropped: a faulty
    fix must never break the user's file. Only this file is edited: a fix is offered for a
    diagnostic in the file itself."""
    from fsdp2_lint.fixing.apply import apply_rewrites
    from fsdp2_lint.fixing.lines import fixed_bytes

    linted = _lint(data, path, rules, max_file_size, where)
    fixed: list[Diagnostic] = []
    for _ in range(MAX_FIX_ROUNDS):
        if linted.facts is None:
            break
        chosen = _compatible_fixes(linted.findings, linted.facts, unsafe)
        if not chosen:
            break
        fixed_module = apply_rewrites(linted.facts.module, [rewrite for _, rewrite in chosen], linted.facts.parents)
        candidate = fixed_bytes(data, linted.facts.module, fixed_module)
        after = _lint(candidate, path, rules, max_file_size, where)
        if candidate == data or after.broken or (after.facts is None and not _parses(candidate)):
            break
        data, linted = candidate, after
        fixed.extend(diagnostic for diagnostic, _ in chosen)
    return FixResult(data, tuple(fixed), tuple(linted.diagnostics))


def _compatible_fixes(
    findings: list[tuple[Diagnostic, Rewrite | None]], facts: FileFacts, unsafe: bool
) -> list[tuple[Diagnostic, Rewrite]]:
    """The rewrites to apply in one round: in file order, each one unless it replaces code that an
    earlier one replaces too (it is applied in a later round, on the re-parsed file, if still due)."""
    chosen: list[tuple[Diagnostic, Rewrite]] = []
    taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for diagnostic, rewrite in findings:
        if rewrite is None or not (rewrite.applicability is Applicability.SAFE or unsafe):
            continue
        spans = [_span(facts, old) for old in rewrite.replacements]
        if any(start < end_taken and start_taken < end for start, end in spans for start_taken, end_taken in taken):
            continue
        chosen.append((diagnostic, rewrite))
        taken.extend(spans)
    return chosen


def _span(facts: FileFacts, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    where = facts.position(node)
    return (where.start.line, where.start.column), (where.end.line, where.end.column)


def _parses(data: bytes) -> bool:
    import libcst as cst

    try:
        cst.parse_module(data)
    except (cst.ParserSyntaxError, UnicodeDecodeError, LookupError, SyntaxError):
        return False
    return True


def _oversized(data: bytes, path: str, max_file_size: int) -> Diagnostic | None:
    if not max_file_size or len(data) <= max_file_size:
        return None
    message = f"file is {len(data):,} bytes, more than max-file-size ({max_file_size:,}): fsdp2-lint did not analyse it"
    return file_error(path, message, hint=_TOO_LARGE_HINT)


def _too_deep(data: bytes, path: str) -> Diagnostic | None:
    """FSDP000 for a file nested deeper than libcst's parser handles (it overflows its stack, or
    takes minutes and gigabytes, on such files): CPython's refusal where it refuses the file too,
    else a message that puts the limit on fsdp2-lint, not on the file."""
    from fsdp2_lint.nesting import nesting_depth

    depth = nesting_depth(data)
    if depth <= MAX_NESTING:
        return None
    message = f"fsdp2-lint cannot analyse this file: it nests up to {depth:,} levels deep (its parser handles {MAX_NESTING:,})"
    return _python_refusal(data, path) or file_error(path, message, hint=_LIMIT_HINT)


def _python_refusal(data: bytes, path: str) -> Diagnostic | None:
    """FSDP000 with CPython's reason when Python itself cannot compile the file, as `python
    train.py` compiles it (default recursion limit); None when it can."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_PYTHON_RECURSION_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequences are not ours to report
            compile(data, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        return file_error(path, f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
    except (RecursionError, MemoryError, ValueError) as error:  # ValueError: a null byte (before Python 3.12)
        reason = str(error) or "the expression is too complex for its parser"
        return file_error(path, f"Python cannot compile this file: {reason}", hint=_TOO_DEEP_HINT)
    finally:
        sys.setrecursionlimit(limit)
    return None


def _syntax_error(data: bytes, path: str, error: cst.ParserSyntaxError) -> Diagnostic:
    """CPython's own message and position where it rejects the file too (libcst's parser reports
    the token it expected, \"expected one of ), *, **, NAME\", at the start of the line); where
    Python compiles the file, libcst's refusal is a limit of fsdp2-lint and FSDP000 says so."""
    refusal = _python_refusal(data, path)
    if refusal is not None:
        return refusal
    reason = error.message.removeprefix("parser error: ")
    message = f"fsdp2-lint's parser cannot parse this file, which Python compiles: {reason}"
    return file_error(path, message, error.editor_line, hint=_LIMIT_HINT)


def _suppressed(diagnostic: Diagnostic, lines: list[str]) -> bool:
    if diagnostic.code == PARSE_ERROR or diagnostic.line > len(lines):
        return False
    for match in re.finditer(_NOQA, lines[diagnostic.line - 1], re.IGNORECASE):
        listed = match.group("codes") or match.group("disabled")
        if listed is None:
            return True  # a bare noqa comment silences every code on the line
        if diagnostic.code in {code.upper() for code in re.split(r"[\s,]+", listed) if code}:
            return True
    return False


def raise_recursion_limit() -> None:
    """Deeply nested expressions recurse once per level in the parser and the interpreter."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
