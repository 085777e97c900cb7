"""Style cases for FSDP024: code written in styles the fixtures do not use."""

# Methods that each read ``self.config``: more reads than the expansions a function gets per file.
_CONFIG_READERS = "".join(
    f"""
            def uses_config_{n}(self):
                self.calls = {n}
                return self.config is not None"""
    for n in range(80)
)


def _config_object_load(test: str, mark: str = "") -> str:
    """A state whose config object holds the checkpoint kind, converting the optimizer state under
    ``test`` on a property that implies ``kind == "full"`` (composer's FSDP2Config.state_dict_type)."""
    return f"""
        import torch
        from dataclasses import dataclass
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def to_load(state, model, optimizer, kind="full"):
            if kind == "sharded":
                return FSDP.flatten_sharded_optim_state_dict(state, model, optimizer){mark}
            return state
        @dataclass
        class FSDPConfig:
            kind: str = "sharded"
            rank0_only: bool = False
        class State:
            def __init__(self, model, optimizer, kind):
                self.model = fully_shard(model)
                self.optimizer = optimizer
                self.config = FSDPConfig(kind=kind)
            @property
            def monolith(self):
                return self.config.kind == "full" and self.config.rank0_only
            def load(self, state):
                {test}
                    state = to_load(state, self.model, self.optimizer, kind=self.config.kind)
                self.optimizer.load_state_dict(state)
    """


def _unwrap_by_class(
    wrappers: str, test: str, access: str = "getattr(model, WRAPPERS[type(model)])", mark: str = ""
) -> str:
    """An unwrap helper that reads `.module` only under a test of the model's class against a
    collection of wrapper classes (a dict keyed by them, a set, a tuple), run on an FSDP2 model."""
    return f"""
        import torch.nn as nn
        from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        WRAPPERS = {wrappers}
        def unwrap_model(model):
            {test}
                return {access}{mark}
            return model
        def main():
            model = fully_shard(nn.Linear(8, 8))
            return unwrap_model(model)
    """


