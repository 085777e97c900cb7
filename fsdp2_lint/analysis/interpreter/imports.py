"""Imports, and the project's own modules behind them; part of :class:`~.core.Interpreter`.

An import binds names to :class:`~fsdp2_lint.analysis.model.Symbol`\\ s (``from .parallel import
shard`` in ``trainer/train.py`` binds ``shard`` to ``trainer.parallel.shard``: relative imports are
made absolute). A symbol that names something a project module defines is *resolved* where code
uses it (a name read, an attribute of a module read): the module is loaded (:meth:`Imports.load`:
parsed once per run, its body run once, in its own variables, as Python imports it, with
``__name__`` its module name) and the symbol becomes what the module binds: its function, class,
constant, or the torch API it re-exports. Calls of its functions are then expanded as same-file
calls are, when a value that matters flows into them (:meth:`Imports.follows`); others stay opaque.
A module is read only when a name of it is used by code the analysis runs: not the whole closure of
imports, and never one outside it (:meth:`Imports.importable`). Without a project (``--no-follow-imports``, text of no known file) nothing is loaded and
every imported name stays a symbol, as in a per-file analysis.
"""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.interpreter import guards, summaries
from fsdp2_lint.analysis.interpreter.state import Env, Frame, ModuleScope, WatchedDict
from fsdp2_lint.analysis.interpreter.torch_api import SYMBOLS
from fsdp2_lint.analysis.model import (
    UNKNOWN,
    Choice,
    Const,
    Context,
    Event,
    Function,
    FunctionInfo,
    Lambda,
    Params,
    Partial,
    Ref,
    StateDict,
    Symbol,
    Value,
    choice,
    options,
    walk_contents,
)
from fsdp2_lint.analysis.project import Project, dynamic_import
from fsdp2_lint.analysis.syntax import dotted, statements

MAX_ALIAS_HOPS = 16  # `shard = _impl` re-exported through packages: a chain this long is a cycle
MODULE_NAME = re.compile(r"[\w.]*")  # what the prefilter's import closure reads in `import_module("...")`


