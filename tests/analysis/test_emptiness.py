"""Which skip tests run their exiting arm when a value is None or empty (FSDP012's data skips)."""

from __future__ import annotations

import libcst as cst
import pytest

from fsdp2_lint.analysis.emptiness import exits_when_empty


@pytest.mark.parametrize(
    ("test", "exit_on_true", "expected"),
    [
        ("batch is None", True, True),
        ("batch == None", True, True),
        ("batch is not None", False, True),
        ("batch is not None", True, False),
        ("not batch", True, True),
        ("batch", False, True),
        ("batch", True, False),
        ('batch["pixel_values"] is None', True, True),
        ("batch.input_ids is None", True, True),
        ("len(batch) == 0", True, True),
        ("len(batch) < 1", True, True),
        ("len(batch) > 0", False, True),
        ("len(batch) > 0", True, False),
        ("not len(batch)", True, True),
        ("x.numel() == 0", True, True),
        ("x.nelement() == 0", True, True),
        ("x.size(0) == 0", True, True),
        ("x.shape[0] == 0", True, True),
        ("x.size(1) == 0", True, False),
        ("x.shape[1] == 0", True, False),
        ("batch is None or len(batch) == 0", True, True),
        ("batch is not None and len(batch) > 0", False, True),
        ("batch is None and step > 3", True, False),
        ("self is None", True, False),
        ("self.vision_tower is None", True, False),
        ("not self.training", True, False),
        ("not cfg.use_vision", True, False),
        ('not batch["input_ids"]', True, True),
        ("step == 1", True, False),
        ("torch.isnan(loss)", True, False),
        ("len(batch) == 4", True, False),
    ],
)
def test_exits_when_empty(test, exit_on_true, expected):
    assert exits_when_empty(cst.parse_expression(test), exit_on_true) is expected


def test_a_plain_truth_test_counts_only_where_asked():
    assert exits_when_empty(cst.parse_expression("not batch"), True)
    assert not exits_when_empty(cst.parse_expression("not batch"), True, truthiness=False)
    assert exits_when_empty(cst.parse_expression("batch is None"), True, truthiness=False)
    assert exits_when_empty(cst.parse_expression("len(batch) == 0"), True, truthiness=False)
