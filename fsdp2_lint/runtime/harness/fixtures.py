"""The fixtures to confirm: ``<CODE>/bad_*.py`` and ``<CODE>/good_*.py`` in the shipped
``fsdp2_lint.fixtures`` package, paired with their rule (torch-free)."""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.rule import Rule, RuntimeSignature, all_rules


@dataclass(frozen=True)
class Fixture:
    rule: str
    path: Path
    signature: RuntimeSignature

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def bad(self) -> bool:
        """Bad fixtures must show their rule's failure; good ones must train cleanly."""
        return self.name.startswith("bad_")


def fixtures_root() -> Path:
    root = importlib.resources.files("fsdp2_lint.fixtures")
    if not isinstance(root, Path):
        raise RuntimeError(f"fixtures must be installed as files on disk, found {root!r}")
    return root


def discover(rules: Sequence[type[Rule]], root: Path | None = None) -> tuple[list[Fixture], list[str]]:
    """Fixtures of ``rules`` (see :func:`.selection.select_rules`), in rule and name order, and notes
    about rules without fixtures and, when every rule is selected, fixture folders without a rule."""
    root = root or fixtures_root()
    fixtures, notes = [], []
    for rule in rules:
        paths = sorted(root.glob(f"{rule.code}/bad_*.py")) + sorted(root.glob(f"{rule.code}/good_*.py"))
        if not paths:
            notes.append(f"{rule.code} has no fixtures")
        fixtures.extend(Fixture(rule.code, path, rule.signature) for path in paths)
    if set(rules) == set(all_rules()):
        folders = (path.name for path in root.iterdir() if path.is_dir() and path.name.startswith("FSDP"))
        orphans = sorted(name for name in folders if name not in {rule.code for rule in rules})
        notes.extend(f"{name}: fixtures without a rule (not run)" for name in orphans)
    return fixtures, notes
