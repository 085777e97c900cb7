"""The project a linted file belongs to, and its own modules: where they are, read and parsed at most
once per run (while their trees fit the process's budget: :class:`ParsedModules`).

- **Root**: the nearest folder above the file with ``pyproject.toml``, ``setup.cfg``, ``setup.py`` or
  ``.git`` (:func:`find_root`).
- **Import roots**: the configured ones (``roots`` in ``[tool.fsdp2-lint]``), else ``src/`` and
  ``python/`` where they exist, then the root itself. A file's module name is its path under the first
  root that holds it, whatever folder the linter was started in or which file was named.
- **Finding a module** (:meth:`Project.find`): in the import roots in order, a package
  (``a/b/__init__.py``) before a module (``a/b.py``), folders without ``__init__.py`` taking part as
  namespace packages; then, for script projects run as ``python train.py``, in the importing file's
  folder and its parents up to the root (as pyright and ty do). A project module named like a
  third-party or standard-library one (a local ``utils/``, ``transformers.py``) is the project's, as
  Python's path puts the script's folder first; only ``torch``, whose API the rules know by name, is
  never a project module.
- **Reading** goes through :class:`Sources`, which answers from unsaved text first (an editor's
  buffers, standard input) and from disk second.
- **What a file can reach** (:meth:`Project.imported_sources`): the project modules its import
  statements name, transitively, found without parsing. The prefilter reads their code with the
  file's, and a file's cached result is keyed by their contents. Each module's import statements
  are read once per run, and the modules of one import cycle share one closure (a strongly
  connected component of the import graph): no closure is walked again for each file. The other
  way round, :meth:`Project.importers` finds the files whose analysis can read a given one (what the
  pre-commit hook checks along with the staged files).

What a module's code means is the interpreter's business: it asks for a module when a value that
matters flows into it (:mod:`fsdp2_lint.analysis.interpreter.modules`).
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fsdp2_lint.prefilter import TokenFacts
from fsdp2_lint.sources import DEFAULT_MAX_FILE_SIZE

if TYPE_CHECKING:  # the parser is imported where a module is parsed: finding imports reads none
    import libcst as cst

    from fsdp2_lint.analysis.reparse import Parsed
    from fsdp2_lint.analysis.syntax import StatementLinks

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
AUTO_ROOTS = ("src", "python")
# The package the rules know by name: a project folder named like it must not change what they mean.
RESERVED = "torch"
INSTALLED_PACKAGES = frozenset({"site-packages", "dist-packages"})  # folders pip installs packages into
MAX_WALK_UP = 8  # folders above an importing script searched for its sibling modules
# Source bytes of parsed modules one process keeps for the files that import them. libcst's tree
# takes 15 to 30 times its source in Python objects: this holds one large repository's imported
# modules (torchtitan's), and bounds a run over many repositories to a few hundred MB of trees.
KEPT_SOURCE_BYTES = 8 * 2**20
# Import statements as text, wherever a statement starts (a line, after `;`, after the `:` of a
# one-line `if`/`try`), lines continued with a backslash: `import a.b as c, d`, `from ..a import
# (b, c)`, and `import_module("a.b")` or `import_module(".b", package=__name__)` with a literal name
# (the interpreter resolves the same spellings: :func:`dynamic_import`).
_IMPORT = re.compile(
    rb"(?:^|[;:])[ \t]*(?:import[ \t]+(?P<plain>(?:[\w. \t,]|\\\r?\n)+)"
    rb"|from[ \t]+(?P<dots>\.*)(?P<module>[\w.]*)[ \t]+import[ \t]+"
    rb"(?P<names>\([^)]*\)|(?:[^\r\n#;\\]|\\\r?\n)*))"
    rb"|import_module\(\s*[\"'](?P<dynamic>[\w.]+)[\"']"
    rb"(?:\s*,\s*(?:package\s*=\s*)?(?P<package>[\"'][\w.]*[\"']|__name__|__package__))?",
    re.MULTILINE,
)
_COMMENT = re.compile(rb"#[^\r\n]*")


def find_root(start: Path) -> Path:
    """The project root of a file or folder: the nearest folder with a project marker, else the
    folder above its top package (the folder itself outside a package). An installed package (under ``site-packages``) is its own project: its imports
    never reach the environment's other packages, nor a project that holds the environment."""
    folder = start if start.is_dir() else start.parent
    folder = Path(os.path.realpath(folder))
    installed = next((i for i, part in enumerate(folder.parts) if part in INSTALLED_PACKAGES), None)
    if installed is not None:
        return Path(*folder.parts[: installed + 2])
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    while (folder / "__init__.py").exists() and folder.parent != folder:
        folder = folder.parent  # a package's modules are named from above its top package, as Python names them
    return folder


