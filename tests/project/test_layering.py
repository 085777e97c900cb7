"""The package's layering: imports run only downward (no module imports one that imports it back,
directly or through others, at module level or inside a function), nothing outside
``fsdp2_lint/runtime/rank/`` (the code that runs inside rank processes) imports torch, and reading
the configuration (which names FSDP000) loads no parser. Every module belongs to a layer and imports
only lower ones (``PACKAGE_LAYERS``; inside the analysis and the runtime, their own layers), no
analysis module grows past ``ANALYSIS_MAX_LINES``, and rules never reach into the interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fsdp2_lint"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("fsdp2_lint", *path.relative_to(PACKAGE).with_suffix("").parts))
        found[name.removesuffix(".__init__")] = path
    return found


def _imported(name: str, path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (function-level imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    return named


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {other for other in _imported(name, path) if other in modules and other != name}
            for name, path in modules.items()}  # fmt: skip


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


RANK_PROCESSES = "fsdp2_lint.runtime.rank"
# Imports the modules named on the command line, and every rule, with torch blocked; prints, one a
# line, each that failed, or that tried torch and went on without it.
IMPORT_WITHOUT_TORCH = """
import importlib, sys

tried = []

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            tried.append(name)
            raise ImportError(f"torch is blocked: {name}")
        return None

sys.meta_path.insert(0, NoTorch())
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        if name == "fsdp2_lint.rule":
            importlib.import_module(name).all_rules()
    except ImportError as error:
        print(f"{name}: {error}")
    else:
        if tried:
            print(f"{name}: tried {tried} and went on without it")
    tried.clear()
