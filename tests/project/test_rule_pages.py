"""The rule pages, docs/rules/<CODE>.md: one per rule, each the rule's current documentation, and
the page SARIF's ``helpUri`` and the LSP's ``codeDescription`` link to."""

from __future__ import annotations

from fixture_marks import ROOT
from rule_pages import PAGES, pages

from fsdp2_lint.rule import RULE_PAGES, RULE_PAGES_URL, all_rules
from fsdp2_lint.rule_docs import rule_markdown


def test_every_rule_has_its_current_page_and_no_other_page_exists():
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in PAGES.glob("*.md")}
    assert on_disk == pages(), "regenerate with `python tests/support/rule_pages.py --update`"
    assert len(on_disk) == len(all_rules()) and PAGES == ROOT / RULE_PAGES


def test_each_rules_url_names_its_page_in_the_repository():
    for rule in all_rules():
        assert rule.url() == f"{RULE_PAGES_URL}/{rule.code}.md"
        relative = rule.url().split("/blob/main/", 1)[1]
        page = (ROOT / relative).read_text(encoding="utf-8")
        assert page.startswith(f"# {rule.code} {rule.name} ") and page == rule_markdown(rule)