def import_roots(root: Path, configured: Sequence[str] = ()) -> tuple[Path, ...]:
    """The folders imports are resolved from, in order."""
    if configured:
        return tuple(Path(os.path.realpath(root / entry)) for entry in configured)
    found = [root / name for name in AUTO_ROOTS if (root / name).is_dir()]
    return (*found, root)


class Sources:
    """File contents: unsaved text first (``overlays``, by resolved path), disk second; each file
    read at most once."""

    def __init__(self, overlays: Mapping[Path, bytes] | None = None, max_file_size: int = 0) -> None:
        self.overlays = dict(overlays or {})
        self.max_file_size = max_file_size
        self._data: dict[Path, bytes | None] = {}

    def get(self, path: Path) -> bytes | None:
        """The file's bytes; None when it cannot be read or is larger than ``max_file_size``."""
        if path not in self._data:
            data = self.overlays.get(path)
            if data is None:
                try:
                    data = path.read_bytes()
                except OSError:
                    data = None
            if data is not None and self.max_file_size and len(data) > self.max_file_size:
                data = None
            self._data[path] = data
        return self._data[path]

    def is_file(self, path: Path) -> bool:
        return path in self.overlays or path.is_file()


@dataclass(eq=False)
class ProjectModule:
    """A module of the project, parsed."""

    name: str
    path: Path
    source: bytes
    module: cst.Module
    tree: Parsed | None = field(default=None, repr=False)  # with its statements' extents, once an edit needed them
    # The parent links under its top-level statements, filled in where a lint of this text needed
    # them, for a tree an edit re-parsed in part: the next edit's tree reuses those of the statements
    # it keeps. A `check` run, which edits nothing, keeps none (they would add to its peak memory).
    links: StatementLinks = field(default_factory=dict, repr=False)

    def edited(self, data: bytes, parse: Callable[[bytes | str], cst.Module]) -> tuple[cst.Module, Parsed | None]:
        """``data``, a later text of this module, parsed by ``parse``: only its statements around the
        edit where :mod:`~fsdp2_lint.analysis.reparse` can (with the tree for the next edit), else whole."""
        from fsdp2_lint.analysis.reparse import Parsed, reparsed

        if self.tree is None:
            self.tree = Parsed(self.module, self.source.decode(self.module.encoding))
        try:
            again = reparsed(self.tree, data.decode(self.module.encoding), parse)
        except UnicodeDecodeError:
            again = None
        return (again.module, again) if again is not None else (parse(data), None)

    def links_shared_with(self, module: cst.Module) -> StatementLinks:
        """The parent links kept for the top-level statements ``module`` (its edit's tree) shares."""
        shared = {id(part) for part in (*module.header, *module.body, *module.footer)}
        return {key: entry for key, entry in self.links.items() if key in shared}

    @property
    def package(self) -> str:
        return package_of(self.name, self.path)


