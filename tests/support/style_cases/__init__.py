"""Rules on code written in styles the fixtures do not use, one module per rule (``fsdpNNN.py``).

A case named ``fsdpNNN-...`` is linted with rule FSDPNNN; it marks the expected diagnostics with
``# expect: FSDPNNN``, and a case without marks must produce none. ``CASES`` gathers every module's."""

from __future__ import annotations

import importlib
import pkgutil


def _gather() -> dict[str, str]:
    cases: dict[str, str] = {}
    for module in pkgutil.iter_modules(__path__):
        for name, source in importlib.import_module(f"{__name__}.{module.name}").CASES.items():
            if not name.startswith(f"{module.name}-"):
                raise ValueError(f"style case {name!r} lives in {module.name}.py")
            if name in cases:
                raise ValueError(f"style case {name!r} is defined twice")
            cases[name] = source
    return cases


CASES = _gather()
