from __future__ import annotations

import pytest


@pytest.fixture
def lint_text():
    """Lint a source string with every rule: `lint_text(source) -> [Diagnostic]`."""
    from fsdp2_lint.engine import lint_source

    def run(source: str, path: str = "example.py"):
        return lint_source(source.encode(), path)

    return run