CASES = {
    "fsdp024-good-model-class-own-methods": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
            @property
            def module(self):
                return self.inner
            def clip_grad_norm_(self, max_norm):
                return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        model = Model(nn.Linear(8, 8))
        fully_shard(model)
        model.clip_grad_norm_(1.0)
        inner = model.module
        class Trainer:
            def __init__(self, inner):
                self.model = fully_shard(Model(inner))
            def step(self):
                self.model.clip_grad_norm_(1.0)
                return self.model.module.weight
    """,
    "fsdp024-good-base-class-defines-clip": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class ClipMixin:
            def clip_grad_norm_(self, max_norm):
                return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        class Model(ClipMixin, nn.Module):
            pass
        def train(model):
            fully_shard(model)
            model.clip_grad_norm_(1.0)
        train(Model())
    """,
    "fsdp024-model-class-without-those-methods": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def clip_gradients(self, max_norm):
                pass
        class Trainer:
            def __init__(self):
                self.model = fully_shard(Model())
            def clip_grad_norm_(self, max_norm):
                return self.model.clip_grad_norm_(max_norm)  # expect: FSDP024
            def unwrapped(self):
                return self.model.module  # expect: FSDP024
    """,
    "fsdp024-good-fsdp1-arm-of-a-module-flag-set-to-fsdp2": """
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = True
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)
        train(Net())
    """,
    "fsdp024-good-fsdp1-arm-of-a-class-flag-set-to-fsdp2": """
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            use_fsdp2 = True
            def __init__(self, model):
                self.model = model
                fully_shard(model)
            def step(self, clip):
                if not self.use_fsdp2 and clip:
                    self.model.clip_grad_norm_(1.0)
        Trainer(Net()).step(True)
    """,
    "fsdp024-good-fsdp1-arm-of-a-config-default-set-to-fsdp2": """
        from dataclasses import dataclass
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class Config:
            use_fsdp2: bool = True
        cfg = Config()
        model = Net()
        fully_shard(model)
        if not cfg.use_fsdp2:
            model.clip_grad_norm_(1.0)
    """,
    "fsdp024-fsdp1-arm-of-a-module-flag-set-to-fsdp1": """
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = False
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)  # expect: FSDP024
        train(Net())
    """,
    "fsdp024-fsdp1-arm-of-a-flag-read-at-run-time": """
        import os
        from torch.distributed.fsdp import fully_shard
        USE_FSDP2 = os.environ.get("USE_FSDP2") == "1"
        def train(model):
            fully_shard(model)
            if not USE_FSDP2:
                model.clip_grad_norm_(1.0)  # expect: FSDP024
        train(Net())
    """,
    # A setting tested once decides a later test of it: through a helper's parameter, a property
    # whose truth implies it, an early exit. The arm they rule out is never taken.
    "fsdp024-good-helper-arm-ruled-out-by-the-callers-test": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def to_load(state, model, optimizer, kind):
            if kind == "sharded":
                return FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)
            return state
        def load(cfg, model, optimizer, state):
            fully_shard(model)
            if cfg.checkpoint.kind == "full":
                state = to_load(state, model, optimizer, cfg.checkpoint.kind)
            optimizer.load_state_dict(state)
    """,
    "fsdp024-good-arm-ruled-out-by-a-property-the-caller-tests": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def to_load(state, model, optimizer, kind="full"):
            if kind == "sharded":
                return FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)
            return state
        class State:
            def __init__(self, model, optimizer, config=None):
                self.model = model
                self.optimizer = optimizer
                self.config = config
            def shard(self):
                fully_shard(self.model)
            @property
            def kind(self):
                if self.config is None:
                    return None
                return self.config.kind
            @property
            def rank0_only(self):
                ok = self.config is not None and self.config.kind == "full"
                if self.config.strict:
                    ok = ok and self.config.rank0_only
                return ok
            def load(self, state):
                if self.rank0_only:
                    state = to_load(state, self.model, self.optimizer, kind=self.kind)
                self.optimizer.load_state_dict(state)
    """,
    # The configuration behind an accessor property (composer's ``State.fsdp_config``), read in many
    # methods of the class before the one that tests it: an accessor is read however often.
    "fsdp024-good-arm-ruled-out-through-an-accessor-read-everywhere": f"""
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def to_load(state, model, optimizer, kind="full"):
            if kind == "sharded":
                return FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)
            return state
        class State:
            def __init__(self, model, optimizer, config=None, legacy=None):
                self.model = fully_shard(model)
                self.optimizer = optimizer
                self._config = config
                self._legacy = legacy
            @property
            def config(self):
                \"\"\"The new configuration if there is one, else the legacy one.\"\"\"
                return self._config if self._config is not None else self._legacy{_CONFIG_READERS}
            @property
            def rank0_only(self):
                return self.config is not None and self.config.kind == "full"
            def load(self, state):
                if self.rank0_only:
                    state = to_load(state, self.model, self.optimizer, kind=self.config.kind)
                self.optimizer.load_state_dict(state)
    """,
    "fsdp024-arm-not-ruled-out-through-an-accessor-read-everywhere": f"""
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        class State:
            def __init__(self, model, optimizer, config=None, legacy=None):
                self.model = fully_shard(model)
                self.optimizer = optimizer
                self._config = config
                self._legacy = legacy
            @property
            def config(self):
                return self._config if self._config is not None else self._legacy{_CONFIG_READERS}
            @property
            def rank0_only(self):
                return self.config is not None and self.config.kind == "full"
            def load(self, state):
                if not self.rank0_only:
                    state = FSDP.flatten_sharded_optim_state_dict(state, self.model, self.optimizer)  # expect: FSDP024
                self.optimizer.load_state_dict(state)
    """,
    "fsdp024-good-arm-ruled-out-after-an-early-exit": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        class Loader:
            def __init__(self, model, optimizer, cfg):
                self.model, self.optimizer, self.cfg = fully_shard(model), optimizer, cfg
            def load(self, state):
                if self.cfg.kind != "full":
                    return
                if self.cfg.kind == "sharded":
                    state = FSDP.flatten_sharded_optim_state_dict(state, self.model, self.optimizer)
                self.optimizer.load_state_dict(state)
    """,
    "fsdp024-arm-of-a-property-that-implies-nothing": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        class State:
            def __init__(self, model, optimizer, config):
                self.model = fully_shard(model)
                self.optimizer = optimizer
                self.config = config
            @property
            def rank0_only(self):
                return self.config.kind == "full" or self.config.rank0_only
            def load(self, state):
                if self.rank0_only:
                    if self.config.kind == "sharded":
                        state = FSDP.flatten_sharded_optim_state_dict(state, self.model, self.optimizer)  # expect: FSDP024
                self.optimizer.load_state_dict(state)
    """,
    "fsdp024-setting-changed-in-the-arm-that-tested-it": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def load(cfg, model, optimizer, state):
            fully_shard(model)
            if cfg.kind == "full":
                cfg.kind = "sharded"
                if cfg.kind == "sharded":
                    state = FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)  # expect: FSDP024
            optimizer.load_state_dict(state)
    """,
    "fsdp024-setting-tested-in-a-helper-that-returned-early": """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import fully_shard
        def check(cfg):
            if cfg.kind == "full":
                return True
            return False
        def load(cfg, model, optimizer, state):
            fully_shard(model)
            check(cfg)
            if cfg.kind == "sharded":
                state = FSDP.flatten_sharded_optim_state_dict(state, model, optimizer)  # expect: FSDP024
            optimizer.load_state_dict(state)
    """,
    # A setting a config object holds (what its constructor was given): in the arm of a property
    # that implies `kind == "full"`, it is "full" (composer's FSDP2Config.state_dict_type).
    "fsdp024-good-config-object-setting-ruled-out-by-a-property": _config_object_load("if self.monolith:"),
    "fsdp024-config-object-setting-kept-where-the-property-is-false": _config_object_load(
        "if not self.monolith:", "  # expect: FSDP024"
    ),
    # A guard clause that tells the other strategy's wrapper apart before the access: an FSDP2
    # module never gets past it (Megatron-FSDP's wrapper has `.module`).
    "fsdp024-good-wrapper-guard-clause-returns": """
        from torch.distributed.fsdp import fully_shard
        try:
            from megatron_fsdp import MegatronFSDP
        except ImportError:
            MegatronFSDP = None
        def snapshot(model):
            if MegatronFSDP is None or not isinstance(model, MegatronFSDP):
                return None
            return {name: dict(p.__dict__) for name, p in model.module.named_parameters()}
        def build(model, use_megatron):
            if use_megatron:
                model = MegatronFSDP(model)
            else:
                fully_shard(model)
            return snapshot(model)
    """,
    "fsdp024-good-wrapper-guard-clause-raises": """
        from torch.distributed.fsdp import fully_shard
        from megatron_fsdp import MegatronFSDP
        def unwrap(model):
            if not isinstance(model, MegatronFSDP):
                raise TypeError("expected a Megatron-FSDP model")
            return model.module
        def main(model, megatron):
            model = MegatronFSDP(model) if megatron else fully_shard(model)
            return unwrap(model)
    """,
    "fsdp024-good-wrapper-guard-clause-in-a-loop": """
        import megatron_fsdp
        from torch.distributed.fsdp import fully_shard
        def names(parts):
            found = []
            for part in parts:
                if not isinstance(part, megatron_fsdp.MegatronFSDP):
                    continue
                found.extend(name for name, _ in part.module.named_parameters())
            return found
        def main(model):
            fully_shard(model)
            return names([model])
    """,
    "fsdp024-guard-clause-on-another-object": """
        from torch.distributed.fsdp import fully_shard
        try:
            from megatron_fsdp import MegatronFSDP
        except ImportError:
            MegatronFSDP = None
        def restore(model, reference, snapshot):
            if snapshot is None or not isinstance(reference, MegatronFSDP):
                return
            for name, p in model.module.named_parameters():  # expect: FSDP024
                p.__dict__.update(snapshot[name])
        def main(model, reference, snapshot):
            fully_shard(model)
            restore(model, reference, snapshot)
    """,
    "fsdp024-good-caller-tells-the-wrapper-apart": """
        from torch.distributed.fsdp import fully_shard
        from megatron_fsdp import MegatronFSDP
        def inner_names(model):
            return [name for name, _ in model.module.named_parameters()]
        def main(model, megatron):
            model = MegatronFSDP(model) if megatron else fully_shard(model)
            if isinstance(model, MegatronFSDP):
                return inner_names(model)
            return [name for name, _ in model.named_parameters()]
    """,
    # A class tested against a collection of wrapper classes: an FSDP2 module's class is none of them.
    "fsdp024-good-type-in-a-dict-keyed-by-wrapper-classes": _unwrap_by_class(
        '{DDP: "module", FullyShardedDataParallel: "module"}', "if type(model) in WRAPPERS:"
    ),
    "fsdp024-good-type-in-the-keys-of-a-dict-of-wrapper-classes": _unwrap_by_class(
        '{DDP: "module", FullyShardedDataParallel: "module"}', "if type(model) in WRAPPERS.keys():", "model.module"
    ),
    "fsdp024-good-isinstance-of-a-tuple-of-a-dict-s-keys": _unwrap_by_class(
        '{DDP: "module", FullyShardedDataParallel: "module"}', "if isinstance(model, tuple(WRAPPERS)):", "model.module"
    ),
    "fsdp024-good-class-in-a-set-of-wrapper-classes": _unwrap_by_class(
        "{DDP, FullyShardedDataParallel}", "if model.__class__ in WRAPPERS:", "model.module"
    ),
    "fsdp024-good-type-in-a-tuple-of-wrapper-classes": _unwrap_by_class(
        "(DDP, FullyShardedDataParallel)", "if type(model) in WRAPPERS:", "model.module"
    ),
    "fsdp024-good-type-is-a-wrapper-class": _unwrap_by_class("None", "if type(model) is DDP:", "model.module"),
    "fsdp024-type-not-in-a-dict-of-wrapper-classes": _unwrap_by_class(
        '{DDP: "module", FullyShardedDataParallel: "module"}',
        "if type(model) not in WRAPPERS:",
        "model.module",
        "  # expect: FSDP024",
    ),
    "fsdp024-type-in-a-dict-keyed-by-other-classes": _unwrap_by_class(
        '{nn.Linear: "weight", nn.Embedding: "module"}',
        "if type(model) in WRAPPERS:",
        "model.module",
        "  # expect: FSDP024",
    ),
    "fsdp024-good-either-type-is-a-wrapper-class": _unwrap_by_class(
        "None", "if type(model) is DDP or type(model) is FullyShardedDataParallel:", "model.module"
    ),
    "fsdp024-good-either-isinstance-of-a-wrapper-class": _unwrap_by_class(
        "None", "if isinstance(model, DDP) or isinstance(model, FullyShardedDataParallel):", "model.module"
    ),
    "fsdp024-good-not-neither-wrapper-class": _unwrap_by_class(
        "None", "if not (type(model) is not DDP and type(model) is not FullyShardedDataParallel):", "model.module"
    ),
    "fsdp024-a-wrapper-type-test-or-a-flag": _unwrap_by_class(
        "True", "if type(model) is DDP or WRAPPERS:", "model.module", "  # expect: FSDP024"
    ),
}
