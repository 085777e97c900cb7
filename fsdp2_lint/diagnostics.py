"""What the linter reports: :class:`Diagnostic` (with its :class:`Fix` of :class:`Edit` s and its
:class:`Applicability`), its :class:`Severity`, and FSDP000 as one record: :data:`PARSE_ERROR`, :data:`PARSE_ERROR_NAME` and
:func:`file_error`, the diagnostic for a file that cannot be read or parsed.

No libcst: the configuration, the output formats, the cache and the LSP features read these types
without loading the parser."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass

PARSE_ERROR = "FSDP000"
PARSE_ERROR_NAME = "unreadable-file"
_SYNTAX_HINT = "fix the syntax error: fsdp2-lint checked nothing else in this file"


class Severity(enum.Enum):
    ERROR = "error"  # definite breakage
    WARNING = "warning"  # likely breakage, or memory/performance
    INFO = "info"  # correct but slower than it needs to be: shown, never fails the run

    @property
    def fails(self) -> bool:
        """Does a diagnostic of this severity make the run exit with status 1? (``info`` never does.)"""
        return self is not Severity.INFO


class Applicability(enum.Enum):
    """Whether ``--fix`` applies a fix: safe ones keep the program's meaning apart from the bug they
    remove; unsafe ones change behaviour a reviewer should see (applied with ``--unsafe-fixes``)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, column) to (end_line, end_column) with ``content``
    (1-based, end exclusive, columns in characters)."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str
    cell: int | None = None  # in a notebook: the cell the lines count in


@dataclass(frozen=True)
class Fix:
    """A diagnostic's fix as text edits of the file: what applying it alone changes."""

    description: str
    applicability: Applicability
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Related:
    """Another place that makes a diagnostic a misuse (where the model was sharded, say)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    cell: int | None = None  # in a notebook: the cell (numbered from 1), its lines counted in the cell


@dataclass(frozen=True)
class Diagnostic:
    """One reported violation. Lines and columns are 1-based; the end column is exclusive."""

    code: str
    name: str
    message: str
    hint: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    source_line: str
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    cell: int | None = None  # in a notebook: the cell (numbered from 1); line and end_line count in it

    @property
    def place(self) -> str:
        """``line:column``, or ``cell N:line:column`` in a notebook (as Ruff prints it)."""
        return f"{self.line}:{self.column}" if self.cell is None else f"cell {self.cell}:{self.line}:{self.column}"

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["severity"] = self.severity.value
        if self.fix is not None:
            data["fix"]["applicability"] = self.fix.applicability.value
            for edit in data["fix"]["edits"]:
                if edit["cell"] is None:
                    del edit["cell"]
        if not self.related:
            del data["related"]
        for related in data.get("related", ()):
            if related["cell"] is None:
                del related["cell"]
        if self.cell is None:
            del data["cell"]
        del data["source_line"]
        return data


def file_error(path: str, message: str, line: int = 1, column: int = 1, hint: str = _SYNTAX_HINT) -> Diagnostic:
    return Diagnostic(
        code=PARSE_ERROR,
        name=PARSE_ERROR_NAME,
        message=message,
        hint=hint,
        severity=Severity.ERROR,
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        source_line="",
    )
