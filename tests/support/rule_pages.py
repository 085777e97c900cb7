"""Each rule's documentation page, ``docs/rules/<CODE>.md``: the text ``fsdp2-lint rule CODE``
prints and SARIF's rule help carries (``rule_docs.rule_markdown``), where SARIF's ``helpUri`` and the
LSP's ``codeDescription`` link (``Rule.url()``). tests/project/test_rule_pages.py compares them with
the rules; after a change to a rule's documentation, or a new rule:

    python tests/support/rule_pages.py --update
"""

from __future__ import annotations

import sys
from pathlib import Path

from fsdp2_lint.rule import RULE_PAGES, all_rules
from fsdp2_lint.rule_docs import rule_markdown

PAGES = Path(__file__).resolve().parents[2] / RULE_PAGES


def pages() -> dict[str, str]:
    """Every page as it should be: file name -> text."""
    return {f"{rule.code}.md": rule_markdown(rule) for rule in all_rules()}


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {sys.argv[0]} --update")
    PAGES.mkdir(parents=True, exist_ok=True)
    for stale in set(path.name for path in PAGES.glob("FSDP*.md")) - set(pages()):
        (PAGES / stale).unlink()
    for name, text in pages().items():
        (PAGES / name).write_text(text, encoding="utf-8")
