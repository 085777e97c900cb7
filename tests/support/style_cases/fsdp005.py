"""Style cases for FSDP005: code written in styles the fixtures do not use."""

# One strategy class per FSDP version, and a factory (its body follows).
_STRATEGIES = """
        import contextlib
        import torch.nn as nn
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
        class FSDP1Strategy:
            def wrap(self, model):
                return FSDP(model)
            def accumulate(self, model):
                return model.no_sync()
        class FSDP2Strategy:
            def wrap(self, model):
                fully_shard(model)
                return model
            def accumulate(self, model):
                model.set_requires_gradient_sync(False)
                return contextlib.nullcontext()
        STRATEGIES = {"fsdp": FSDP1Strategy, "fsdp2": FSDP2Strategy}
        def make_strategy(name):
"""

_STRATEGIES_REPORTED = _STRATEGIES.replace("return model.no_sync()", "return model.no_sync()  # expect: FSDP005")

CASES = {
    "fsdp005-conditional-context": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for step, batch in enumerate(loader):
            context = model.no_sync() if step % accum != 0 else contextlib.nullcontext()  # expect: FSDP005
            with context:
                model(batch).sum().backward()
    """,
    "fsdp005-trainer-method": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                for block in self.model.blocks:
                    fully_shard(block)
                fully_shard(self.model)
            def accumulate(self, batch):
                with self.model.no_sync():  # expect: FSDP005
                    self.model(batch).sum().backward()
    """,
    "fsdp005-good-hasattr-guard": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        def maybe_no_sync(model, sync):
            if not sync and hasattr(model, "no_sync"):
                return model.no_sync()
            return contextlib.nullcontext()
        fully_shard(model)
        with maybe_no_sync(model, False):
            loss.backward()
    """,
    "fsdp005-good-no-sync-only-when-not-fsdp2": """
        import contextlib
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def accumulate(model, batch):
            if isinstance(model, FSDPModule):
                model.set_requires_gradient_sync(False)
                ctx = contextlib.nullcontext()
            else:
                ctx = model.no_sync()
            with ctx:
                model(batch).sum().backward()
        fully_shard(model)
        accumulate(model, batch)
    """,
    "fsdp005-good-attribute-hasattr-guard": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        class Trainer:
            def setup(self):
                fully_shard(self.model)
            def backward(self, loss, sync):
                if not sync and hasattr(self.model, "no_sync"):
                    ctx = self.model.no_sync()
                else:
                    ctx = contextlib.nullcontext()
                with ctx:
                    loss.backward()
            def accumulate(self, loss):
                if not isinstance(self.model, DDP):
                    return
                with self.model.no_sync():
                    loss.backward()
    """,
    "fsdp005-attribute-after-a-guarded-branch": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def setup(self):
                fully_shard(self.model)
            def backward(self, loss):
                if hasattr(self.model, "no_sync"):
                    print("wrapper")
                with self.model.no_sync():  # expect: FSDP005
                    loss.backward()
    """,
    "fsdp005-after-a-guarded-branch": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        if hasattr(model, "no_sync"):
            print("wrapper")
        with model.no_sync():  # expect: FSDP005
            loss.backward()
    """,
    "fsdp005-good-fsdp1-wrapper": """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(model)
        with model.no_sync():
            loss.backward()
    """,
    "fsdp005-good-ddp-over-branch": """
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        if use_fsdp:
            fully_shard(model)
        else:
            model = DDP(model)
        if not use_fsdp:
            with model.no_sync():
                loss.backward()
    """,
    "fsdp005-model-in-a-dict-filled-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def __init__(self):
                self.models = {}
            def _build(self, role: str, path: str):
                module = AutoModelForCausalLM.from_pretrained(path)
                for layer in module.model.layers:
                    fully_shard(layer)
                fully_shard(module)
                self.models[role] = module
            def init_model(self):
                self._build("actor", self.config.path)
                self._build("ref", self.config.path)
            def update_actor(self, micro_batches):
                actor = self.models["actor"]
                for mb in micro_batches:
                    with actor.no_sync():  # expect: FSDP005
                        actor(mb).mean().backward()
    """,
    "fsdp005-good-plain-model-in-a-dict-filled-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def __init__(self):
                self.models = {}
            def init_model(self):
                self.models["actor"] = fully_shard(AutoModelForCausalLM.from_pretrained(path))
                self.models["critic"] = DDP(Critic())
            def update_critic(self, micro_batches):
                critic = self.models["critic"]
                for mb in micro_batches:
                    with critic.no_sync():
                        critic(mb).mean().backward()
    """,
    "fsdp005-good-trainer-own-no-sync": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = fully_shard(model)
            @contextlib.contextmanager
            def no_sync(self):
                self.model.set_requires_gradient_sync(False)
                yield
                self.model.set_requires_gradient_sync(True)
            def step(self, x):
                with self.no_sync():
                    self.model(x).sum().backward()
    """,
    "fsdp005-good-base-trainer-own-no-sync": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        class BaseTrainer:
            @contextlib.contextmanager
            def no_sync(self):
                self.model.set_requires_gradient_sync(False)
                try:
                    yield
                finally:
                    self.model.set_requires_gradient_sync(True)
        class Trainer(BaseTrainer):
            def setup(self, model):
                self.model = model
                fully_shard(self.model)
            def accumulate(self, batches):
                for batch in batches:
                    sync = self.no_sync
                    with sync():
                        self.model(batch).sum().backward()
    """,
    "fsdp005-good-model-class-own-no-sync": """
        import contextlib
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])
            @contextlib.contextmanager
            def no_sync(self):
                self.set_requires_gradient_sync(False)
                try:
                    yield
                finally:
                    self.set_requires_gradient_sync(True)
        model = Model()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with model.no_sync():
            model(x).sum().backward()
        context = getattr(model, "no_sync", contextlib.nullcontext)
        class Trainer:
            def __init__(self):
                self.model = fully_shard(Model())
            def step(self, x):
                with self.model.no_sync():
                    self.model(x).sum().backward()
    """,
    "fsdp005-good-own-no-sync-property": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        class Engine:
            def __init__(self, model, accumulate):
                self.model = fully_shard(model)
                self.accumulate = accumulate
            @property
            def no_sync(self):
                return self.model_no_sync if self.accumulate else contextlib.nullcontext
            @contextlib.contextmanager
            def model_no_sync(self):
                self.model.set_requires_gradient_sync(False)
                yield
                self.model.set_requires_gradient_sync(True)
            def step(self, x):
                with self.no_sync():
                    self.model(x).sum().backward()
    """,
    "fsdp005-good-own-no-sync-class-attribute": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        class Evaluator:
            no_sync = contextlib.nullcontext
            def __init__(self, model):
                self.model = fully_shard(model)
            def run(self, x):
                with self.no_sync():
                    return self.model(x)
    """,
    "fsdp005-trainer-own-no-sync-but-calls-the-model-s": """
        import contextlib
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = fully_shard(model)
            @contextlib.contextmanager
            def no_sync(self):
                with self.model.no_sync():  # expect: FSDP005
                    yield
            def step(self, x):
                with self.no_sync():
                    self.model(x).sum().backward()
    """,
    "fsdp005-model-class-defines-another-name": """
        import contextlib
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            @contextlib.contextmanager
            def sync_off(self):
                self.set_requires_gradient_sync(False)
                yield
                self.set_requires_gradient_sync(True)
        class Trainer:
            def __init__(self):
                self.model = fully_shard(Model())
            @contextlib.contextmanager
            def no_sync_context(self):
                yield
            def step(self, x):
                with self.model.no_sync():  # expect: FSDP005
                    self.model(x).sum().backward()
    """,
    "fsdp005-good-strategy-object-and-the-model-it-wrapped": f"""{_STRATEGIES}\
            if name == "fsdp":
                return FSDP1Strategy()
            return FSDP2Strategy()
        class Trainer:
            def __init__(self, name):
                self.strategy = make_strategy(name)
            def setup(self):
                self.model = self.strategy.wrap(nn.Linear(8, 8))
            def step(self, batch):
                with self.strategy.accumulate(self.model):
                    self.model(batch).sum().backward()
    """,
    "fsdp005-good-strategy-from-a-registry-and-the-model-it-wrapped": f"""{_STRATEGIES}\
            return STRATEGIES[name]()
        strategy = make_strategy(args.strategy)
        model = strategy.wrap(nn.Linear(8, 8))
        for batch in loader:
            with strategy.accumulate(model):
                model(batch).sum().backward()
    """,
    "fsdp005-good-strategy-chosen-by-match-wraps-in-a-helper": f"""{_STRATEGIES}\
            match name:
                case "fsdp":
                    return FSDP1Strategy()
                case _:
                    return FSDP2Strategy()
        def build(strategy):
            return strategy.wrap(nn.Linear(8, 8))
        strategy = make_strategy(args.strategy)
        model = build(strategy)
        with strategy.accumulate(model):
            model(batch).sum().backward()
    """,
    "fsdp005-one-strategy-wraps-another-accumulates": f"""{_STRATEGIES_REPORTED}\
            if name == "fsdp":
                return FSDP1Strategy()
            return FSDP2Strategy()
        class Trainer:
            def __init__(self, config):
                self.wrapping = make_strategy(config.wrap)
                self.accumulating = make_strategy(config.accumulate)
            def setup(self):
                self.model = self.wrapping.wrap(nn.Linear(8, 8))
            def step(self, batch):
                with self.accumulating.accumulate(self.model):
                    self.model(batch).sum().backward()
    """,
}
