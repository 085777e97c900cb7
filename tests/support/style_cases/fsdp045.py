"""Style cases for FSDP045: code written in styles the fixtures do not use."""


def _parity_check(test: str, mark: str = "") -> str:
    """A parity test that trains a reference copy and the sharded model in one loop and reduces the
    gradients of the one ``test`` picks by hand (torchao's ``check_parity_no_mp``)."""
    return f"""
        import copy
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        def check_parity(ref_model, fsdp_model, inp):
            for model in (ref_model, fsdp_model):
                model(inp).sum().backward()
                if {test}:
                    for param in model.parameters():
                        dist.all_reduce(param.grad)
        def test_parity(module, inp):
            ref_module = copy.deepcopy(module)
            fully_shard(module)
            check_parity(ref_module, module, inp){mark}
    """


# One strategy class per FSDP version, created by a class method.
_STRATEGIES = """
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
        class FSDP1Strategy:
            def wrap_model(self, model):
                return FSDP(model)
            def clip_grad_norm_(self, model, max_norm):
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        class FSDP2Strategy:
            def wrap_model(self, model):
                fully_shard(model)
                return model
            def clip_grad_norm_(self, model, max_norm):
                return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        class StrategyBase:
            @classmethod
            def create(cls, config):
                if config.strategy == "fsdp":
                    return FSDP1Strategy()
                return FSDP2Strategy()
"""

CASES = {
    "fsdp045-gradient-list-then-loop": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        for grad in grads:
            dist.all_reduce(grad, group=dp_group)  # expect: FSDP045
    """,
    "fsdp045-coalesced-and-flattened": """
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        dist.all_reduce_coalesced(grads)  # expect: FSDP045
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)  # expect: FSDP045
    """,
    "fsdp045-async-handles-keyword-tensor": """
        from torch.distributed import all_reduce
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        loss.backward()
        handles = [all_reduce(tensor=p.grad.detach(), async_op=True) for p in model.parameters()]  # expect: FSDP045
        for handle in handles:
            handle.wait()
    """,
    "fsdp045-trainer-hook-reads-self-model": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                for block in model.layers:
                    fully_shard(block)
                self.model = fully_shard(model)
            def after_backward(self):
                for _, param in self.model.named_parameters():
                    if param.grad is None:
                        continue
                    dist.reduce(param.grad, dst=0)  # expect: FSDP045
    """,
    "fsdp045-submodule-inside-sharded-model": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        loss.backward()
        for p in model.decoder.parameters():
            dist.all_reduce(p.grad)  # expect: FSDP045
    """,
    "fsdp045-good-skips-dtensor-gradients": """
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        loss.backward()
        for p in model.parameters():
            if isinstance(p.grad, DTensor):
                continue  # reduced by FSDP already
            dist.all_reduce(p.grad)
        for p in model.parameters():
            if not isinstance(p, DTensor):
                dist.all_reduce(p.grad)
    """,
    "fsdp045-good-not-an-fsdp2-module": """
        import torch.distributed as dist
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def sync_gradients(model):
            if isinstance(model, FSDPModule):
                return  # FSDP2 reduces in backward
            for p in model.parameters():
                dist.all_reduce(p.grad)
        fully_shard(model)
        loss.backward()
        sync_gradients(model)
    """,
    "fsdp045-good-local-norm-and-loss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        loss = model(batch).sum()
        loss.backward()
        squares = sum(p.grad.to_local().pow(2).sum() for p in model.parameters())
        dist.all_reduce(squares)
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        norms = [p.grad.full_tensor().norm() for p in model.parameters()]
        dist.all_reduce(torch.stack(norms))
    """,
    "fsdp045-good-separate-unsharded-critic": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(actor)
        (actor_loss + critic_loss).backward()
        for p in critic.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
    """,
    "fsdp045-good-sync-before-sharding": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        warmup_loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        fully_shard(model)
    """,
    "fsdp045-good-two-tests-of-one-setting": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        args = parse_args()
        if args.fsdp:
            fully_shard(model)
        loss.backward()
        if not args.fsdp:
            for p in model.parameters():
                dist.all_reduce(p.grad)
    """,
    "fsdp045-good-mode-compared-twice": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        def train(model, mode):
            if mode == "fsdp2":
                fully_shard(model)
            loss = model(batch).sum()
            loss.backward()
            if mode == "ddp":
                for p in model.parameters():
                    dist.all_reduce(p.grad)
    """,
    "fsdp045-setting-changed-between-the-tests": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        args = parse_args()
        if args.fsdp:
            fully_shard(model)
        args.fsdp = False
        loss.backward()
        if not args.fsdp:
            for p in model.parameters():
                dist.all_reduce(p.grad)  # expect: FSDP045
    """,
    # An identity test picks one of the objects a loop goes through: the unsharded reference's
    # gradients are reduced by hand, as DDP would; the sharded model's must not be.
    "fsdp045-good-identity-test-picks-the-reference": _parity_check("model is ref_model"),
    "fsdp045-good-identity-test-excludes-the-sharded-model": _parity_check("model is not fsdp_model"),
    "fsdp045-good-negated-identity-test": _parity_check("not model is fsdp_model"),
    "fsdp045-identity-test-picks-the-sharded-model": _parity_check("model is fsdp_model", "  # expect: FSDP045"),
    "fsdp045-good-strategy-object-steps-the-model-it-wrapped": f"""{_STRATEGIES}\
        class ModelManager:
            def __init__(self, config):
                self.strategy = StrategyBase.create(config)
            def setup_model(self, module):
                self.model = self.strategy.wrap_model(module)
            def optimizer_step(self):
                return self.strategy.clip_grad_norm_(self.model, 1.0)
    """,
    "fsdp045-good-strategy-argument-steps-the-model-it-wrapped": f"""{_STRATEGIES}\
        def train(config, module, loader):
            strategy = StrategyBase.create(config)
            model = strategy.wrap_model(module)
            for batch in loader:
                model(batch).sum().backward()
                strategy.clip_grad_norm_(model, 1.0)
    """,
    "fsdp045-one-strategy-wraps-another-steps": f"""{_STRATEGIES}\
        class ModelManager:
            def __init__(self, config):
                self.strategy = StrategyBase.create(config)
                self.legacy = FSDP1Strategy()
            def setup_model(self, module):
                self.model = self.strategy.wrap_model(module)
            def optimizer_step(self):
                return self.legacy.clip_grad_norm_(self.model, 1.0)  # expect: FSDP045
    """,
}