class ParsedModules:
    """The parsed project modules a process keeps, by project and file, each with the text it was
    parsed from: the files of a run that import a module, and an editor's next lint, reuse its tree
    while its text is unchanged. Once their sources pass ``budget`` bytes the least recently used
    are dropped (and parsed again when asked for): without a bound a worker that lints many
    projects' files keeps every tree it ever parsed, gigabytes."""

    def __init__(self, budget: int = KEPT_SOURCE_BYTES) -> None:
        self.budget = budget
        self._kept: OrderedDict[Hashable, tuple[bytes | None, ProjectModule | None]] = OrderedDict()
        self._bytes = 0

    def kept(self, key: Hashable) -> ProjectModule | None:
        """The tree kept for ``key`` (whatever text it was parsed from), if any."""
        entry = self._kept.get(key)
        return entry[1] if entry is not None else None

    def parsed(
        self, key: Hashable, data: bytes | None, parse: Callable[[ProjectModule | None], ProjectModule | None]
    ) -> ProjectModule | None:
        """The module ``key`` as ``parse`` makes it of ``data``: the tree kept from an earlier parse
        of the same text, else parsed now and kept (what ``parse`` raises propagates, keeping nothing).
        ``parse`` is given the tree kept from an earlier text of ``key`` (None if none): an edit."""
        kept = self._kept.get(key)
        if kept is not None and kept[0] == data:
            self._kept.move_to_end(key)
            return kept[1]
        parsed = parse(kept[1] if kept is not None else None)
        if kept is not None:
            self._bytes -= len(self._kept.pop(key)[0] or b"")
        self._kept[key] = (data, parsed)
        self._bytes += len(data or b"")
        while self._bytes > self.budget and len(self._kept) > 1:
            dropped, _ = self._kept.popitem(last=False)[1]
            self._bytes -= len(dropped or b"")
        return parsed


