"""Style cases for FSDP028: code written in styles the fixtures do not use."""

_BLOCK = """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 8)
            def forward(self, x):
                return RETURN
"""


def _case(returns: str, body: str, shard: str = "fully_shard(model.block)") -> str:
    return (
        (
            _BLOCK.replace("RETURN", returns)
            + """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.head = nn.Linear(8, 4)
            def forward(self, x):
BODY
                return self.head(h)
        model = Model()
        SHARD
        fully_shard(model)
        model(torch.randn(2, 8)).sum().backward()
"""
        )
        .replace("BODY", body.strip("\n"))
        .replace("SHARD", shard)
    )


CASES = {
    "fsdp028-torch-function-spellings": _case(
        "torch.transpose(self.lin(x), 0, 1)",
        """
                h = self.block(x)
                torch.relu_(h)  # expect: FSDP028
                h = F.relu(h, inplace=True)
""",
    ),
    "fsdp028-functional-inplace-keyword": _case(
        "self.lin(x).unsqueeze(0).squeeze(0)",
        """
                h = F.dropout(self.block(x), p=0.1, training=self.training, inplace=True)  # expect: FSDP028
""",
    ),
    "fsdp028-augmented-assignment-on-a-slice": _case(
        "self.lin(x).reshape(-1, 8)",
        """
                h = self.block(x)
                h[:, :4] *= 0.5  # expect: FSDP028
""",
    ),
    "fsdp028-torch-function-on-a-slice": _case(
        "self.lin(x).transpose(0, 1)",
        """
                h = self.block(x)
                torch.relu_(h[0])  # expect: FSDP028
""",
    ),
    "fsdp028-item-assignment-into-a-row": _case(
        "self.lin(x).view(-1, 8)",
        """
                h = self.block(x)
                h[0][1] = 0.0  # expect: FSDP028
""",
    ),
    "fsdp028-tuple-output-with-a-view": _case(
        "(self.lin(x).view(x.shape), x.sum())",
        """
                h, aux = self.block(x)
                h.add_(aux)  # expect: FSDP028
""",
    ),
    "fsdp028-element-of-chunk": _case(
        "self.lin(x).chunk(2, dim=-1)[0]",
        """
                h = self.block(x)
                h.clamp_(min=0.0)  # expect: FSDP028
                h = torch.cat([h, h], -1)
""",
    ),
    "fsdp028-good-fresh-output-builtin-module-root-output": _case(
        "x + self.lin(x)",
        """
                h = self.block(x)
                h.mul_(2.0)
                logits = self.head(h)
                logits.div_(2.0)
                h = logits
""",
        shard="fully_shard(model.block)\n        fully_shard(model.head)",
    ).replace(
        "model(torch.randn(2, 8)).sum().backward()",
        "out = model(torch.randn(2, 8))\n        out += 1\n        out.sum().backward()",
    ),
    "fsdp028-good-no-grad": _case(
        "self.lin(x).view(x.shape)",
        """
                with torch.no_grad():
                    h = self.block(x)
                    h += x
                h = self.block(x)
                h = h + x
""",
    ),
    "fsdp028-good-write-into-data-outside-autograd": _case(
        "self.lin(x).view(x.shape)",
        """
                h = self.block(x)
                h.data.mul_(2.0)
                h.data[0] = 0.0
""",
    ),
    "fsdp028-good-kept-unsharded-after-forward": _case(
        "self.lin(x).view(x.shape)",
        """
                h = self.block(x)
                h += x
""",
        shard="fully_shard(model.block, reshard_after_forward=False)",
    ),
    "fsdp028-good-write-after-backward": _case(
        "self.lin(x).view(x.shape)",
        """
                h = self.block(x)
""",
    ).replace(
        "model(torch.randn(2, 8)).sum().backward()",
        "feats = model.block(torch.randn(2, 8))\n        feats.sum().backward()\n        feats.zero_()",
    ),
}
