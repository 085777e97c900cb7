"""The package's layering: imports run only downward (no module imports one that imports it back,
directly or through others, at module level or inside a function), the linter outside
``fsdp2_lint/runtime/`` never imports torch, and reading the configuration (which names FSDP000)
loads no parser."""

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


def test_fixing_is_a_library_beneath_the_engine():
    """Rules and the engine use ``fsdp2_lint.fixing``; it uses neither, nor anything above them."""
    graph = _graph()
    above = {"fsdp2_lint.engine", "fsdp2_lint.pipeline", "fsdp2_lint.rule", "fsdp2_lint.isolation", "fsdp2_lint.cli"}
    fixing = [name for name in graph if name.startswith("fsdp2_lint.fixing")]
    assert fixing and {name: graph[name] & above for name in fixing} == dict.fromkeys(fixing, set())


def test_the_engine_lints_one_file_and_the_pipeline_does_the_rest():
    """Settings, the cache and worker processes are the pipeline's; the command line and the
    language server lint only through it."""
    graph = _graph()
    assert graph["fsdp2_lint.engine"] & {"fsdp2_lint.config", "fsdp2_lint.cache", "fsdp2_lint.isolation"} == set()
    callers = ["fsdp2_lint.cli", *(name for name in graph if name.startswith("fsdp2_lint.lsp"))]
    lint_path = {"fsdp2_lint.engine", "fsdp2_lint.isolation"}
    assert {name: graph[name] & lint_path for name in callers} == dict.fromkeys(callers, set())
    assert "fsdp2_lint.pipeline" in graph["fsdp2_lint.cli"] & graph["fsdp2_lint.lsp.worker"]
