"""Style cases for FSDP004: code written in styles the fixtures do not use."""


def _trainer_state(test: str, built: str = "Trainer(Net())", mark: str = "") -> str:
    """A trainer whose state takes its FSDP config from a constructor argument, sharding under ``test``."""
    return f"""
        import torch
        from torch.distributed.fsdp import fully_shard
        class State:
            def __init__(self, model, parallelism=None):
                self.model = model
                self._fsdp = parallelism.fsdp if parallelism is not None else None
                self._fsdp2 = parallelism.fsdp2 if parallelism is not None else None
            @property
            def fsdp_config(self):
                return self._fsdp2 if self._fsdp2 is not None else self._fsdp
            def apply_fsdp(self):
                fully_shard(self.model)
        class Trainer:
            def __init__(self, model, parallelism=None):
                self.state = State(model, parallelism=parallelism)
                {test}
                    self.state.apply_fsdp()
        trainer = {built}
        torch.save(trainer.state.model.state_dict(), "model.pt"){mark}
    """


def _monolith_load(built: str, mark: str = "") -> str:
    """A trainer that shards after a monolith load, under `and` with a test the analysis cannot decide."""
    return f"""
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        class State:
            def __init__(self, model, parallelism=None):
                self.model = model
                self.fsdp = parallelism.fsdp if parallelism is not None else None
            @property
            def monolith_rank0_only(self):
                return self.fsdp is not None and self.fsdp.monolith
            @property
            def sharded(self):
                return any(isinstance(m, FSDPModule) for m in self.model.modules())
        class Trainer:
            def __init__(self, model, parallelism=None):
                self.state = State(model, parallelism=parallelism)
            def after_load(self):
                if not self.state.sharded and self.state.monolith_rank0_only:
                    fully_shard(self.state.model)
        trainer = {built}
        trainer.after_load()
        torch.save(trainer.state.model.state_dict(), "model.pt"){mark}
    """


# The state dict of a sharded model.
_SHARDED_STATE = """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        fully_shard(model)
        state = model.state_dict()
"""