class Imports:
    """Imports and project modules; part of :class:`~.core.Interpreter`."""

    project: Project | None
    patched: dict[str, Value]  # torch names a test replaced, see Calls.patch_symbol
    binding_modules: dict[tuple[str, Path | None], Path | None]  # project_binding's module, per name and importer
    relevant: object  # callable(bytes) -> bool: may the module's code matter to a rule?
    _importable: frozenset[Path] | None = None

    def exec_import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted(alias.name)
            if alias.asname is not None:
                self.bind(alias.asname.name.value, Symbol(apis.canonical(module)))
            else:
                top = module.split(".")[0]
                self.bind(top, Symbol(top))

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        module = self.absolute_module(len(node.relative), dotted(node.module) if node.module else "")
        if isinstance(node.names, cst.ImportStar):
            self.frame.scope.star_imports.append(apis.canonical(module))
            return
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            self.bind(local, Symbol(apis.canonical(f"{module}.{name}" if module else name)))

    def absolute_module(self, level: int, name: str) -> str:
        """The module a ``from`` import names: relative ones made absolute in a project."""
        if not level or self.project is None:
            return "." * level + name
        return self.project.absolute(self.frame.scope.package, level, name, is_package=True)

    def star_imported(self, module: str, name: str) -> Value | None:
        """What ``name`` is when ``from module import *`` may have bound it, else None."""
        if name in apis.STAR_EXPORTS.get(module, ()):
            return Symbol(f"{module}.{name}")
        path = self.project.find(module, self.frame.scope.path) if self.project is not None else None
        scope = self.load(path) if path is not None else None
        if scope is None or name.startswith("_") and name not in _dunder_all(scope):
            return None
        return self.exported(scope, name, set())

    def exported(self, scope: ModuleScope, name: str, seen: set[int]) -> Value | None:
        """What module ``scope`` binds to ``name``, itself or through its own star imports."""
        seen.add(id(scope))
        found = scope.env.vars.get(name)
        for star in scope.star_imports if found is None else ():
            path = self.project.find(star, scope.path)
            inner = self.load(path) if path is not None else None
            if inner is not None and id(inner) not in seen:
                found = self.exported(inner, name, seen)
            elif star in apis.STAR_EXPORTS and name in apis.STAR_EXPORTS[star]:
                found = Symbol(f"{star}.{name}")
            if found is not None:
                break
        return found

    # --- project names -------------------------------------------------------------------------

    def resolved(self, value: Value) -> Value:
        """``value`` with each symbol that names a project module's binding (or a name a test
        patched) replaced by it."""
        if isinstance(value, Choice) and (self.project is not None or self.patched):
            return choice([self.resolved(option) for option in value.options], value.sequential)
        if isinstance(value, Symbol) and value.qname in self.patched:
            return self.patched[value.qname]
        if not isinstance(value, Symbol) or self.project is None:
            return value
        vendored = apis.vendored_torch(value.qname)
        if vendored is not None and self.project.find(value.qname.partition(".")[0], self.frame.scope.path):
            return Symbol(vendored)  # the project's copy of torch's module: torch's API, as torch's own
        for _ in range(MAX_ALIAS_HOPS):
            found = self.project_binding(value.qname)
            if found is None:
                return value
            if not isinstance(found, Symbol):
                return found
            value = found
        return UNKNOWN

    def project_binding(self, qname: str) -> Value | None:
        """What the project module ``a.b`` binds to ``c`` for ``a.b.c``; None when ``qname`` is no
        name in a project module (a module itself stays a symbol: its attributes resolve in turn)."""
        key = (qname, self.frame.scope.path)
        if key not in self.binding_modules:
            self.binding_modules[key] = self._binding_module(qname, self.frame.scope.path)
        path = self.binding_modules[key]
        if path is None:
            return None
        scope = self.load(path)
        if scope is None:
            return UNKNOWN  # a module of the project the analysis cannot read
        found = self.exported(scope, qname.rpartition(".")[2], set())
        return found if found is not None else UNKNOWN

    def _binding_module(self, qname: str, importer: Path | None) -> Path | None:
        """The file of the project module ``a.b`` when ``a.b.c``, read in module ``importer``, is a
        name it binds; else None."""
        module = qname.rpartition(".")[0]
        if not module or self.project.find(qname.partition(".")[0], importer) is None:
            return None
        if self.project.find(qname, importer) is not None:
            return None
        return self.project.find(module, importer)

    def load(self, path: Path) -> ModuleScope | None:
        """The project module in ``path``, its body run once (Python's import); None when it cannot be
        read or parsed. A module asked for while its body runs (an import cycle) is what it has bound
        so far, as in Python."""
        if path in self.loaded:
            return self.loaded[path]
        if path not in self.importable():  # `import a` then `a.b.f()` with `a.b` imported nowhere
            return None
        parsed = self.project.parse(path)
        if parsed is None:
            self.loaded[path] = None
            return None
        env = Env(None, WatchedDict(self.world))
        env.vars["__name__"] = Const(parsed.name)
        scope = ModuleScope(parsed.name, parsed.package, parsed.module, env, path)
        scope.mentions_dtensor = guards.mentions_dtensor(parsed.source)
        scope.relevant = self.relevant(parsed.source)
        self.loaded[path] = scope
        self.add_scope(scope)
        self._run_module_body(scope)
        return scope

    def importable(self) -> frozenset[Path]:
        """The project modules the linted file's import statements reach, directly or not (its import
        closure): as in Python, a submodule is there only once something imports it. The prefilter
        and the cache read the same modules, so they can never miss one the analysis reads."""
        if self._importable is None:
            main = self.main
            closure = self.project.imported_sources(main.path, self.source) if main.path is not None else ()
            self._importable = frozenset(path for path, _ in closure)
        return self._importable

    def _run_module_body(self, scope: ModuleScope) -> None:
        """Run a module's body as its import does: outside whatever code first used it."""
        saved = self.frame, self.ctx, self.active, self.active_lambdas
        self.frame, self.ctx, self.active, self.active_lambdas = Frame(scope.env, scope), Context(), [], []
        self.foreign_running += 1
        try:
            self.exec_block(statements(scope.module))
        finally:
            self.frame, self.ctx, self.active, self.active_lambdas = saved
            self.foreign_running -= 1

    def past_module_budget(self, info: FunctionInfo) -> bool:
        """Is ``info`` in another project module, called by the linted file's own code, with the
        file's statements for other modules spent (``MAX_FOREIGN_STEPS``), or the entry point's for
        modules followed only for the values passed in, when its code cannot satisfy a rule
        (``MAX_VALUE_FLOW_STEPS``)?
        A call made while another module's code runs is never past them: that code started within
        them and is followed to its end, not cut short part-way (see :mod:`.summaries`)."""
        scope = self.scope_of[info]
        if scope is self.main or self.foreign_running:
            return False
        if self.foreign_steps >= summaries.MAX_FOREIGN_STEPS:
            return True
        return self.value_flow_steps >= summaries.MAX_VALUE_FLOW_STEPS and not scope.relevant

    def follows(self, fn: Function, args: tuple, kwargs: dict) -> bool:
        """Is a call of ``fn`` expanded? Always in the linted file; in another project module when
        that module's code can matter to a rule, or a value that matters is passed to it."""
        scope = self.scope_of[fn.info]
        if scope is self.main or scope.relevant:
            return True
        return any(_matters(value) for value in (fn.bound, *args, *kwargs.values()) if value is not None)


