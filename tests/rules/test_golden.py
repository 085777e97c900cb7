"""Output over the whole corpus is what tests/golden/ recorded (see golden_outputs.py)."""

from __future__ import annotations

import pytest
from golden_outputs import GOLDEN, OUTPUTS, TORCH_VERSION_FILE, torch_version

UPDATE = "regenerate with `python tests/support/golden_outputs.py --update` if the change is intended"


def release(version: str) -> str:
    """A torch version without its build label: 2.13.0+cpu and 2.13.0+cu130 are one release, and
    their Python sources differ only in torch/version.py (the label, the CUDA version)."""
    return version.strip().split("+", 1)[0]


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_output_matches_the_golden_file(name):
    if name.startswith("torch"):
        assert release(torch_version()) == release(TORCH_VERSION_FILE.read_text()), (
            f"golden torch output was recorded with another torch; {UPDATE}"
        )
    assert OUTPUTS[name]() == (GOLDEN / name).read_text(), UPDATE


def test_the_net_has_something_to_catch():
    # each golden file records findings (or fixes), so a rule that stopped reporting shows in the diff
    for name in OUTPUTS:
        text = (GOLDEN / name).read_text()
        assert '"code": "FSDP0' in text or text.startswith("---"), name
