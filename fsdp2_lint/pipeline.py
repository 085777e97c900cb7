"""The lint path above one file, the only one: ``check PATHS``, standard input, the language server
and the pre-commit hooks all go through here; :mod:`fsdp2_lint.engine` lints one file's bytes.

- Settings: :class:`SettingsResolver` gives each file the settings of its nearest configuration
  (or the one given); a :class:`LintTask` is one file with the rules, limits and report settings
  they give it, and the unsaved text when there is some (standard input, an editor's buffer).
- Files: each is read once here; the prefilter rules most out before any parsing, the results
  cache answers unchanged ones, and only the rest are parsed and analysed.
- Processes (:mod:`fsdp2_lint.isolation`): from ``PARALLEL_THRESHOLD`` files to analyse, worker
  processes do it (by path: the parent keeps no contents); below it, or with one job, this process
  does, except for heavy files, which get a worker of their own. A file that kills its worker, or
  exhausts its memory, costs that file an FSDP000 and the run goes on. Results come back in the
  order of the tasks, so the output is a serial run's whatever the number of jobs.
- Fixing (:func:`fix_file`): the engine's fix rounds, then the fixed bytes written back atomically
  (:mod:`fsdp2_lint.fixing.atomic_write`) or, when that is refused, the file's own diagnostics.
- Notebooks (:mod:`fsdp2_lint.notebooks`): a ``.ipynb`` file is read as the Python source of its
  code cells, linted (and cached) as that source, and its diagnostics mapped back to cells at the
  end; ``--fix`` puts the fixed source back into the edited cells only.
- FSDP000 is left out in one place, :func:`_reported`, for a file whose settings say so.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from fsdp2_lint.analysis.project import ParsedModules, Project, Projects
from fsdp2_lint.cache import Cache
from fsdp2_lint.config import Selection, Settings, find_config, load_settings
from fsdp2_lint.diagnostics import PARSE_ERROR, Diagnostic, Edit, Related, file_error
from fsdp2_lint.discovery import Unlintable, discover
from fsdp2_lint.engine import (
    FixResult,
    InProject,
    applicable_in,
    fix_source,
    lint_source,
    parseable,
    raise_recursion_limit,
    read_error,
)
from fsdp2_lint.rule import Rule
from fsdp2_lint.sources import DEFAULT_MAX_FILE_SIZE, is_notebook, read_source
from fsdp2_lint.torch_version import TorchVersion

# Imported where they are used: worker processes (:mod:`fsdp2_lint.isolation`) when a file is
# analysed, notebooks when one is read, the atomic writer when a fix is written. A run whose files
# the prefilter rejects imports none of them (tests/cli/test_startup.py).
if TYPE_CHECKING:
    from fsdp2_lint.isolation import Crash
    from fsdp2_lint.notebooks import NotebookSource

PARALLEL_THRESHOLD = 16
_WARNED: set[Path] = set()  # each layout problem once per process: `--fix` reads projects file by file


class SettingsResolver:
    """Settings per file: from the nearest configuration, or from the one given explicitly;
    ``max_file_size``, ``torch_version`` and ``exclude`` (the command line's) override the configured
    ones; ``extend_exclude`` adds to them."""

    def __init__(
        self,
        cli: Selection,
        config: Path | None = None,
        isolated: bool = False,
        max_file_size: int | None = None,
        no_follow_imports: bool = False,
        torch_version: TorchVersion | None = None,
        exclude: tuple[str, ...] | None = None,
        extend_exclude: tuple[str, ...] = (),
    ) -> None:
        self.cli = cli
        self.exclude = exclude  # --exclude: replaces the configured `exclude`
        self.extend_exclude = extend_exclude  # --extend-exclude: adds to it
        self.config = config
        self.isolated = isolated
        self.max_file_size = max_file_size
        self.no_follow_imports = no_follow_imports
        self.torch_version = torch_version
        self._by_config: dict[Path | None, Settings] = {}
        self._by_directory: dict[Path, Path | None] = {}

    def for_path(self, path: Path, is_dir: bool | None = None) -> Settings:
        if self.config is not None or self.isolated:
            return self._settings(self.config, Path.cwd())
        directory = path if (path.is_dir() if is_dir is None else is_dir) else path.parent
        # realpath: resolve() raises on a symbolic link loop
        directory = directory if directory.is_absolute() else Path(os.path.realpath(directory))
        if directory not in self._by_directory:
            self._by_directory[directory] = find_config(directory)
        return self._settings(self._by_directory[directory], Path.cwd())

    def _settings(self, config: Path | None, root: Path) -> Settings:
        if config not in self._by_config:
            settings = load_settings(config, self.cli, root)
            if self.max_file_size is not None:
                settings = replace(settings, max_file_size=self.max_file_size)
            if self.no_follow_imports:
                settings = replace(settings, follow_imports=False)
            if self.torch_version is not None:
                settings = replace(settings, torch_version=self.torch_version)
            settings = settings.with_cli_exclude(self.exclude, self.extend_exclude, Path.cwd())
            self._by_config[config] = settings
        return self._by_config[config]


class LintTask(NamedTuple):  # not a dataclass: compiling its methods would cost every start
    """One file to lint: where it is, the name it is reported under, what its settings select and
    report, and its unsaved text (None: read the file)."""

    path: Path
    display: str
    rules: tuple[type[Rule], ...]
    report_parse_errors: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    source: bytes | None = None
    follow_imports: bool = True
    import_roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, path: Path, settings: Settings, display: str, source: bytes | None = None) -> LintTask:
        rules = settings.rules_for(path)
        return cls(
            path,
            display,
            rules,
            settings.reports_parse_errors(path),
            settings.max_file_size,
            source,
            settings.follow_imports,
            settings.import_roots,
        )


def default_jobs() -> int:
    """All the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def lint_files(
    tasks: Sequence[LintTask],
    jobs: int | None = None,
    cache: Cache | None = None,
    overlays: Mapping[Path, bytes] | None = None,
    kept: ParsedModules | None = None,
) -> list[list[Diagnostic]]:
    """Each task's diagnostics (sorted by position), in task order. A task's analysis may find a
    misuse in another project module it follows: that diagnostic comes with the task, once in the
    run however many tasks find it. ``overlays``: unsaved texts of other files (an editor's buffers).
    ``kept``: parsed modules kept across runs in this process (an editor's server), reused while
    their text is unchanged."""
    raise_recursion_limit()
    projects = Projects(overlays, parseable, kept)
    results: list[list[Diagnostic]] = [[] for _ in tasks]
    pending: list[tuple[int, int]] = []  # (size, task index)
    notebooks: dict[int, NotebookSource] = {}
    for index, task in enumerate(tasks):
        data, notebook = _read_notebook(task)
        if notebook is not None:
            notebooks[index] = notebook
        answer = data if isinstance(data, list) else _without_parsing(task, data, cache, projects)
        if answer is None:
            pending.append((len(data), index))
        else:
            results[index] = answer
    _warn_once(projects)
    jobs = default_jobs() if jobs is None else max(1, jobs)
    workers = min(jobs, len(pending)) if len(pending) >= PARALLEL_THRESHOLD else 1
    order = [index for _, index in sorted(pending, key=lambda item: -item[0])]  # the largest first: no long tail
    analysed = _analyse([tasks[index] for index in order], workers, cache, projects)
    for index, diagnostics in zip(order, analysed, strict=True):
        results[index] = diagnostics
    for index, notebook in notebooks.items():
        results[index] = in_cells(results[index], notebook, tasks[index].display)
    return _once(
        tasks, [_reported(task.report_parse_errors, found) for task, found in zip(tasks, results, strict=True)]
    )


def _once(tasks: Sequence[LintTask], results: list[list[Diagnostic]]) -> list[list[Diagnostic]]:
    """The results with each finding once (one in a module that several linted files follow into),
    where it was first reported, as the analysis of its own file words it if that found it too (it
    names the objects as that file does, and offers the fix), else as first reported."""
    best: dict[tuple, Diagnostic] = {}
    for task, found in zip(tasks, results, strict=True):
        for diagnostic in found:
            key = _identity(diagnostic)
            if key not in best or (diagnostic.path == task.display and best[key].fix is None):
                best[key] = diagnostic
    kept: list[list[Diagnostic]] = []
    for found in results:
        kept.append([best.pop(key) for key in map(_identity, found) if key in best])
    return kept


def _identity(d: Diagnostic) -> tuple:
    return (d.path, d.line, d.column, d.end_line, d.end_column, d.code)


def unlintable(found: Unlintable, settings: Settings, display: str) -> list[Diagnostic]:
    """The FSDP000 of a path found that cannot be linted (see :mod:`fsdp2_lint.discovery`)."""
    return _reported(settings.reports_parse_errors(found.path), [file_error(display, found.reason, hint=found.hint)])


def _reported(report_parse_errors: bool, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics a file's settings report: all, or all but FSDP000."""
    return [d for d in diagnostics if report_parse_errors or d.code != PARSE_ERROR]


def _without_parsing(task: LintTask, data: bytes, cache: Cache | None, projects: Projects) -> list[Diagnostic] | None:
    """What this process answers without parsing: nothing for a file no selected rule can fire on
    (in the code its analysis can read), FSDP000 for an oversized one, a cached result; None when
    the file must be analysed."""
    where = _in_project(task, data, projects)
    if not applicable_in(task.rules, data, where):
        return []
    if task.max_file_size and len(data) > task.max_file_size:  # before the cache: its key has no limit
        return lint_source(data, task.display, task.rules, task.max_file_size)
    return cache.load(_cache_key(cache, task, data, where)) if cache is not None else None


def importers_of(files: list[Path], resolver: SettingsResolver) -> list[Path]:
    """The other files of the projects of ``files`` (those a walk of the project root finds) that
    import one of ``files``, directly or not: those whose analysis a change to them can change
    (``check --with-importers``). None for a file whose settings do not follow imports."""
    projects = Projects()
    given = {Path(os.path.realpath(file)) for file in files}
    targets: dict[Project, set[Path]] = {}
    for file in files:
        settings = resolver.for_path(file)
        if settings.follow_imports:
            real = Path(os.path.realpath(file))
            targets.setdefault(projects.for_file(real, settings.import_roots), set()).add(real)
    found: list[Path] = []
    for project, named in targets.items():
        walked = discover([project.root], lambda p, is_dir: resolver.for_path(p, is_dir).is_excluded(p, is_dir))
        candidates = [Path(os.path.realpath(item)) for item in walked if isinstance(item, Path)]
        found += project.importers(named, candidates)
    return [path for path in dict.fromkeys(found) if path not in given]


def imported_files(task: LintTask, overlays: Mapping[Path, bytes] | None = None) -> list[Path]:
    """The project modules the analysis of the task's file can read (its imports, transitively),
    read with ``overlays`` first; none when imports are not followed. An editor lints the file
    again when one of them changes."""
    data = _read(task)
    where = None if isinstance(data, list) else _in_project(task, data, Projects(overlays, parseable))
    return [] if where is None else [path for path, _ in where.project.imported_sources(where.file, data)]


def _warn_once(projects: Projects) -> None:
    """Each problem of a project's layout (its own `torch`) on standard error, once."""
    for path, message in projects.problems.items():
        if path not in _WARNED:
            _WARNED.add(path)
            print(f"warning: {message}", file=sys.stderr)


def _cache_key(cache: Cache, task: LintTask, data: bytes, where: InProject | None) -> str:
    reachable = where.project.imported_sources(where.file, data) if where is not None else ()
    return cache.key(data, task.display, task.rules, reachable)


def _read(task: LintTask) -> bytes | list[Diagnostic]:
    """The task's Python bytes (a notebook's code cells), or the FSDP000 that says why the file
    cannot be read."""
    return _read_notebook(task)[0]


def _read_raw(task: LintTask) -> bytes | list[Diagnostic]:
    """The task's bytes as they are, or the FSDP000 that says why the file cannot be read."""
    if task.source is not None:
        return task.source
    try:
        return read_source(task.path)
    except OSError as error:
        return [read_error(task.display, error)]


def _read_notebook(task: LintTask) -> tuple[bytes | list[Diagnostic], NotebookSource | None]:
    """:func:`_read`, and the notebook the bytes come from (None: a Python file)."""
    data = _read_raw(task)
    if isinstance(data, list) or not is_notebook(task.path.name):
        return data, None
    from fsdp2_lint.notebooks import NotebookError, read_notebook

    try:
        notebook = read_notebook(data)
    except NotebookError as error:
        return [file_error(task.display, str(error), hint=_NOTEBOOK_HINT)], None
    return notebook.python, notebook


_NOTEBOOK_HINT = "a .ipynb file must be a Jupyter notebook (JSON with a `cells` list): fsdp2-lint checked nothing in it"


def in_cells(diagnostics: Iterable[Diagnostic], notebook: NotebookSource, display: str) -> list[Diagnostic]:
    """The diagnostics of a notebook's joined source with their positions in its cells: ``cell``
    set, lines counted in the cell (those of other files, found by following imports, as they are)."""
    return [_in_cell(d, notebook) if d.path == display else d for d in diagnostics]


def _in_cell(d: Diagnostic, notebook: NotebookSource) -> Diagnostic:
    cell, line = notebook.locate(d.line)
    end_cell, end_line = notebook.locate(d.end_line)
    indent = notebook.indent_at(d.line)  # a cell indented as a whole is linted dedented
    shift = len(indent)
    end_column = d.end_column + shift
    if end_cell != cell:  # a span that runs into the next cell (a syntax error): up to its own line's end
        end_line, end_column = line, len(d.source_line) + 1 + shift
    fix = d.fix
    if fix is not None:
        fix = replace(fix, edits=tuple(_edit_in_cell(edit, notebook) for edit in fix.edits))
    related = tuple(_related_in_cell(r, notebook, d.path) for r in d.related)
    message = _lines_in_cells(d.message, notebook)
    return replace(
        d, message=message, line=line, column=d.column + shift, end_line=end_line, end_column=end_column, cell=cell,
        fix=fix, related=related, source_line=indent + d.source_line if d.source_line else "",
    )  # fmt: skip


def _edit_in_cell(edit: Edit, notebook: NotebookSource) -> Edit:
    cell, line = notebook.locate(edit.line)
    indent = notebook.indent_at(edit.line)
    return replace(
        edit, line=line, column=edit.column + len(indent), end_line=notebook.locate(edit.end_line)[1],
        end_column=edit.end_column + len(indent), content=edit.content.replace("\n", "\n" + indent), cell=cell,
    )  # fmt: skip


def _related_in_cell(r: Related, notebook: NotebookSource, path: str) -> Related:
    if r.path != path:
        return r
    cell, line = notebook.locate(r.line)
    shift = len(notebook.indent_at(r.line))
    message = _lines_in_cells(r.message, notebook)
    return replace(
        r, message=message, line=line, column=r.column + shift, end_line=notebook.locate(r.end_line)[1],
        end_column=r.end_column + shift, cell=cell,
    )  # fmt: skip


_LINE_REFERENCE = r"\bline (\d+)\b"  # compiled by `re` with the first notebook diagnostic


def _lines_in_cells(message: str, notebook: NotebookSource) -> str:
    """A message's references to lines of the same file ("line 41", as the analysis words them)
    as cell and line ("cell 3, line 2")."""
    return re.sub(_LINE_REFERENCE, lambda match: "cell {}, line {}".format(*notebook.locate(int(match[1]))), message)


def _analyse(tasks: list[LintTask], workers: int, cache: Cache | None, projects: Projects) -> list[list[Diagnostic]]:
    """Each task's diagnostics, in order; each result is cached by whoever computed it (a crash,
    which may not recur, is not cached)."""
    if workers <= 1:
        return [_lint_guarded(task, cache, projects) for task in tasks]
    from fsdp2_lint.isolation import memory_limit, run_isolated

    limits = [memory_limit(task.max_file_size) for task in tasks]
    limit = None if None in limits else max(limits, default=None)
    results = run_isolated(partial(_lint_in_worker, cache=cache, projects=projects), tasks, workers, limit)
    return [_crash_diagnostics(task, result) for task, result in zip(tasks, results, strict=True)]


def _lint_guarded(task: LintTask, cache: Cache | None, projects: Projects) -> list[Diagnostic]:
    """The task's lint in this process, or in a worker of its own for a heavy file."""
    from fsdp2_lint.isolation import run_guarded

    data = _read(task)
    if isinstance(data, list):
        return data
    work = partial(_lint_bytes, task, data, cache, projects)
    return _crash_diagnostics(task, run_guarded(work, data, task.rules, task.max_file_size))


def _lint_in_worker(task: LintTask, cache: Cache | None, projects: Projects) -> list[Diagnostic]:
    data = _read(task)  # read again: the parent keeps no file contents
    return data if isinstance(data, list) else _lint_bytes(task, data, cache, projects)


def _in_project(task: LintTask, data: bytes, projects: Projects) -> InProject | None:
    """Where the task's file sits in its project, for the analysis to follow its imports; None
    when imports are not followed."""
    if not task.follow_imports:
        return None
    file = Path(os.path.realpath(task.path))
    project = projects.for_file(file, task.import_roots, task.max_file_size)
    project.sources.overlays[file] = data  # the text linted is the text the other modules see
    return InProject(project, file)


def _lint_bytes(task: LintTask, data: bytes, cache: Cache | None, projects: Projects) -> list[Diagnostic]:
    where = _in_project(task, data, projects)
    diagnostics = lint_source(data, task.display, task.rules, task.max_file_size, where)
    if cache is not None:
        cache.store(_cache_key(cache, task, data, where), diagnostics)
    return diagnostics


def _crash_diagnostics(task: LintTask, result: list[Diagnostic] | Crash) -> list[Diagnostic]:
    from fsdp2_lint.isolation import Crash, crash_diagnostic

    if isinstance(result, Crash):
        return [crash_diagnostic(task.display, result)]
    return result


class FileFix(NamedTuple):  # not a dataclass: compiling its methods would cost every start, --fix or not
    """One file's fixing: its bytes as read, what fixing them produced, and why the result was
    not written back (``problem``), if it was not."""

    display: str
    original: bytes
    result: FixResult
    problem: str | None = None

    @classmethod
    def unfixable(cls, display: str, diagnostics: Iterable[Diagnostic]) -> FileFix:
        """A file with nothing to fix: what reading or finding it reported."""
        return cls(display, b"", FixResult(b"", (), tuple(diagnostics)))

    @property
    def changed(self) -> bool:
        return self.result.source != self.original

    def diff(self) -> str:
        from fsdp2_lint.fixing.lines import unified_diff  # imports the parser: only --diff needs it
        from fsdp2_lint.notebooks import read_notebook

        if not is_notebook(self.display) or not self.changed:
            return unified_diff(self.display, self.original, self.result.source)
        before, after = read_notebook(self.original).cell_texts(), read_notebook(self.result.source).cell_texts()
        return "".join(  # a notebook: each changed cell's code, as Ruff shows it
            unified_diff(f"{self.display}:cell {number}", _line_ended(text), _line_ended(after[number]))
            for number, text in before.items()
            if after[number] != text
        )


def _line_ended(cell: str) -> bytes:
    """A cell's text for a diff: a cell's last line has no newline, which is no change to show."""
    return (cell if cell.endswith("\n") or not cell else cell + "\n").encode("utf-8")


def fix_file(task: LintTask, unsafe: bool, write: bool) -> FileFix:
    """Fix the task's bytes (the safe fixes; the unsafe ones too with ``unsafe``); with ``write``,
    replace the file with the fixed bytes, unless it changed on disk since it was read or cannot
    be replaced with nothing but its text changed (see :func:`write_fixed`). A file that was not
    written reports the diagnostics of what was read."""
    raise_recursion_limit()
    original = _read_raw(task)
    if isinstance(original, list):
        return FileFix.unfixable(task.display, _reported(task.report_parse_errors, original))
    if is_notebook(task.path.name):
        return _fix_notebook(task, original, unsafe, write)
    fixed = FileFix(task.display, original, _fix_guarded(task, original, unsafe))
    if not write or not fixed.changed:
        return fixed
    return _write(task, fixed)


def _write(task: LintTask, fixed: FileFix) -> FileFix:
    """Write the fixed bytes back; if that is refused, the file's own diagnostics and why."""
    from fsdp2_lint.fixing.atomic_write import NotWritten, write_fixed

    original = fixed.original
    try:
        write_fixed(task.path, original, fixed.result.source)
        return fixed
    except NotWritten as refusal:
        problem = str(refusal)
    except OSError as error:
        problem = f"cannot write the fixed file: {error.strerror or error}"
    return _unfixed(task, original, problem)


def _unfixed(task: LintTask, original: bytes, problem: str) -> FileFix:
    (unfixed,) = lint_files([task._replace(source=original)])
    return FileFix(task.display, original, FixResult(original, (), tuple(unfixed)), problem)


def _fix_notebook(task: LintTask, original: bytes, unsafe: bool, write: bool) -> FileFix:
    """:func:`fix_file` for a notebook: its joined code fixed, then put back into the cells that
    changed (see :meth:`NotebookSource.with_python`); a notebook that cannot be put back whole is
    left as it is, with the reason."""
    from fsdp2_lint.notebooks import NotebookError, read_notebook

    try:
        notebook = read_notebook(original)
    except NotebookError as error:
        diagnostics = [file_error(task.display, str(error), hint=_NOTEBOOK_HINT)]
        return FileFix.unfixable(task.display, _reported(task.report_parse_errors, diagnostics))
    result = _fix_guarded(task, notebook.python, unsafe)
    try:
        fixed_text = notebook.with_python(result.source)
        after = read_notebook(fixed_text)
    except NotebookError as refusal:
        return _unfixed(task, original, str(refusal))
    fixed = FileFix(
        task.display,
        original,
        FixResult(
            fixed_text,
            tuple(in_cells(result.fixed, notebook, task.display)),
            tuple(in_cells(result.remaining, after, task.display)),
        ),
    )
    return _write(task, fixed) if write and fixed.changed else fixed


def _fix_guarded(task: LintTask, data: bytes, unsafe: bool) -> FixResult:
    """:func:`fix_source` here, or in a worker of its own for a heavy file (as a lint runs)."""
    from fsdp2_lint.isolation import Crash, crash_diagnostic, run_guarded

    projects = Projects(parseable=parseable)
    where = _in_project(task, data, projects)
    _warn_once(projects)
    work = partial(fix_source, data, task.display, task.rules, unsafe, task.max_file_size, where)
    result = run_guarded(work, data, task.rules, task.max_file_size)
    if isinstance(result, Crash):
        result = FixResult(data, (), (crash_diagnostic(task.display, result),))
    return result._replace(remaining=tuple(_reported(task.report_parse_errors, result.remaining)))


def add_noqa_to_file(path: Path, codes_by_line: Mapping[int, Set[str]]) -> tuple[int, str | None]:
    """``check --add-noqa`` on one file: the noqa comments added and written back atomically, as
    ``--fix`` writes. Returns how many lines were changed, and why the file was left as it is (a
    result that would not parse, a file that cannot be written) if it was."""
    import libcst as cst  # the parser and the fixing layer: only --add-noqa needs them

    from fsdp2_lint.fixing.atomic_write import NotWritten, write_fixed
    from fsdp2_lint.fixing.noqa import add_noqa

    if is_notebook(path.name):
        return 0, "--add-noqa does not edit notebooks: add `# noqa: CODE` at the end of the cell's line"
    try:
        original = read_source(path)
    except OSError as error:
        return 0, f"cannot read file: {error.strerror or error}"
    edited, count = add_noqa(original, codes_by_line)
    if not count:
        return 0, None
    try:
        cst.parse_module(edited)
    except Exception:  # noqa: BLE001 - any parser failure means the same: do not write it
        return 0, "a noqa comment would break the file's syntax (a line inside a string?); it was left as it is"
    try:
        write_fixed(path, original, edited)
    except NotWritten as refusal:
        return 0, str(refusal)
    except OSError as error:
        return 0, f"cannot write the file: {error.strerror or error}"
    return count, None


def remove_killed_runs_temporaries(paths: Iterable[Path]) -> None:
    """Delete what runs killed while writing left next to these files (each folder once)."""
    from fsdp2_lint.fixing.atomic_write import remove_stale_temporaries

    for folder in dict.fromkeys(Path(os.path.realpath(path)).parent for path in paths):
        remove_stale_temporaries(folder)