CASES = {
    "fsdp004-dict-built-up": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        checkpoint = {"step": step}
        checkpoint["model"] = model.state_dict()
        torch.save(checkpoint, path)  # expect: FSDP004
    """,
    "fsdp004-sharded-get-model-state-dict": """
        import torch
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        torch.save(get_model_state_dict(model), "model.pt")  # expect: FSDP004
    """,
    "fsdp004-get-state-dict-tuple": """
        import torch
        from torch.distributed.checkpoint.state_dict import get_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        model_state, optim_state = get_state_dict(model, optimizer)
        torch.save({"model": model_state, "optim": optim_state}, "ckpt.pt")  # expect: FSDP004
    """,
    "fsdp004-helper-save-checkpoint": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def save_checkpoint(model, optimizer, path):
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)  # expect: FSDP004
        def main():
            model = Net()
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            save_checkpoint(model, optimizer, "ckpt.pt")
    """,
    "fsdp004-trainer-method-sharded-elsewhere": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def setup(self):
                fully_shard(self.model)
            def save(self, path):
                torch.save(self.model.state_dict(), path)  # expect: FSDP004
    """,
    "fsdp004-cpu-copy-comprehension": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        cpu_state = {k: v.cpu() for k, v in model.state_dict().items()}
        if rank == 0:
            torch.save(cpu_state, "final.pt")  # expect: FSDP004
    """,
    "fsdp004-filtered-values-copied-in-loop": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        adapter = {}
        for name, tensor in model.state_dict().items():
            if "lora" in name:
                adapter[name] = tensor.detach().clone()
        torch.save(adapter, "adapter.pt")  # expect: FSDP004
    """,
    "fsdp004-good-full-tensor-then-cpu": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        full = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
        if rank == 0:
            torch.save(full, "model.pt")
    """,
    "fsdp004-dataclass-sharded-in-post-init": """
        from dataclasses import dataclass
        import torch
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class Trainer:
            model: object
            def __post_init__(self):
                fully_shard(self.model)
            def save(self, path):
                torch.save(self.model.state_dict(), path)  # expect: FSDP004
    """,
    "fsdp004-good-options-variable": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(model, options=options)
        if rank == 0:
            torch.save(state, "model.pt")
    """,
    "fsdp004-good-full-tensor-comprehension": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        state = {name: tensor.full_tensor() for name, tensor in model.state_dict().items()}
        if rank == 0:
            torch.save(state, "model.pt")
    """,
    "fsdp004-good-per-rank-path-join": """
        import os
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        rank = dist.get_rank()
        torch.save(model.state_dict(), os.path.join(out_dir, f"model_rank{rank}.pt"))
    """,
    "fsdp004-good-state-dict-before-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        initial = model.state_dict()
        torch.save(initial, "init.pt")
        fully_shard(model)
    """,
    "fsdp004-good-dcp": """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        dcp.save({"model": model.state_dict()}, checkpoint_id="ckpt")
    """,
    "fsdp004-good-plain-save-when-the-model-is-not-fsdp2": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        def save(model, path):
            if not isinstance(model, FSDPModule):
                torch.save(model.state_dict(), path)
        model = Net()
        fully_shard(model)
        save(model, "model.pt")
    """,
    # --- second red team: type-tested state-dict tensors, properties, getattr, class attributes,
    # optimizers set by other methods, framework-owned meta models, the root's own parameters
    "fsdp004-good-full-tensor-if-dtensor": """
        import torch
        from torch.distributed.tensor import DTensor
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        full = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}
        if rank == 0:
            torch.save(full, "model.pt")
    """,
    "fsdp004-good-full-tensor-if-hasattr": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        state = {}
        for k, v in model.state_dict().items():
            state[k] = v.full_tensor().cpu() if hasattr(v, "full_tensor") else v.cpu()
        torch.save(state, "model.pt")
    """,
    "fsdp004-good-gathered-in-helper-loop": """
        import torch
        from torch.distributed.tensor import DTensor
        from torch.distributed.fsdp import fully_shard
        def gather_full_state(model):
            full = {}
            for name, tensor in model.state_dict().items():
                if not isinstance(tensor, DTensor):
                    full[name] = tensor
                    continue
                tensor = tensor.full_tensor()
                full[name] = tensor.cpu()
            return full
        def main():
            model = Net()
            fully_shard(model)
            state = gather_full_state(model)
            if dist.get_rank() == 0:
                torch.save(state, "model.pt")
    """,
    "fsdp004-to-local-if-dtensor": """
        import torch
        from torch.distributed.tensor import DTensor
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        local = {}
        for name, value in model.state_dict().items():
            if isinstance(value, DTensor):
                value = value.to_local()
            local[name] = value
        torch.save(local, "model.pt")  # expect: FSDP004
    """,
    "fsdp004-model-behind-a-property": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model: torch.nn.Module) -> None:
                self._model = model
            @property
            def model(self) -> torch.nn.Module:
                return self._model
            @model.setter
            def model(self, value: torch.nn.Module) -> None:
                self._model = value
            def setup(self) -> None:
                fully_shard(self.model)
            def save(self, path: str) -> None:
                torch.save(self.model.state_dict(), path)  # expect: FSDP004
        trainer = Trainer(Net())
        trainer.setup()
        trainer.save("m.pt")
    """,
    "fsdp004-getattr-over-attribute-names": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class PPOTrainer:
            def __init__(self, actor, critic):
                self.actor, self.critic = actor, critic
                for name in ("actor", "critic"):
                    fully_shard(getattr(self, name))
            def save(self, out):
                for name in ("actor", "critic"):
                    torch.save(getattr(self, name).state_dict(), f"{out}/{name}.pt")  # expect: FSDP004
        PPOTrainer(Net(), Net()).save("ckpt")
    """,
    "fsdp004-model-in-a-class-attribute": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Registry:
            models: dict = {}
        def setup():
            model = Net()
            fully_shard(model)
            Registry.models["policy"] = model
        def save():
            torch.save(Registry.models["policy"].state_dict(), "policy.pt")  # expect: FSDP004
        setup()
        save()
    """,
    "fsdp004-optimizer-set-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def _build(self, path):
                module = AutoModelForCausalLM.from_pretrained(path)
                fully_shard(module)
                return module, torch.optim.AdamW(module.parameters(), lr=1e-5)
            def init_model(self):
                self.actor, self.actor_optimizer = self._build(self.config.path)
            def save_checkpoint(self, path):
                torch.save(self.actor_optimizer.state_dict(), path)  # expect: FSDP004
    """,
    "fsdp004-good-plain-optimizer-set-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def init_model(self):
                self.actor = Net()
                fully_shard(self.actor)
                self.critic_optimizer = torch.optim.AdamW(self.critic.parameters())
            def save_checkpoint(self, path):
                torch.save(self.critic_optimizer.state_dict(), path)
    """,
    "fsdp004-optimizer-in-a-dict-filled-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def __init__(self):
                self.models, self.optimizers = {}, {}
            def init_model(self):
                for role in ("actor", "critic"):
                    module = AutoModel.from_pretrained(self.config[role])
                    fully_shard(module)
                    self.models[role] = module
                    self.optimizers[role] = torch.optim.AdamW(module.parameters())
            def save(self, path):
                for name, optimizer in self.optimizers.items():
                    torch.save(optimizer.state_dict(), f"{path}/{name}.pt")  # expect: FSDP004
    """,
    "fsdp004-save-behind-a-defaulted-parameter-still-runs-for-other-callers": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(model, path=None, *, final=False):
            fully_shard(model)
            if path is not None:
                torch.save(model.state_dict(), path)  # expect: FSDP004
            if final:
                torch.save(model.state_dict(), "final.pt")  # expect: FSDP004
        if __name__ == "__main__":
            main(Net())
    """,
    "fsdp004-generic-save-helper-reported-at-the-call-that-hands-it-the-state-dict": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import fully_shard
        def write(obj, path):
            torch.save(obj, path)
        def main(model, head):
            fully_shard(model)
            write(model.state_dict(), "model.pt")  # expect: FSDP004
            full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
            write(full, "full.pt")
            write(head.state_dict(), "head.pt")
    """,
    "fsdp004-generic-save-method-reported-at-the-call": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Checkpointer:
            def __init__(self, model):
                fully_shard(model)
                self.model = model
            def _write(self, obj, name):
                torch.save(obj, f"{self.root}/{name}.pt")
            def save(self):
                state = self.model.state_dict()
                self._write(state, "model")  # expect: FSDP004
    """,
    "fsdp004-state-dict-helper-and-generic-save-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def collect(model):
            return {"model": model.state_dict(), "step": 10}
        def write(obj, path):
            torch.save(obj, path)
        def main(model):
            fully_shard(model)
            state = collect(model)
            write(state, "ckpt.pt")  # expect: FSDP004
    """,
    "fsdp004-state-dict-kept-on-the-instance-saved-by-a-method-reported-inside": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Checkpointer:
            def snapshot(self, model):
                fully_shard(model)
                self.state = model.state_dict()
            def save(self, path):
                torch.save(self.state, path)  # expect: FSDP004
        def main(model):
            checkpointer = Checkpointer()
            checkpointer.snapshot(model)
            checkpointer.save("ckpt.pt")
    """,
    # A trainer that shards only when its state holds an FSDP config, which the state's constructor
    # takes from an argument left to its default None (composer's ``Trainer`` without a
    # ``parallelism_config``): nothing is sharded, in every spelling of the test; given one, it is.
    "fsdp004-good-trainer-without-parallelism-config": _trainer_state("if self.state.fsdp_config is not None:"),
    "fsdp004-good-trainer-without-parallelism-config-truth-test": _trainer_state("if self.state.fsdp_config:"),
    "fsdp004-good-trainer-without-parallelism-config-attribute": _trainer_state(
        "if self.state._fsdp is not None or self.state._fsdp2:"
    ),
    "fsdp004-good-trainer-without-parallelism-config-getattr": _trainer_state(
        'if getattr(self.state, "fsdp_config") is not None:'
    ),
    "fsdp004-trainer-given-a-parallelism-config": _trainer_state(
        "if self.state.fsdp_config is not None:", "Trainer(Net(), parallelism=config)", "  # expect: FSDP004"
    ),
    # Sharding after a monolith load, under `and` with a test the analysis cannot decide: without a
    # config the monolith property is False, so the `and` is (composer's `Trainer.fit`).
    "fsdp004-good-and-with-a-false-setting": _monolith_load("Trainer(Net())"),
    "fsdp004-and-with-a-setting-given": _monolith_load("Trainer(Net(), parallelism=config)", "  # expect: FSDP004"),
    "fsdp004-good-items-gathered-back-in-place": f"""{_SHARDED_STATE}\
        for key, tensor in list(state.items()):
            if isinstance(tensor, DTensor):
                state[key] = tensor.full_tensor()
        if torch.distributed.get_rank() == 0:
            torch.save({{"teacher": state}}, "teacher.pth")
    """,
    "fsdp004-good-each-key-gathered-back-in-place": f"""{_SHARDED_STATE}\
        for key in list(state.keys()):
            state[key] = state[key].full_tensor()
        torch.save(state, "model.pt")
    """,
    "fsdp004-items-stored-back-as-local-shards": f"""{_SHARDED_STATE}\
        for key, tensor in list(state.items()):
            state[key] = tensor.to_local()
        torch.save(state, "model.pt")  # expect: FSDP004
    """,
}
