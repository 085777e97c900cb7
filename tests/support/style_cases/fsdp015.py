"""Style cases for FSDP015: code written in styles the fixtures do not use."""

CASES = {
    "fsdp015-stale-list-in-trainer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.params = [p for p in model.parameters() if p.requires_grad]
                fully_shard(self.model)
            def step(self):
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # expect: FSDP015
    """,
    "fsdp015-local-norm-stack": """
        import torch
        norms = [p.grad.to_local().norm() for p in model.parameters() if p.grad is not None]
        total = torch.norm(torch.stack(norms))  # expect: FSDP015
    """,
    "fsdp015-good-generator-after-shard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        torch.nn.utils.clip_grad_norm_((p for p in model.parameters() if p.grad is not None), 1.0)
    """,
    "fsdp015-good-full-tensor-norm": """
        import torch
        total = torch.sqrt(sum(p.grad.full_tensor().pow(2).sum() for p in model.parameters()))
    """,
    "fsdp015-local-grads-total-norm": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.nn.utils import get_total_norm
        def log_norm(model):
            grads = [p.grad.to_local() for p in model.parameters() if p.grad is not None]
            return get_total_norm(grads, norm_type=2.0).item()  # expect: FSDP015
        fully_shard(model)
        log_norm(model)
    """,
    "fsdp015-good-shard-norms-checked-in-assertions": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class ClipTest(FSDPTest):
            def test_clip(self):
                model = Net()
                fully_shard(model)
                model(torch.randn(2, 4)).sum().backward()
                local_grads = [p.grad.to_local().detach().clone() for p in model.parameters()]
                assert all(torch.linalg.vector_norm(g).item() > 1.0 for g in local_grads)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                for param in model.parameters():
                    self.assertLessEqual(torch.linalg.vector_norm(param.grad.to_local()).item(), 1.0)
    """,
    "fsdp015-shard-norm-logged-next-to-an-assertion": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        fully_shard(model)
        model(batch).sum().backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.to_local().norm() for p in model.parameters()]))  # expect: FSDP015
        assert norm.isfinite()
        print(f"grad norm {norm.item():.3f}")
    """,
    "fsdp015-clipping-helper-given-a-stale-list-reported-at-its-call": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def clip(params, max_norm):
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        def main(model):
            params = list(model.parameters())
            fully_shard(model)
            model(x).sum().backward()
            norm = clip(params, 1.0)  # expect: FSDP015
    """,
    "fsdp015-trainer-clip-method-given-a-stale-list-reported-at-its-call": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def clip(self, params):
                return torch.nn.utils.clip_grad_norm_(params, self.max_norm)
            def setup(self, model):
                self.params = list(model.parameters())
                fully_shard(model)
                self.model = model
            def run(self, model, batch):
                self.setup(model)
                self.model(batch).sum().backward()
                self.clip(self.params)  # expect: FSDP015
    """,
    "fsdp015-good-clipping-helper-given-the-current-parameters": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def clip(params, max_norm):
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        def main(model):
            fully_shard(model)
            params = list(model.parameters())
            model(x).sum().backward()
            norm = clip(params, 1.0)
    """,
}
