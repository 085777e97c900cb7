"""The fixtures to confirm: ``<CODE>/bad_*.py`` and ``<CODE>/good_*.py`` in the shipped
``fsdp2_lint.fixtures`` package, and the fixture projects ``<CODE>/bad_*/`` and ``<CODE>/good_*/``
(directories with an ``ENTRY``: see :mod:`.project`), paired with their rule (torch-free)."""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp2_lint.rule import Rule, RuntimeSignature, all_rules
from fsdp2_lint.runtime.harness.project import Entry, ProjectError, is_project, read_entry
from fsdp2_lint.runtime.launch.launcher import HarnessError
from fsdp2_lint.torch_version import TorchVersions


@dataclass(frozen=True)
class Fixture:
    rule: str
    path: Path  # the script, or the project's directory
    signature: RuntimeSignature
    entry: Entry | None = None  # how the project runs; None: a one-file fixture
    torch_versions: TorchVersions = TorchVersions()  # where its rule's failure shows (Rule.reproducible_on)

    @property
    def name(self) -> str:
        return self.path.name if self.entry else self.path.stem

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
    """Fixtures of ``rules`` (see :func:`.selection.select_rules`), in rule and name order (bad ones
    first, scripts and projects together), and notes about rules without fixtures, directories
    without an ``ENTRY`` and, when every rule is selected, fixture folders without a rule. A project
    whose ``ENTRY`` is wrong is a :class:`HarnessError`: the fixtures are broken, not the rule."""
    root = root or fixtures_root()
    fixtures, notes = [], []
    for rule in rules:
        found = []
        for kind in ("bad", "good"):
            for path in sorted(root.glob(f"{rule.code}/{kind}_*")):
                if path.is_file() and path.suffix == ".py":
                    found.append(Fixture(rule.code, path, rule.signature, None, rule.reproducible_on()))
                elif path.is_dir() and is_project(path):
                    found.append(Fixture(rule.code, path, rule.signature, _entry(path), rule.reproducible_on()))
                elif path.is_dir():
                    notes.append(f"{rule.code}/{path.name}: a directory without ENTRY (not run)")
        if not found:
            notes.append(f"{rule.code} has no fixtures")
        fixtures.extend(found)
    if set(rules) == set(all_rules()):
        folders = (path.name for path in root.iterdir() if path.is_dir() and path.name.startswith("FSDP"))
        orphans = sorted(name for name in folders if name not in {rule.code for rule in rules})
        notes.extend(f"{name}: fixtures without a rule (not run)" for name in orphans)
    return fixtures, notes


def _entry(project: Path) -> Entry:
    try:
        return read_entry(project)
    except ProjectError as error:
        raise HarnessError(f"fixture project {error}") from None
