"""Style cases for FSDP013: code written in styles the fixtures do not use."""


def _speech_model(*methods: str) -> str:
    """A model class whose `configure_model` shards `self.perception`, with other methods that build
    it (`setup_encoder` builds a new module and loads into it) or load into it."""
    body = "\n            ".join(methods)
    return f"""
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Perception(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
        def setup_encoder(model, asr):
            model.perception = Perception()
            model.perception.load_state_dict(asr.state_dict(), strict=False)
        class SpeechModel(nn.Module):
            {body}
            def configure_model(self, mesh):
                self.perception = fully_shard(self.perception, mesh=mesh)
    """


# A sharded model, its mesh, and a checkpoint read whole from one file.
_LOADED_CHECKPOINT = """
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import distribute_tensor
        fully_shard(model)
        mesh = init_device_mesh("cuda", (torch.distributed.get_world_size(),))
        checkpoint = torch.load("model.pt", map_location="cpu")
"""

CASES = {
    "fsdp013-generic-restore-helper-reported-at-the-call-that-hands-it-the-file": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def restore(model, state):
            model.load_state_dict(state)
        def main(model, path):
            fully_shard(model)
            state = torch.load(path, map_location="cpu")
            restore(model, state)  # expect: FSDP013
    """,
    "fsdp013-loading-helper-wrong-on-its-own-reported-inside": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def load_pretrained(self, path):
                self.model.load_state_dict(torch.load(path))  # expect: FSDP013
            def setup(self):
                fully_shard(self.model)
                self.load_pretrained("init.pt")
    """,
    "fsdp013-good-generic-restore-helper-given-a-sharded-state-dict": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def restore(model, state):
            model.load_state_dict(state)
        def main(model):
            fully_shard(model)
            state = model.state_dict()
            restore(model, state)
    """,
    "fsdp013-good-plain-load-only-where-no-parameter-is-a-dtensor": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        def load_full(parts, state):
            for part in parts:
                if any(isinstance(p, DTensor) for p in part.parameters()):
                    set_model_state_dict(part, state, options=StateDictOptions(full_state_dict=True))
                else:
                    part.load_state_dict(state, strict=False)
        def load_unless_sharded(model, state):
            if not any(hasattr(param, "full_tensor") for _, param in model.named_parameters()):
                model.load_state_dict(state)
        class Trainer:
            def restore(self, path):
                state = torch.load(path, map_location="cpu")
                if all(not isinstance(p, DTensor) for p in self.model.parameters()):
                    self.model.load_state_dict(state)
            def setup(self, path):
                fully_shard(self.model)
                state = torch.load(path, map_location="cpu")
                load_full([self.model], state)
                load_unless_sharded(self.model, state)
                self.restore(path)
    """,
    "fsdp013-plain-load-where-a-parameter-test-proves-nothing": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        def main(model, other, path):
            fully_shard(model)
            state = torch.load(path, map_location="cpu")
            if all(isinstance(p, DTensor) for p in model.parameters()):
                pass
            else:
                model.load_state_dict(state)  # expect: FSDP013
            if not any(isinstance(p, DTensor) for p in other.parameters()):
                model.load_state_dict(state)  # expect: FSDP013
    """,
    "fsdp013-good-built-and-loaded-in-init-sharded-by-another-method": _speech_model(
        "def __init__(self, asr):",
        "    super().__init__()",
        "    self.perception = Perception()",
        "    self.perception.load_state_dict(asr.state_dict())",
    ),
    "fsdp013-good-helper-rebuilds-the-module-it-loads": _speech_model(
        "def __init__(self, asr):",
        "    super().__init__()",
        "    setup_encoder(self, asr)",
        "def reload_encoder(self, asr):",
        "    setup_encoder(self, asr)",
    ),
    "fsdp013-method-loads-into-the-module-another-method-shards": _speech_model(
        "def __init__(self, asr):",
        "    super().__init__()",
        "    setup_encoder(self, asr)",
        "def reload_encoder(self, asr):",
        "    self.perception.load_state_dict(asr.state_dict())  # expect: FSDP013",
    ),
    "fsdp013-good-loaded-tensors-distributed-before-the-load": f"""{_LOADED_CHECKPOINT}\
        checkpoint = {{
            key: distribute_tensor(tensor, mesh, src_data_rank=None) if "rope" not in key else tensor
            for key, tensor in checkpoint.items()
        }}
        model.load_state_dict(checkpoint, strict=False)
    """,
    "fsdp013-good-loaded-tensors-distributed-in-a-loop": f"""{_LOADED_CHECKPOINT}\
        sharded = {{}}
        for key, tensor in checkpoint.items():
            sharded[key] = distribute_tensor(tensor, mesh)
        model.load_state_dict(sharded)
    """,
    "fsdp013-another-tensor-distributed-the-loaded-state-left-plain": f"""{_LOADED_CHECKPOINT}\
        bias = distribute_tensor(torch.zeros(4), mesh)
        model.load_state_dict(checkpoint)  # expect: FSDP013
    """,
}
