"""The package's layering: imports run only downward (no module imports one that imports it back,
directly or through others, at module level or inside a function), the linter outside
``fsdp2_lint/runtime/`` never imports torch, and reading the configuration (which names FSDP000)
loads no parser. Inside ``fsdp2_lint/analysis/`` each module belongs to a layer and imports only
lower ones, no module grows past ``ANALYSIS_MAX_LINES``, and rules never reach into the interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fsdp2_lint"


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


def test_only_the_runtime_imports_torch():
    importers = sorted(
        name
        for name, path in _modules().items()
        if not name.startswith("fsdp2_lint.runtime")
        and any(module == "torch" or module.startswith("torch.") for module in _imported(name, path))
    )
    assert importers == []


def test_configuration_and_diagnostics_need_no_parser():
    """Reading the configuration and building diagnostics import neither libcst nor the engine (a
    fresh interpreter, so the modules this test process already imported do not count)."""
    check = (
        "import sys; import fsdp2_lint.config, fsdp2_lint.diagnostics, fsdp2_lint.sources; "
        "print(sorted(name for name in ('libcst', 'fsdp2_lint.engine') if name in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert (run.returncode, run.stdout.strip()) == (0, "[]"), run.stderr


# The analysis's layers, lowest first: a module imports only modules of lower layers.
ANALYSIS_LAYERS = (
    ("syntax", "apis"),
    ("model",),
    ("interpreter.state", "interpreter.summaries"),
    ("interpreter.guards", "interpreter.torch_api"),
    ("interpreter.flow",),
    ("interpreter.calls", "interpreter.expressions"),
    ("interpreter.core",),
    ("trace",),
    ("facts",),
)
ANALYSIS_MAX_LINES = 700
RULES = PACKAGE.parent / "rules"


def _analysis_layer(module: str) -> int | None:
    for layer, names in enumerate(ANALYSIS_LAYERS):
        if module.removeprefix("fsdp2_lint.analysis.") in names:
            return layer
    return None


def test_the_analysis_imports_only_downward():
    graph = _graph()
    analysis = sorted(name for name in graph if name.startswith("fsdp2_lint.analysis."))
    assert [name for name in analysis if _analysis_layer(name) is None] == ["fsdp2_lint.analysis.interpreter"], (
        "a new analysis module needs a layer"
    )
    upward = [
        (name, other)
        for name in analysis
        for other in graph[name]
        if other not in ("fsdp2_lint.analysis", "fsdp2_lint.analysis.interpreter")
        and (_analysis_layer(other) is None or _analysis_layer(other) >= _analysis_layer(name))  # type: ignore[operator]
    ]
    assert upward == []


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
