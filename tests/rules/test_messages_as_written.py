"""A message quotes the module the way the code at the reported position names it, even once the
model is also stored in a container's attribute (`box.item = model`): the analysis names it from
its outermost owner, the user reads `model.no_sync()` and expects `model` (issue 19, item 9)."""

from __future__ import annotations

import textwrap

import pytest

from fsdp2_lint.engine import lint_source

HEAD = """
import copy

import torch
from torch.distributed.fsdp import fully_shard


class Box:
    pass


model = torch.nn.Linear(4, 4)
box = Box()
box.item = model
fully_shard(model)
"""


@pytest.mark.parametrize(
    "statement, code, quoted",
    [
        ("y = model.forward(torch.randn(2, 4))", "FSDP003", "`model.forward(...)`"),
        ('torch.save(model.state_dict(), "a.pt")', "FSDP004", "state dict of `model`,"),
        ("with model.no_sync():\n    pass", "FSDP005", "`model` is sharded"),
        ('model.load_state_dict(torch.load("full.pt"))', "FSDP013", "`model` is sharded"),
        ("twin = copy.deepcopy(model)", "FSDP020", "`model` is (or holds)"),
        ("inner = model.module", "FSDP024", "`model.module` does not exist"),
        # where the code names it through its owner, the message does too
        ("with box.item.no_sync():\n    pass", "FSDP005", "`box.item` is sharded"),
        ('torch.save(box.item.state_dict(), "a.pt")', "FSDP004", "state dict of `box.item`,"),
    ],
)
def test_the_message_names_the_module_as_the_reported_code_does(statement, code, quoted):
    source = textwrap.dedent(HEAD) + statement + "\n"
    (diagnostic,) = [d for d in lint_source(source.encode(), "train.py") if d.code == code]
    assert diagnostic.line == source.count("\n", 0, source.index(statement)) + 1
    assert quoted in diagnostic.message
    other = "box.item" if "`model" in quoted else "`model`"
    assert other not in diagnostic.message


def test_an_attribute_named_like_the_model_is_not_the_model():
    """`alias.model.no_sync()` does not name `model` by its `.model`: the message keeps the name from
    the outermost owner."""
    source = textwrap.dedent(HEAD).replace("box.item = model", "box.model = model")
    source += "alias = box\nwith alias.model.no_sync():\n    pass\n"
    (diagnostic,) = [d for d in lint_source(source.encode(), "train.py") if d.code == "FSDP005"]
    assert diagnostic.message.startswith("`box.model` is sharded")


@pytest.mark.parametrize("receiver", ["model", "box.item"])
def test_the_unshard_left_across_the_step_is_quoted_as_called(receiver):
    """FSDP044 quotes the `unshard()` call as written, not a placeholder for the module."""
    source = textwrap.dedent(HEAD) + (
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model(torch.randn(2, 4)).sum().backward()\n"
        f"{receiver}.unshard()\n"
        "optimizer.step()\n"
    )
    (diagnostic,) = [d for d in lint_source(source.encode(), "train.py") if d.code == "FSDP044"]
    assert diagnostic.message.startswith(f"`{receiver}.unshard()` runs after the last backward")


def test_sync_switched_back_on_for_another_module_alone_names_that_module():
    """FSDP014: `recurse=False` on a submodule is not "the module alone" of the one switched off."""
    source = textwrap.dedent("""
        from torch.distributed.fsdp import fully_shard
        fully_shard(model.head)
        fully_shard(model)
        model.set_requires_gradient_sync(False)
        for mb in micro_batches:
            model(mb).sum().backward()
        model.head.set_requires_gradient_sync(True, recurse=False)
        optimizer.step()
    """)
    (diagnostic,) = [d for d in lint_source(source.encode(), "train.py") if d.code == "FSDP014"]
    assert diagnostic.message == (
        "gradient sync of `model` stays off at the optimizer step: it is switched back on only for `model.head`"
    )
