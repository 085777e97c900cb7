"""`fsdp2-lint lsp` with faults planted in its lints (driven by test_lsp.py): a document holding
one of the markers below makes its lint raise, kill its process, hang, or makes one rule raise.
Run as a script; its lint process imports ``faulty_lint`` from it by name."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from unittest import mock

from fsdp2_lint.lsp.worker import LintResult, LintWorker, lint_document
from fsdp2_lint.rule import all_rules

RAISE, CRASH, HANG, RULE_RAISES = "# plant: raise", "# plant: segfault", "# plant: hang", "# plant: FSDP003 raises"
TIMEOUT_SECONDS = 3


def faulty_lint(path: Path, source: bytes, overlays: dict[Path, bytes] | None = None) -> LintResult:
    if RAISE.encode() in source:
        raise RuntimeError("planted fault")
    if CRASH.encode() in source:
        os.kill(os.getpid(), signal.SIGSEGV)
    if HANG.encode() in source:
        time.sleep(3600)
    if RULE_RAISES.encode() in source:
        rule = next(rule for rule in all_rules() if rule.code == "FSDP003")
        with mock.patch.object(rule, "check", side_effect=RuntimeError("planted rule fault")):
            return lint_document(path, source, overlays)
    return lint_document(path, source, overlays)


if __name__ == "__main__":
    sys.modules["torch"] = None  # the editor install has no torch
    from fsdp2_lint.lsp import server

    server.server.worker = LintWorker(TIMEOUT_SECONDS, faulty_lint)
    server.serve()
