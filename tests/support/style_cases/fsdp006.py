"""Style cases for FSDP006: code written in styles the fixtures do not use."""

# A model on meta whose base class, from a package the analysis does not read, loads weights.
_INHERITED_LOADER = """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from xtuner_like.model import HFModelBase
        class Model(HFModelBase):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
        with torch.device("meta"):
            model = Model()
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
"""


def _meta_subclass_of_a_base(built: str, mark: str = "") -> str:
    """A base model whose class method builds `cls()`, a subclass that adds a layer on meta, and
    the model `built` (by the class method, looked up on one class or the other), then trained."""
    return f"""
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(16, 16)
            @classmethod
            def create(cls):
                return cls()
        class MetaModel(Base):
            def __init__(self):
                super().__init__()
                with torch.device("meta"):
                    self.head = nn.Linear(16, 16){mark}
        model = {built}
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """


CASES = {
    "fsdp006-device-kwarg-never-materialised": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def main():
            model = nn.Sequential(nn.Linear(8, 8, device="meta"), nn.Linear(8, 8, device="meta"))  # expect: FSDP006
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
            model(x).sum().backward()
    """,
    "fsdp006-init-empty-weights": """
        from accelerate import init_empty_weights
        from torch.distributed.fsdp import fully_shard
        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config)  # expect: FSDP006
        fully_shard(model)
        model(x)
    """,
    "fsdp006-to-empty-in-trainer-without-init": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self):
                with torch.device("meta"):
                    self.model = Net()
                fully_shard(self.model)
                self.model.to_empty(device="cpu")  # expect: FSDP006
    """,
    "fsdp006-good-full-state-dict-loaded-into-meta": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        full = torch.load("pretrained.pt", mmap=True, weights_only=True)
        set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True))
        model(x).sum().backward()
    """,
    "fsdp006-sharded-state-dict-does-not-materialise": """
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()  # expect: FSDP006
        fully_shard(model)
        set_model_state_dict(model, sharded, options=StateDictOptions(full_state_dict=False))
        model(x).sum().backward()
    """,
    "fsdp006-good-parameters-initialised-in-place": """
        import torch
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()
        fully_shard(model)
        model.to_empty(device="cuda")
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.02)
    """,
    "fsdp006-other-model-initialised": """
        import torch
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()
        fully_shard(model)
        model.to_empty(device="cuda")  # expect: FSDP006
        with torch.no_grad():
            for p in head.parameters():
                p.normal_(0.0, 0.02)
    """,
    "fsdp006-good-init-in-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def initialise(model):
            for module in model.modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
        with torch.device("meta"):
            model = Net()
        fully_shard(model)
        model.to_empty(device="cpu")
        initialise(model)
    """,
    "fsdp006-good-dcp-load": """
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()
        fully_shard(model)
        model.to_empty(device="cuda")
        state = {"model": model.state_dict()}
        dcp.load(state, checkpoint_id=path)
    """,
    "fsdp006-good-apply": """
        import torch
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Net()
        fully_shard(model)
        model.to_empty(device="cuda")
        model.apply(init_weights)
    """,
    "fsdp006-default-device-meta": """
        import torch
        from torch.distributed.fsdp import fully_shard
        torch.set_default_device("meta")
        model = Transformer(cfg)  # expect: FSDP006
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        torch.set_default_device("cpu")
        model(torch.ones(2, 2)).sum().backward()
    """,
    "fsdp006-good-default-device-meta-then-materialised": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def build(cfg):
            torch.set_default_device("meta")
            model = Transformer(cfg)
            torch.set_default_device("cuda")
            fully_shard(model)
            model.to_empty(device="cuda")
            model.init_weights()
            return model
    """,
    "fsdp006-good-default-device-cuda": """
        import torch
        from torch.distributed.fsdp import fully_shard
        torch.set_default_device("cuda")
        model = Transformer(cfg)
        fully_shard(model)
        model(torch.ones(2, 2)).sum().backward()
    """,
    "fsdp006-good-to-empty-in-a-method-of-the-model": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        class BaseModel(nn.Module):
            def _to_empty_meta(self):
                for module in self.modules():
                    if any(p.is_meta for p in module.parameters(recurse=False)):
                        module.to_empty(device=torch.device("cuda"), recurse=False)
            def fully_shard(self):
                for layer in self.layers:
                    fully_shard(layer)
                fully_shard(self)
                self._to_empty_meta()
                return self
    """,
    "fsdp006-good-to-empty-of-an-argument": """
        from torch.distributed.fsdp import fully_shard
        def materialise(model, device):
            fully_shard(model)
            model.to_empty(device=device)
            return model
    """,
    "fsdp006-good-lightning-materialises-meta-models": """
        import torch
        import lightning as L
        from torch.distributed.fsdp import fully_shard
        class LitModel(L.LightningModule):
            def __init__(self):
                super().__init__()
                with torch.device("meta"):
                    self.model = Transformer()
            def configure_model(self):
                for block in self.model.blocks:
                    fully_shard(block)
                fully_shard(self.model)
            def training_step(self, batch):
                return self.model(batch).sum()
    """,
    "fsdp006-plain-module-class-is-not-a-framework": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                with torch.device("meta"):
                    self.model = Transformer()  # expect: FSDP006
            def shard(self):
                fully_shard(self.model)
            def forward(self, x):
                return self.model(x)
    """,
    "fsdp006-good-meta-skeleton-saved-with-a-gathered-state-dict": """
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import fully_shard
        def save_hf(model, hf_path):
            state_dict = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
            if dist.get_rank() == 0:
                with torch.device("meta"):
                    save_model = AutoModelForCausalLM.from_config(model.config)
                save_model.to_empty(device="cpu")
                save_model.save_pretrained(hf_path, state_dict=state_dict)
        def build(model):
            fully_shard(model)
    """,
    "fsdp006-default-device-set-by-a-generator-context-manager": """
        from contextlib import contextmanager
        import torch
        from torch.distributed.fsdp import fully_shard
        @contextmanager
        def init_device(device):
            torch.set_default_device(device)
            yield
            torch.set_default_device("cpu")
        with init_device("meta"):
            model = Transformer()  # expect: FSDP006
        fully_shard(model)
        model(tokens).sum().backward()
    """,
    "fsdp006-default-device-set-by-a-class-context-manager-in-a-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class DefaultDevice:
            def __init__(self, device):
                self.device = device
            def __enter__(self):
                self.previous = torch.get_default_device()
                torch.set_default_device(self.device)
                return self
            def __exit__(self, *exc):
                torch.set_default_device(self.previous)
        class Trainer:
            def __init__(self, init_device="meta"):
                with DefaultDevice(torch.device(init_device)):
                    self.model = Transformer()  # expect: FSDP006
                fully_shard(self.model)
            def step(self, tokens):
                self.model(tokens).sum().backward()
        Trainer().step(tokens)
    """,
    "fsdp006-default-device-set-by-a-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def use_meta_device():
            torch.set_default_device("meta")
        def main():
            use_meta_device()
            model = Transformer()  # expect: FSDP006
            fully_shard(model)
            model(tokens).sum().backward()
        main()
    """,
    "fsdp006-good-default-device-context-manager-on-the-gpu": """
        from contextlib import contextmanager
        import torch
        from torch.distributed.fsdp import fully_shard
        @contextmanager
        def init_device(device):
            previous = torch.get_default_device()
            torch.set_default_device(device)
            try:
                yield
            finally:
                torch.set_default_device(previous)
        with init_device("cuda"):
            model = Transformer()
        fully_shard(model)
        with init_device("meta"):
            pass
        other = Transformer()  # after the `with`: back on the previous device
        fully_shard(other)
    """,
    "fsdp006-good-default-device-context-manager-then-materialised": """
        from contextlib import contextmanager
        import torch
        from torch.distributed.fsdp import fully_shard
        @contextmanager
        def init_device(device):
            torch.set_default_device(device)
            yield
            torch.set_default_device("cpu")
        with init_device("meta"):
            model = Transformer()
        fully_shard(model)
        model.to_empty(device="cuda")
        model.init_weights()
    """,
    "fsdp006-default-device-set-on-one-path": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(args):
            if args.meta_init:
                torch.set_default_device("meta")
            model = Transformer()  # expect: FSDP006
            fully_shard(model)
            model(tokens).sum().backward()
    """,
    "fsdp006-good-default-device-set-on-one-path-and-materialised-on-it": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(args):
            if args.meta_init:
                torch.set_default_device("meta")
            model = Transformer()
            fully_shard(model)
            if args.meta_init:
                model.to_empty(device="cuda")
                model.reset_parameters()
            model(tokens).sum().backward()
    """,
    "fsdp006-meta-helper-reported-at-its-construction": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def build():
            with torch.device("meta"):
                return Transformer(args)  # expect: FSDP006
        def main():
            model = build()
            fully_shard(model)
            model(tokens).sum().backward()
    """,
    "fsdp006-meta-method-reported-at-its-construction": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def build_model(self):
                with torch.device("meta"):
                    model = Transformer(self.args)  # expect: FSDP006
                return model
            def setup(self):
                self.model = self.build_model()
                fully_shard(self.model)
            def train(self, batch):
                self.setup()
                self.model(batch).sum().backward()
    """,
    "fsdp006-to-empty-helper-never-called": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def materialise(module):
            module.to_empty(device="cuda")
            module.init_weights()
        def main():
            with torch.device("meta"):
                model = Transformer(args)  # expect: FSDP006
            fully_shard(model)
            model(tokens).sum().backward()
    """,
    "fsdp006-to-empty-helper-called-for-another-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def materialise(module):
            module.to_empty(device="cuda")
            module.init_weights()
        def main():
            with torch.device("meta"):
                teacher = Transformer(args)
                student = Transformer(args)  # expect: FSDP006
            fully_shard(teacher)
            fully_shard(student)
            materialise(teacher)
            loss = student(tokens).sum() + teacher(tokens).sum()
    """,
    "fsdp006-to-empty-of-another-attribute-in-a-sibling-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self):
                with torch.device("meta"):
                    self.model = Transformer()  # expect: FSDP006
                    self.reference = Transformer()
                fully_shard(self.model)
                fully_shard(self.reference)
            def materialise(self):
                self.reference.to_empty(device="cuda")
                self.reference.init_weights()
            def step(self, batch):
                self.model(batch).sum().backward()
    """,
    "fsdp006-good-to-empty-helper-called-with-the-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def materialise(module):
            module.to_empty(device="cuda")
            module.init_weights()
        def main():
            with torch.device("meta"):
                model = Transformer(args)
            fully_shard(model)
            materialise(model)
            model(tokens).sum().backward()
    """,
    "fsdp006-good-to-empty-through-an-alias": """
        import torch
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Transformer(args)
        fully_shard(model)
        sharded = model
        sharded.to_empty(device="cuda")
        model.init_weights()
        model(tokens).sum().backward()
    """,
    "fsdp006-good-to-empty-in-a-trainer-method-run-before-forward": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self):
                with torch.device("meta"):
                    self.model = Transformer()
                fully_shard(self.model)
            def materialise(self):
                self.model.to_empty(device="cuda")
                self.model.init_weights()
            def train(self, batch):
                self.materialise()
                self.model(batch).sum().backward()
    """,
    "fsdp006-good-to-empty-in-a-sibling-method-nothing-calls": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self):
                with torch.device("meta"):
                    self.model = Transformer()
                fully_shard(self.model)
            def materialise(self):
                self.model.to_empty(device="cuda")
                self.model.init_weights()
            def step(self, batch):
                self.model(batch).sum().backward()
    """,
    "fsdp006-good-to-empty-of-a-helper-built-model-in-the-caller": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def build():
            with torch.device("meta"):
                return Transformer(args)
        def main():
            model = build()
            fully_shard(model)
            model.to_empty(device="cuda")
            model.init_weights()
            model(tokens).sum().backward()
    """,
    "fsdp006-forward-before-to-empty-reported-at-the-forward": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def build():
            with torch.device("meta"):
                model = Transformer(args)
            fully_shard(model)
            return model
        def main():
            model = build()
            warmup = model(tokens)  # expect: FSDP006
            model.to_empty(device="cuda")
            model.init_weights()
    """,
    "fsdp006-forward-helper-before-to-empty-reported-at-its-call": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def evaluate(model):
            with torch.no_grad():
                return model(tokens).mean()
        def materialise(model):
            model.to_empty(device="cuda")
            model.init_weights()
        def main():
            with torch.device("meta"):
                model = Transformer(args)
            fully_shard(model)
            baseline = evaluate(model)  # expect: FSDP006
            materialise(model)
    """,
    "fsdp006-good-forward-after-to-empty-in-helpers": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def evaluate(model):
            with torch.no_grad():
                return model(tokens).mean()
        def materialise(model):
            model.to_empty(device="cuda")
            model.init_weights()
        def main():
            with torch.device("meta"):
                model = Transformer(args)
            fully_shard(model)
            materialise(model)
            baseline = evaluate(model)
    """,
    "fsdp006-good-meta-forward-before-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = Transformer(args)
            shapes = model(torch.empty(2, 8, dtype=torch.long))
        fully_shard(model)
        model.to_empty(device="cuda")
        model.init_weights()
    """,
    "fsdp006-another-test-s-to-empty-does-not-materialise-this-model": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class TestMetaInit(FSDPTest):
            def test_meta_device_init(self):
                with torch.device("meta"):
                    model = nn.Sequential(MLP(8), MLP(8))
                fully_shard(model)
                model.to_empty(device="cuda")
                for module in model.modules():
                    if hasattr(module, "reset_parameters"):
                        module.reset_parameters()
                model(torch.randn(4, 8))
            def test_invalid_meta_device_init(self):
                with torch.device("meta"):
                    model = nn.Sequential(MLP(8), MLP(8))  # expect: FSDP006
                    fully_shard(model[0])
                    fully_shard(model)
                with self.assertRaisesRegex(RuntimeError, "should be materialized"):
                    model(torch.randn(4, 8))
    """,
    "fsdp006-good-meta-layer-takes-real-parameters": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class QuantLinear(nn.Linear):
            @classmethod
            def from_float(cls, mod):
                with torch.device("meta"):
                    new_mod = cls(mod.in_features, mod.out_features, bias=mod.bias is not None)
                new_mod.weight = mod.weight
                new_mod.bias = mod.bias
                return new_mod
        model = QuantLinear.from_float(nn.Linear(16, 16))
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-good-meta-layer-takes-a-new-parameter": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def build(weight):
            layer = nn.Linear(16, 16, bias=False, device="meta")
            layer.weight = nn.Parameter(weight)
            return layer
        model = build(torch.randn(16, 16))
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-meta-layer-given-a-meta-parameter": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class QuantLinear(nn.Linear):
            @classmethod
            def from_float(cls, mod):
                with torch.device("meta"):
                    new_mod = cls(mod.in_features, mod.out_features, bias=False)  # expect: FSDP006
                    template = nn.Linear(16, 16)
                new_mod.weight = template.weight
                return new_mod
        model = QuantLinear.from_float(nn.Linear(16, 16))
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-meta-subclass-built-by-an-inherited-classmethod": _meta_subclass_of_a_base(
        "MetaModel.create()", mark="  # expect: FSDP006"
    ),
    "fsdp006-meta-subclass-built-through-cls-of-an-inherited-classmethod": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Base(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.proj = nn.Linear(width, width)
            @classmethod
            def create(cls, width):
                return cls(width)
            @classmethod
            def from_config(cls, config):
                return cls.create(config["width"])
        class MetaModel(Base):
            def __init__(self, width):
                super().__init__(width)
                with torch.device("meta"):
                    self.head = nn.Linear(width, width)  # expect: FSDP006
        model = MetaModel.from_config({"width": 16})
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-good-base-built-by-its-classmethod-beside-a-meta-subclass": _meta_subclass_of_a_base("Base.create()"),
    "fsdp006-good-parameters-handed-to-a-checkpoint-reader": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from weights import CheckpointReader
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
            def shard(self):
                for layer in self.layers:
                    fully_shard(layer)
                fully_shard(self)
                self.to_empty(device="cuda")
                return self
            def from_hf(self, path):
                reader = CheckpointReader(path)
                for name, param in self.named_parameters():
                    reader.read_into(name, param)
        with torch.device("meta"):
            model = Model()
        model.shard()
        model.from_hf("/ckpt")
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-good-loaded-by-an-inherited-from-hf": f"""{_INHERITED_LOADER}\
        model.to_empty(device="cuda")
        model.from_hf("/ckpt")
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp006-materialised-then-saved-not-loaded": f"""{_INHERITED_LOADER}\
        model.to_empty(device="cuda")  # expect: FSDP006
        model.save_hf("/ckpt")
        optimizer = torch.optim.AdamW(model.parameters())
    """,
}
