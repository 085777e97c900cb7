"""The test suite's own layout: each test module lives in the folder of the layer it tests, and no
module under tests/ imports a test module (what several tests share lives in tests/support/)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LAYERS = {"analysis", "rules", "fixing", "cli", "lsp", "runtime", "project"}
TEST_MODULES = sorted(TESTS.rglob("test_*.py"))


def imported_modules(path: Path) -> set[str]:
    """The top-level name of every module PATH imports, at module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_every_test_module_lives_in_a_layer_folder():
    assert TEST_MODULES
    misplaced = [
        str(path.relative_to(TESTS))
        for path in TEST_MODULES
        if path.parent.parent != TESTS or path.parent.name not in LAYERS
    ]
    assert misplaced == []


def test_no_module_under_tests_imports_a_test_module():
    test_names = {path.stem for path in TEST_MODULES}
    imports = {path.relative_to(TESTS): imported_modules(path) for path in TESTS.rglob("*.py")}
    assert {"samples", "fixture_marks"} <= set().union(*imports.values())  # the scan sees support imports
    offenders = {str(path): sorted(names & test_names) for path, names in imports.items() if names & test_names}
    assert offenders == {}
