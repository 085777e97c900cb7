"""Projects the harness runs (torch-free): a directory with an ``ENTRY`` file, or ``confirm -m MODULE``.

``ENTRY`` says how the project starts, as its README would tell a user to run it. Its first line is
either ``-m package.module`` (run as ``python -m package.module`` from the project directory) or a
script's path relative to the project (``train.py``: run as ``python train.py``). A module entry may
add ``path = DIR``: the directory, relative to the project, that goes first on ``sys.path``
instead of the project directory (``path = src`` for a src layout). Blank lines and lines starting
with ``#`` are ignored. The entry module is found without importing anything: by its file under
the import root.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ENTRY = "ENTRY"
MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class ProjectError(Exception):
    """A project the harness cannot run: no or a malformed ``ENTRY``, an entry it cannot find."""


@dataclass(frozen=True)
class Entry:
    """How a project runs: ``script`` is the file started (for a module, its file), ``import_root``
    goes first on ``sys.path`` (None: the script's directory, as ``python SCRIPT`` does)."""

    project: Path
    script: Path
    module: str | None = None
    import_root: Path | None = None

    def describe(self) -> str:
        return f"-m {self.module}" if self.module else str(self.script.relative_to(self.project))


def is_project(directory: Path) -> bool:
    return (directory / ENTRY).is_file()


def read_entry(project: Path) -> Entry:
    """The ``ENTRY`` of ``project`` (see the module docstring)."""
    project = project.resolve()
    path = project / ENTRY
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ProjectError(f"{path}: cannot read it ({error})") from None
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if not lines:
        raise ProjectError(f"{path}: empty; write `-m package.module` or a script's path, e.g. `train.py`")
    first, settings = lines[0], lines[1:]
    import_path = None
    for setting in settings:
        key, equals, value = (part.strip() for part in setting.partition("="))
        if key != "path" or not equals or not value:
            raise ProjectError(f"{path}: unknown line {setting!r}; the only setting is `path = DIR`")
        import_path = value
    if not first.startswith("-m"):
        if import_path is not None:
            raise ProjectError(f"{path}: `path = ...` applies to `-m package.module` entries only")
        return Entry(project, _inside(project, first, path, directory=False))
    root = _inside(project, import_path, path, directory=True) if import_path is not None else project
    return module_entry(first[2:].strip(), root, project, where=f"{path}: ")


def module_entry(module: str, import_root: Path, project: Path, where: str = "") -> Entry:
    """The entry that runs ``python -m MODULE`` with ``import_root`` first on ``sys.path``."""
    import_root, project = import_root.resolve(), project.resolve()
    if not MODULE_NAME.match(module):
        raise ProjectError(f"{where}{module!r} is not a module name (`-m package.module`)")
    script = find_module_file(module, [import_root])
    if script is None:
        raise ProjectError(f"{where}no module {module!r} under {import_root}")
    return Entry(project, script, module, import_root)


def find_module_file(module: str, roots: Sequence[Path]) -> Path | None:
    """The file ``python -m MODULE`` runs when ``roots`` come first on ``sys.path``: ``a/b.py``,
    or ``a/b/__main__.py`` for a package; found on disk, importing nothing."""
    parts = module.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for candidate in (base.with_name(base.name + ".py"), base / "__main__.py"):
            if candidate.is_file():
                return candidate
    return None


def _inside(project: Path, relative: str, entry: Path, directory: bool) -> Path:
    target = (project / relative).resolve()
    if not target.is_relative_to(project):
        raise ProjectError(f"{entry}: {relative!r} is outside the project")
    exists = target.is_dir() if directory else target.is_file() and target.suffix == ".py"
    if not exists:
        what = "a directory" if directory else "a Python script"
        raise ProjectError(f"{entry}: {relative!r} is not {what} of the project")
    return target