class Project:
    """One project's modules, found and parsed on demand, each at most once while the process's
    :class:`ParsedModules` keep it."""

    def __init__(
        self,
        root: Path,
        roots: Sequence[Path] | None = None,
        sources: Sources | None = None,
        parseable: Callable[[bytes], bool] | None = None,
        kept: ParsedModules | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.roots = tuple(roots) if roots is not None else import_roots(self.root)
        self.sources = sources or Sources()
        self.parseable = parseable or (lambda data: True)
        self._found: dict[tuple[str, Path | None], Path | None] = {}
        self._located: dict[tuple[Path, str], Path | None] = {}
        self._parsed = kept if kept is not None else ParsedModules()
        self._key = (self.root, self.roots)  # a module's name, so its parse, depends on both
        self._imported: dict[tuple[Path, bytes], list[tuple[Path, bytes]]] = {}
        self._edges_of: dict[Path, tuple[Path, ...]] = {}
        self._reached: dict[Path, frozenset[Path]] = {}
        self.token_facts = TokenFacts()  # the prefilter's, for the modules files import

    # --- names ---------------------------------------------------------------------------------

    def module_name(self, path: Path) -> str:
        """The module name of a file: its path under the first import root that holds it, else its
        path under its own folder (a script's name)."""
        path = Path(os.path.realpath(path))
        for root in self.roots:
            if path.is_relative_to(root):
                return _dotted(path.relative_to(root))
        return _dotted(Path(path.name))

    @staticmethod
    def absolute(importer: str, level: int, name: str, is_package: bool) -> str:
        """The absolute name of a relative import (``from ..x import y`` in module ``importer``)."""
        if not level:
            return name
        package = importer if is_package else importer.rpartition(".")[0]
        parts = package.split(".") if package else []
        base = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        return ".".join([*base, name] if name else base)

    # --- finding modules -------------------------------------------------------------------------

    def find(self, name: str, importer: Path | None = None) -> Path | None:
        """The file of project module ``name`` (a package's ``__init__.py``), or None."""
        if not name or name.split(".")[0] == RESERVED:
            return None
        key = (name, importer.parent if importer is not None else None)
        if key not in self._found:
            found = self._in_roots(name)
            if found is None and importer is not None:
                found = self._walking_up(name, importer.parent)
            self._found[key] = found
        return self._found[key]

    def _in_roots(self, name: str) -> Path | None:
        key = (name, None)
        if key not in self._found:
            self._found[key] = next((f for root in self.roots if (f := self._under(root, name))), None)
        return self._found[key]

    def _walking_up(self, name: str, folder: Path) -> Path | None:
        folder = Path(os.path.realpath(folder))
        for _ in range(MAX_WALK_UP):
            found = self._under(folder, name)
            if found is not None or folder == self.root or not folder.is_relative_to(self.root):
                return found
            folder = folder.parent
        return None

    def _under(self, folder: Path, name: str) -> Path | None:
        key = (folder, name)  # sibling folders walk up through the same parents
        if key not in self._located:
            self._located[key] = self._file_under(folder, name)
        return self._located[key]

    def _file_under(self, folder: Path, name: str) -> Path | None:
        base = folder.joinpath(*name.split("."))
        for candidate in (base / "__init__.py", base.with_name(base.name + ".py")):
            if self.sources.is_file(candidate):
                return Path(os.path.realpath(candidate))
        return None

    def reserved_shadows(self) -> list[Path]:
        """The project's own ``torch`` (a package or ``torch.py`` in an import root): never read, since
        ``torch`` is PyTorch to the rules."""
        found = (self._under(root, RESERVED) for root in self.roots)
        return [path.parent if path.name == "__init__.py" else path for path in found if path is not None]

    # --- what a file can reach ------------------------------------------------------------------

    def imported_sources(self, file: Path, data: bytes) -> list[tuple[Path, bytes]]:
        """Every project module ``file`` (with text ``data``) imports, directly or through the
        modules it imports, with its text: all the code its analysis could read, found from import
        statements alone (nothing parsed), in a stable order. The prefilter decides on their code
        with the file's own, and a cached result is valid while none of them changed."""
        key = (file, data)  # the text itself, kept for the run (as its sources keep it): no digest to compute
        if key not in self._imported:
            self._imported[key] = self._import_closure(file, data)
        return self._imported[key]

    def _import_closure(self, file: Path, data: bytes) -> list[tuple[Path, bytes]]:
        targets = self._targets(file, data)
        if self.sources.get(file) in (None, data):
            # a path back through the file goes on to its own imports, which are all counted already
            found = set().union(*map(self._reach, targets)) - {file}
        else:  # the modules see another text of the file (read before it was given): walk around it
            found = self._reach_avoiding(file, targets)
        return sorted((path, self.sources.get(path)) for path in found)

    def _targets(self, path: Path, text: bytes) -> tuple[Path, ...]:
        """The project modules the import statements of ``text`` (module ``path``) name."""
        found = (self.find(name, path) for name in self._imported_names(path, text))
        return tuple(dict.fromkeys(target for target in found if target is not None))

    def _edges(self, path: Path) -> tuple[Path, ...]:
        """The readable project modules the module in ``path`` imports, its statements scanned once."""
        if path not in self._edges_of:
            text = self.sources.get(path)
            targets = self._targets(path, text) if text is not None else ()
            self._edges_of[path] = tuple(target for target in targets if self.sources.get(target) is not None)
        return self._edges_of[path]

    def _reach(self, start: Path) -> frozenset[Path]:
        """The readable modules reachable from ``start`` through import statements, itself included
        (none from an unreadable one)."""
        if start not in self._reached:
            if self.sources.get(start) is None:
                return frozenset()
            self._components_from(start)
        return self._reached[start]

    def _components_from(self, start: Path) -> None:
        """Fill ``_reached`` for every module reachable from ``start``: the strongly connected
        components of the import graph (Tarjan's algorithm, iterative), each sharing one set, the
        union of its members and of the sets of the components it imports."""
        index: dict[Path, int] = {start: 0}
        low: dict[Path, int] = {start: 0}
        stack = [start]
        walk = [(start, iter(self._edges(start)))]
        while walk:
            node, edges = walk[-1]
            for target in edges:
                if target in self._reached:  # a component finished before: nothing to join
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    walk.append((target, iter(self._edges(target))))
                    break
                low[node] = min(low[node], index[target])  # on the stack: finished ones are in _reached
            else:
                walk.pop()
                if walk:
                    parent = walk[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    self._finish_component(stack, node)

    def _finish_component(self, stack: list[Path], head: Path) -> None:
        component = stack[stack.index(head) :]
        del stack[len(stack) - len(component) :]
        reach = set(component)
        for member in component:
            reach.update(*(self._reached[target] for target in self._edges(member) if target not in reach))
        shared = frozenset(reach)
        for member in component:
            self._reached[member] = shared

    def _reach_avoiding(self, file: Path, targets: Sequence[Path]) -> set[Path]:
        """The readable modules reachable from ``targets`` without passing through ``file``."""
        found: set[Path] = set()
        pending = [target for target in targets if target != file and self.sources.get(target) is not None]
        while pending:
            path = pending.pop()
            if path not in found:
                found.add(path)
                pending.extend(target for target in self._edges(path) if target != file)
        return found

    def importers(self, targets: Collection[Path], candidates: Sequence[Path]) -> list[Path]:
        """The candidates (resolved paths) whose analysis can read one of ``targets``: those that
        import one, directly or through other candidates, as :meth:`imported_sources` follows
        imports; in the candidates' order, none of the targets. Every candidate's imports are read
        once (nothing parsed)."""
        imported_by: dict[Path, list[Path]] = {}
        for candidate in candidates:
            data = self.sources.get(candidate)
            for name in self._imported_names(candidate, data) if data is not None else ():
                target = self.find(name, candidate)
                if target is not None:
                    imported_by.setdefault(target, []).append(candidate)
        reached: set[Path] = set()
        pending = list(targets)
        while pending:
            for importer in imported_by.get(pending.pop(), ()):
                if importer not in reached and importer not in targets:
                    reached.add(importer)
                    pending.append(importer)
        return [candidate for candidate in candidates if candidate in reached]

    def _imported_names(self, path: Path, text: bytes) -> list[str]:
        package = self.module_name(path)
        is_package = path.name == "__init__.py"
        names: list[str] = []
        for match in _IMPORT.finditer(text):
            if match["plain"] is not None:
                names += [part.split()[0] for part in _listed(match["plain"])]
            elif match["dynamic"] is not None:
                names.append(dynamic_import(match["dynamic"].decode(), self._package_argument(match["package"], path)))
            else:
                dots = len(match["dots"])
                module = self.absolute(package, dots, match["module"].decode(), is_package)
                names.append(module)
                names += [f"{module}.{part.split()[0]}" for part in _listed(match["names"]) if module]
        # importing `a.b.c` runs the packages `a` and `a.b` first
        names += [name.rsplit(".", up)[0] for name in names for up in range(1, name.count(".") + 1)]
        return [name for name in dict.fromkeys(names) if name and name.split(".")[0] != RESERVED]

    def _package_argument(self, spelled: bytes | None, path: Path) -> str | None:
        """``import_module``'s package spelled in module ``path``: a literal, or the module's own
        ``__name__`` or ``__package__``."""
        if spelled is None:
            return None
        own = self.module_name(path)
        named = {b"__name__": own, b"__package__": package_of(own, path)}
        return named.get(spelled, spelled.decode()[1:-1])

    # --- reading ---------------------------------------------------------------------------------

    def parse(self, path: Path) -> ProjectModule | None:
        """The module in ``path`` parsed; None when it cannot be read, is refused by ``parseable``
        (too large, nested too deep) or does not parse: its names are then unknown."""
        data = self.sources.get(path)
        return self._parsed.parsed((self._key, path), data, lambda previous: self._parse(path, data, previous))

    def parse_linted(self, path: Path, data: bytes, parse: Callable[[bytes], cst.Module]) -> cst.Module:
        """The linted file ``path`` (text ``data``) parsed: as the project module it is when another
        file's analysis (or an earlier lint in this process) read the same text already, else by
        ``parse`` (whose errors propagate), kept for the files that import it. Each module is parsed
        once per run, whether it is linted or imported."""
        if self.sources.get(path) != data or not self.parseable(data):  # not the text the project reads
            return parse(data)

        def parsed_module(previous: ProjectModule | None) -> ProjectModule:
            if previous is None:
                return ProjectModule(self.module_name(path), path, data, parse(data))
            module, tree = previous.edited(data, parse)
            return ProjectModule(self.module_name(path), path, data, module, tree, previous.links_shared_with(module))

        kept = self._parsed.parsed((self._key, path), data, parsed_module)
        return kept.module if kept is not None else parse(data)  # it failed to parse as an import

    def statement_links(self, path: Path, module: cst.Module) -> StatementLinks | None:
        """The parent links kept with the linted file ``path``'s tree, when ``module`` is that tree
        and an edit re-parsed it in part."""
        kept = self._parsed.kept((self._key, path))
        return kept.links if kept is not None and kept.module is module and kept.tree is not None else None

    def _parse(self, path: Path, data: bytes | None, previous: ProjectModule | None) -> ProjectModule | None:
        import libcst as cst

        if data is None or not self.parseable(data):
            return None
        try:
            module, tree = (
                previous.edited(data, cst.parse_module) if previous is not None else (cst.parse_module(data), None)
            )
        except (cst.ParserSyntaxError, UnicodeDecodeError, LookupError, SyntaxError, RecursionError):
            return None
        return ProjectModule(self.module_name(path), path, data, module, tree)


def _listed(spelled: bytes) -> list[str]:
    """The imported names (``b as c``) of ``b as c, d`` or ``(b,  # why\n c)``, continued lines joined."""
    text = _COMMENT.sub(b"", spelled).strip(b"()").replace(b"\\", b" ").decode("utf-8", "replace")
    return [part for part in text.split(",") if part.split()]


def dynamic_import(name: str, package: str | None) -> str:
    """The module ``importlib.import_module(name, package)`` imports; "" for a relative name without
    a package (Python refuses it)."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    return Project.absolute(package, level, name[level:], is_package=True) if package else ""


def package_of(name: str, path: Path) -> str:
    """The package relative imports in module ``name`` (in ``path``) start from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _dotted(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Projects:
    """The projects of one run, one per root and import roots, sharing the unsaved texts. A copy
    sent to a worker process starts without what this one has read: each process reads for itself.
    ``problems``: what the user should know about the projects' layout (a project's own ``torch``),
    by path, for the run to report once."""

    def __init__(
        self,
        overlays: Mapping[Path, bytes] | None = None,
        parseable: Callable[[bytes], bool] | None = None,
        kept: ParsedModules | None = None,
    ):
        self.overlays = {Path(os.path.realpath(path)): data for path, data in (overlays or {}).items()}
        self.parseable = parseable
        self.problems: dict[Path, str] = {}
        self._projects: dict[tuple[Path, tuple[Path, ...], int], Project] = {}
        self._kept = kept if kept is not None else ParsedModules()

    def __getstate__(self) -> dict:
        fresh = {"problems": {}, "_projects": {}, "_kept": ParsedModules(self._kept.budget)}
        return {"overlays": self.overlays, "parseable": self.parseable, **fresh}

    def for_file(self, file: Path, roots: Sequence[Path] = (), max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> Project:
        """The project of ``file``: under the configured import roots (their folder's project), or
        found; its modules read up to ``max_file_size`` bytes (0: no limit), the linted file's limit."""
        root = find_root(file)
        key = (root, tuple(Path(os.path.realpath(r)) for r in roots), max_file_size)
        if key not in self._projects:
            sources = Sources(self.overlays, max_file_size)
            project = self._projects[key] = Project(root, key[1] or None, sources, self.parseable, self._kept)
            for shadow in project.reserved_shadows():
                self.problems[shadow] = (
                    f"{shadow}: the project's own `{RESERVED}` is not analysed: fsdp2-lint treats `{RESERVED}` "
                    "as PyTorch, whose API its rules know by name (rename the project's module to have it followed)"
                )
        return self._projects[key]
