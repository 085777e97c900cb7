"""Which torch the code is linted for, as Ruff's ``target-version`` says which Python: a version
``MAJOR.MINOR``, the range of versions in which a rule's failure happens, and the default: the
installed torch, read from its package metadata (importing torch would take seconds and is not
possible where it is not installed, as in the pre-commit hook), else the newest version the rules
were checked against."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

# Compiled by `re` when a version is first read: a run that reads none compiles neither.
_GIVEN = r"(\d+)\.(\d+)(?:\.\d+)?"  # what a user writes: 2.13 (a patch number is accepted and ignored)
_INSTALLED = r"(\d+)\.(\d+)"  # the start of a package's version: 2.13.0+cpu, 2.14.0.dev20260101


class TorchVersion(NamedTuple):  # not a dataclass: compiling its methods would cost every start
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> TorchVersion:
        """``"2.13"`` (or ``"2.13.0"``); ValueError, with what is expected, for anything else."""
        match = re.fullmatch(_GIVEN, text.strip())
        if match is None:
            raise ValueError(f'invalid torch version {text!r}: expected MAJOR.MINOR, such as "2.13"')
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


# The torch the rules' claims and the test suite were checked against (2.13.0, CPU).
NEWEST_SUPPORTED = TorchVersion(2, 13)


@dataclass(frozen=True)
class TorchVersions:
    """The torch versions in which a rule's failure happens: from ``since`` (included) up to
    ``before`` (excluded); None is unbounded. Rules give the bounds as strings (``since="2.8"``);
    ``why`` says what changed at the bound, for the rule's documentation."""

    since: TorchVersion | str | None = None
    before: TorchVersion | str | None = None
    why: str = ""

    def __post_init__(self) -> None:
        for bound in ("since", "before"):
            value = getattr(self, bound)
            if isinstance(value, str):
                object.__setattr__(self, bound, TorchVersion.parse(value))
        if self.since is not None and self.before is not None and self.since >= self.before:
            raise ValueError(f"empty torch version range: since {self.since}, before {self.before}")

    def __contains__(self, version: TorchVersion) -> bool:
        return (self.since is None or version >= self.since) and (self.before is None or version < self.before)

    @property
    def unbounded(self) -> bool:
        return self.since is None and self.before is None

    def __str__(self) -> str:
        bounds = [f">= {self.since}" if self.since else "", f"< {self.before}" if self.before else ""]
        return "torch " + ", ".join(filter(None, bounds)) if not self.unbounded else "every torch version"

    def excludes(self, version: TorchVersion | None) -> str:
        """Why a failure cannot be reproduced on this torch, or "" when it can (or the version is unknown)."""
        if version is None or version in self:
            return ""
        return f"its failure happens on {self} only; torch {version} ran"

    def to_json(self) -> dict[str, str | None]:
        return {"since": _text(self.since), "before": _text(self.before)}


def _text(version: TorchVersion | str | None) -> str | None:
    return None if version is None else str(version)


def installed_torch() -> str | None:
    """The full version of the torch installed where the linter runs (``2.13.0+cpu``), from its
    package metadata (torch is not imported); None when there is none."""
    import importlib.metadata  # reading metadata costs a start-up its imports: only when asked

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_torch_version() -> TorchVersion | None:
    """The installed torch's MAJOR.MINOR; None when there is none, or its version does not start so."""
    match = re.match(_INSTALLED, installed_torch() or "")
    return TorchVersion(int(match.group(1)), int(match.group(2))) if match else None


def default_torch_version() -> TorchVersion:
    """What the code is linted for when nothing says: the installed torch, else the newest supported."""
    return installed_torch_version() or NEWEST_SUPPORTED