"""


def _outside_the_rank_processes(name: str) -> bool:
    return name != RANK_PROCESSES and not name.startswith(RANK_PROCESSES + ".")


def _failing_without_torch(modules: list[str]) -> list[str]:
    run = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT_TORCH, *modules], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_only_the_rank_processes_import_torch():
    importers = sorted(
        name
        for name, path in _modules().items()
        if _outside_the_rank_processes(name)
        and any(module == "torch" or module.startswith("torch.") for module in _imported(name, path))
    )
    assert importers == []


def test_every_module_outside_the_rank_processes_and_every_rule_imports_without_torch():
    # fsdp2_lint.__main__ runs the CLI when imported; it imports fsdp2_lint.cli, which is here
    modules = sorted(name for name in _modules() if _outside_the_rank_processes(name) and name != "fsdp2_lint.__main__")
    assert "fsdp2_lint.runtime.harness.command" in modules and "fsdp2_lint.rule" in modules
    assert _failing_without_torch(modules) == []


def test_the_torch_block_stops_the_rank_processes_code():
    assert _failing_without_torch(["fsdp2_lint.runtime.rank.probes"]) == [
        "fsdp2_lint.runtime.rank.probes: torch is blocked: torch"
    ]


def test_configuration_and_diagnostics_need_no_parser():
    """Reading the configuration and building diagnostics import neither libcst nor the engine (a
    fresh interpreter, so the modules this test process already imported do not count)."""
    check = (
        "import sys; import fsdp2_lint.config, fsdp2_lint.diagnostics, fsdp2_lint.sources; "
        "print(sorted(name for name in ('libcst', 'fsdp2_lint.engine') if name in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert (run.returncode, run.stdout.strip()) == (0, "[]"), run.stderr


# Layers, lowest first: a module imports only modules of lower layers. A name covers the module
# and everything under it; imports inside one name are ordered by that package's own layers
# (the analysis, the runtime) or, for small packages (fixing, lsp), only kept free of cycles.
PACKAGE_LAYERS = (
    (
        "diagnostics",
        "sources",
        "notebooks",
        "nesting",
        "lifetime",
        "prefilter",
        "torch_version",
    ),  # what everything may use
    ("analysis",),  # parse once, compute facts once
    ("fixing",),  # the edits rules build and the engine applies
    ("rule",),  # the rule API, all_rules()
    ("config", "discovery", "cache", "rule_docs", "engine"),  # one file's lint, and what the pipeline needs
    ("isolation", "output"),
    ("pipeline",),  # the one lint path above a file
    ("lsp", "runtime"),  # the editor server; the runtime confirmation harness
    ("cli",),
    ("__main__",),
)
ANALYSIS_LAYERS = (
    ("syntax", "kinds"),
    ("reparse",),  # an edited module parsed from its statements around the edit
    ("conditions", "emptiness", "microbatches", "decoding"),  # tested settings, keyed by what they test; tests
    # of emptiness; token budgets; loops that end on what their body computed
    ("model",),
    ("apis", "project"),  # torch's API by name; the project's own modules by path
    ("interpreter.state",),
    # settings a test proved equal to a constant; rank tests; FSDP version tests
    ("interpreter.settings", "interpreter.ranks", "interpreter.versions"),
    ("interpreter.guards", "interpreter.torch_api", "interpreter.summaries"),
    ("interpreter.flow", "interpreter.generators", "interpreter.order"),
    ("interpreter.calls", "interpreter.expressions", "interpreter.imports"),
    ("interpreter.core",),
    ("trace",),
    ("facts",),
    (
        "switches",
        "micro_batch_loops",
    ),  # settings FSDPModule setters switch off and on (FSDP014, FSDP044); micro-batch counts (FSDP012)
)
RUNTIME_LAYERS = (
    ("evidence",),  # the contract between the rank processes and the harness
    ("launch",),  # launchers, stall detection, process containment
    ("harness", "rank"),  # the parent side of `confirm`; the code inside the rank processes
)
ANALYSIS_MAX_LINES = 800  # the issue asks for about 700 (model.py: 708); this leaves room to grow
RULES = PACKAGE.parent / "rules"


def _layer(module: str, scope: str, layers: tuple[tuple[str, ...], ...]) -> tuple[int, str] | None:
    """(layer index, the name that places it) of ``module`` inside package ``scope``; package
    ``__init__`` modules, which only name their package, sit below every layer."""
    relative = module.removeprefix(scope).removeprefix(".")
    if _modules()[module].name == "__init__.py":
        return -1, relative
    for index, names in enumerate(layers):
        for name in names:
            if relative == name or relative.startswith(f"{name}."):
                return index, name
    return None


def _layering_errors(scope: str, layers: tuple[tuple[str, ...], ...]) -> list[tuple[str, str]]:
    """(module, what is wrong) for each module of ``scope`` outside every layer and each import
    that does not run to a lower layer (imports between modules placed by one name excepted)."""
    graph = _graph()
    inside = sorted(name for name in graph if name.startswith(f"{scope}."))
    errors = [(name, "needs a layer") for name in inside if _layer(name, scope, layers) is None]
    for name in inside:
        placed = _layer(name, scope, layers)
        for other in sorted(graph[name]):
            target = _layer(other, scope, layers) if other.startswith(f"{scope}.") else None
            if placed is None or target is None or target[1] == placed[1] and placed[0] >= 0:
                continue
            if target[0] >= placed[0]:
                errors.append((name, f"imports {other}, which is not below it"))
    return errors


def test_the_package_imports_only_downward():
    assert _layering_errors("fsdp2_lint", PACKAGE_LAYERS) == []


def test_the_analysis_imports_only_downward():
    assert _layering_errors("fsdp2_lint.analysis", ANALYSIS_LAYERS) == []


def test_the_runtime_imports_only_downward():
    assert _layering_errors("fsdp2_lint.runtime", RUNTIME_LAYERS) == []


def test_the_layering_check_sees_an_upward_import_and_an_unplaced_module():
    engine_below_diagnostics = (("engine",), ("diagnostics",))
    errors = _layering_errors("fsdp2_lint", engine_below_diagnostics)
    assert ("fsdp2_lint.engine", "imports fsdp2_lint.diagnostics, which is not below it") in errors
    assert ("fsdp2_lint.cli", "needs a layer") in errors


def test_rules_see_the_facts_not_the_interpreter():
    """Rules read facts (traces, the domain, canonical names); how they were computed is not theirs."""
    reaching_in = sorted(
        (path.name, module)
        for path in RULES.glob("*.py")
        for module in _imported(f"fsdp2_lint.rules.{path.stem}", path)
        if module.startswith("fsdp2_lint.analysis.interpreter")
    )
    assert reaching_in == []


def test_analysis_modules_stay_small():
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in _modules().items()
        if name.startswith("fsdp2_lint.analysis")
    }
    assert {name: lines for name, lines in sizes.items() if lines > ANALYSIS_MAX_LINES} == {}


def test_the_engine_lints_one_file_and_the_pipeline_does_the_rest():
    """Settings, the cache and worker processes are the pipeline's; the command line and the
    language server lint only through it."""
    graph = _graph()
    assert graph["fsdp2_lint.engine"] & {"fsdp2_lint.config", "fsdp2_lint.cache", "fsdp2_lint.isolation"} == set()
    callers = ["fsdp2_lint.cli", *(name for name in graph if name.startswith("fsdp2_lint.lsp"))]
    lint_path = {"fsdp2_lint.engine", "fsdp2_lint.isolation"}
    assert {name: graph[name] & lint_path for name in callers} == dict.fromkeys(callers, set())
    assert "fsdp2_lint.pipeline" in graph["fsdp2_lint.cli"] & graph["fsdp2_lint.lsp.worker"]
