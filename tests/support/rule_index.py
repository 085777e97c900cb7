"""The rule index, ``rules/_index.py`` (shipped as ``fsdp2_lint.rules._index``): each rule's head
(code, name, severity, prefilter tokens, torch versions, where its class is), which a run reads
instead of importing every rule. tests/rules/test_rule_index.py compares it with the rules; after a
change to a rule's head, or a new rule:

    python tests/support/rule_index.py --update
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from fsdp2_lint.rule import all_rules, index_source

INDEX = Path(__file__).resolve().parents[2] / "rules" / "_index.py"


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {sys.argv[0]} --update")
    INDEX.write_text(index_source(all_rules()), encoding="utf-8")
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    subprocess.run([ruff, "format", "--quiet", str(INDEX)], check=True)
