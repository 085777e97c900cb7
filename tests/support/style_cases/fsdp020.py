"""Style cases for FSDP020: code written in styles the fixtures do not use."""

CASES = {
    "fsdp020-trainer-ema-in-other-method": """
        import copy
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                for block in self.model.blocks:
                    fully_shard(block)
                fully_shard(self.model)
            def build_ema(self):
                self.ema = copy.deepcopy(self.model)  # expect: FSDP020
                self.ema.requires_grad_(False)
    """,
    "fsdp020-module-alias-and-attribute-path": """
        import copy as cp
        import torch
        from torch.distributed import fsdp
        for block in model.blocks:
            fsdp.fully_shard(block)
        swa = torch.optim.swa_utils.AveragedModel(model, use_buffers=True)  # expect: FSDP020
        first = cp.deepcopy(model.blocks[0])  # expect: FSDP020
    """,
    "fsdp020-keyword-and-timm": """
        from copy import deepcopy
        from timm.utils import ModelEmaV3
        from torch.distributed.fsdp import fully_shard
        def setup(model, mesh):
            fully_shard(model, mesh=mesh)
            ema = ModelEmaV3(model, decay=0.9998)  # expect: FSDP020
            frozen = deepcopy(x=model)  # expect: FSDP020
            return ema, frozen
    """,
    "fsdp020-good-copy-before-shard-then-shard-both": """
        import copy
        from torch.distributed.fsdp import fully_shard
        def shard(m):
            for block in m.blocks:
                fully_shard(block)
            fully_shard(m)
        ema = copy.deepcopy(model)
        shard(model)
        shard(ema)
    """,
    "fsdp020-good-averaged-model-before-shard": """
        from torch.distributed.fsdp import fully_shard
        from torch.optim.swa_utils import AveragedModel
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.swa = AveragedModel(model)
                fully_shard(self.model)
                fully_shard(self.swa.module)
    """,
    "fsdp020-good-submodule-only-managed-by-root": """
        import copy
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        head = copy.deepcopy(model.head)  # a plain module whose parameters are DTensors: torch copies it
    """,
    "fsdp020-good-state-dict-and-params": """
        import copy
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        best = copy.deepcopy(model.state_dict())
        before = [p.detach().clone() for p in model.parameters()]
    """,
    "fsdp020-good-fsdp1-and-ddp": """
        import copy
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = DDP(net)
        ema = copy.deepcopy(ddp.module)
        wrapped = FSDP(other)
        ref = copy.deepcopy(wrapped)
    """,
    "fsdp020-good-other-module": """
        import copy
        from torch.distributed.fsdp import fully_shard
        fully_shard(policy)
        target_critic = copy.deepcopy(critic)
    """,
    "fsdp020-good-type-test": """
        import copy
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def make_ema(model):
            if isinstance(model, FSDPModule):
                return None
            return copy.deepcopy(model)
        fully_shard(model)
        ema = make_ema(model)
    """,
    "fsdp020-ema-update-spellings": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Model()
        ema = copy.deepcopy(model)
        fully_shard(model)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.data.mul_(0.99).add_(p.data, alpha=0.01)  # expect: FSDP020
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.01)  # expect: FSDP020
            ema_state = ema.state_dict()
            for key, value in model.state_dict().items():
                ema_state[key].lerp_(value, 0.01)  # expect: FSDP020
    """,
    "fsdp020-ema-copied-back-for-eval": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.ema = copy.deepcopy(model)
                fully_shard(self.model)
            def swap_in_ema(self):
                with torch.no_grad():
                    for p, e in zip(self.model.parameters(), self.ema.parameters()):
                        p.copy_(e)  # expect: FSDP020
    """,
    "fsdp020-good-ema-from-gathered-or-local-values": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Model()
        ema = copy.deepcopy(model)
        fully_shard(model)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p.full_tensor(), 0.01)
            for key, value in model.state_dict().items():
                value.full_tensor()
    """,
    "fsdp020-good-ema-handed-to-unknown-code": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib import shard_like
        model = Model()
        ema = copy.deepcopy(model)
        fully_shard(model)
        shard_like(ema, model)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.01)
    """,
    "fsdp020-good-two-unsharded-models": """
        import copy
        import torch
        model = Model()
        ema = copy.deepcopy(model)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.01)
    """,
    "fsdp020-ema-update-arithmetic": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        class ModelEmaV2:
            def __init__(self, model, decay=0.9999):
                self.module = copy.deepcopy(model)
                self.decay = decay
            @torch.no_grad()
            def update(self, model):
                for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                    ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * model_v)
        model = Model()
        ema = ModelEmaV2(model)
        fully_shard(model)
        ema.update(model)  # expect: FSDP020
        d = 0.999
        with torch.no_grad():
            for e, p in zip(ema.module.parameters(), model.parameters()):
                e.sub_((1 - d) * (e - p))  # expect: FSDP020
            shadow = list(ema.module.parameters())
            for i, p in enumerate(model.parameters()):
                shadow[i].mul_(d).add_(p.detach(), alpha=1 - d)  # expect: FSDP020
    """,
    "fsdp020-good-ema-arithmetic-gathered-or-sharded-too": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Model()
        ema = copy.deepcopy(model)
        twin = copy.deepcopy(model)
        fully_shard(model)
        fully_shard(twin)
        d = 0.999
        with torch.no_grad():
            for ema_v, model_v in zip(ema.state_dict().values(), model.state_dict().values()):
                ema_v.copy_(ema_v * d + (1.0 - d) * model_v.full_tensor())
            for t, p in zip(twin.parameters(), model.parameters()):
                t.copy_(t * d + (1 - d) * p.detach())
            for e, t in zip(ema.parameters(), ema.parameters()):
                e.copy_(e * d + t / 2)
    """,
    "fsdp020-ema-data-assigned": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        class EMA:
            def __init__(self, model, decay):
                self.decay = decay
                self.training_model = model
                self.ema_model = copy.deepcopy(model)
            def update(self):
                for (ema_name, ema_param), (name, param) in zip(
                    self.ema_model.named_parameters(), self.training_model.named_parameters()
                ):
                    ema_param.data = self.decay * ema_param.data + (1.0 - self.decay) * param.data  # expect: FSDP020
        def train(model, mesh):
            ema = EMA(model, 0.999)
            for block in model.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
            ema.update()
            ema_sd, msd = ema.ema_model.state_dict(), model.state_dict()
            for key in msd:
                ema_sd[key] = 0.999 * ema_sd[key] + 0.001 * msd[key]  # expect: FSDP020
    """,
    "fsdp020-good-ema-data-assigned-gathered-or-swapped": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Model()
        ema = copy.deepcopy(model)
        fully_shard(model)
        d = 0.999
        for e, p in zip(ema.parameters(), model.parameters()):
            e.data = d * e.data + (1 - d) * p.full_tensor()
            e.data = e.data * 2
        other = copy.deepcopy(ema)
        for e, o in zip(ema.parameters(), other.parameters()):
            e.data = d * e.data + (1 - d) * o.data
    """,
    "fsdp020-good-guard-helper-returns-type-test": """
        import copy
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def is_model_fsdp(model):
            if isinstance(model, FSDPModule):
                return True
            for _, child in model.named_children():
                if isinstance(child, FSDPModule):
                    return True
            return False
        def export(model):
            if is_model_fsdp(model):
                raise ValueError("export the model before sharding it")
            return copy.deepcopy(model)
        def main(model):
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            export(model)
    """,
    "fsdp020-good-guard-helper-early-false-method": """
        import copy
        from torch.distributed.fsdp import FSDPModule, fully_shard
        class Exporter:
            def sharded(self, module):
                if not isinstance(module, FSDPModule):
                    return False
                return True
            def snapshot(self, module):
                if not self.sharded(module):
                    return copy.deepcopy(module)
                return None
        fully_shard(model)
        Exporter().snapshot(model)
    """,
    "fsdp020-guard-helper-tests-ddp-only": """
        import copy
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel
        def is_wrapped(model):
            if isinstance(model, DistributedDataParallel):
                return True
            return False
        def export(model):
            if is_wrapped(model):
                raise ValueError("export the module, not its wrapper")
            return copy.deepcopy(model)  # expect: FSDP020
        fully_shard(model)
        export(model)
    """,
    "fsdp020-guard-helper-false-where-sharded": """
        import copy
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def is_plain(model, strict):
            if isinstance(model, FSDPModule) and strict:
                return False
            if strict:
                return True
            return False
        def export(model):
            if is_plain(model, True):
                return None
            return copy.deepcopy(model)  # expect: FSDP020
        fully_shard(model)
        export(model)
    """,
}