@SYMBOLS("importlib.import_module")
def _import_module(interp: Imports, event: Event) -> Value:
    """``importlib.import_module("a.b")`` is module ``a.b``, as ``import a.b as m`` binds it (its
    attributes resolve in the project). Only the spellings the prefilter's import closure reads
    (:mod:`fsdp2_lint.analysis.project`): a literal name, and for a relative one a literal package
    or the module's own ``__name__`` or ``__package__``; any other name stays unknown."""
    node = event.node
    if not isinstance(node, cst.Call) or _last_name(node.func) != "import_module" or not node.args:
        return UNKNOWN
    name = _literal(node.args[0])
    if not name:
        return UNKNOWN
    spelled = node.args[1] if len(node.args) > 1 else None
    if spelled is not None and spelled.keyword is not None and spelled.keyword.value != "package":
        spelled = None
    package = _package(spelled.value, interp.frame.scope) if spelled is not None and not spelled.star else None
    module = dynamic_import(name, package)
    return Symbol(apis.canonical(module)) if module else UNKNOWN


def _literal(arg: cst.Arg) -> str | None:
    """A positional argument's text when it is a plain string literal naming a module."""
    value = arg.value
    if arg.keyword is not None or arg.star or not isinstance(value, cst.SimpleString) or value.prefix:
        return None
    text = value.evaluated_value
    return text if isinstance(text, str) and len(value.quote) == 1 and MODULE_NAME.fullmatch(text) else None


def _package(value: cst.BaseExpression, scope: ModuleScope) -> str | None:
    if isinstance(value, cst.Name):
        return {"__name__": scope.name, "__package__": scope.package}.get(value.value)
    return _literal(cst.Arg(value))


def _last_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _matters(value: Value) -> bool:
    # A parameter list matters too: a clipping or optimizer helper handed a stale one is a misuse.
    return any(
        isinstance(option, (Ref, Params, StateDict, Function, Lambda, Partial))
        for item in walk_contents(value)
        for option in options(item)
    )


def _dunder_all(scope: ModuleScope) -> tuple[str, ...]:
    listed = scope.env.vars.get("__all__")
    return tuple(
        item.value
        for value in ([listed] if listed is not None else [])
        for item in walk_contents(value)
        if isinstance(item, Const) and isinstance(item.value, str)
    )
