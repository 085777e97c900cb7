"""Style cases for FSDP034: code written in styles the fixtures do not use."""

CASES = {
    "fsdp034-root-only-main": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        def main():
            model = AutoModelForCausalLM.from_pretrained(name)
            model = fully_shard(model)  # expect: FSDP034
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-helper-shards-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard(module):
            fully_shard(module)
        for block in model.layers:
            shard(block)
        shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-recursive-bottom-up": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_recursively(module):
            for child in module.children():
                if sum(p.numel() for p in child.parameters()) > 1_000_000:
                    shard_recursively(child)
            fully_shard(module)
        model = Net()
        shard_recursively(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-lambda-shards-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        shard = lambda m: fully_shard(m, mesh=mesh)
        model = Net()
        for block in model.layers:
            shard(block)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-map-over-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        list(map(fully_shard, model.layers))
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-blocks-sharded-by-imported-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib.parallel import apply_fsdp_to_blocks
        model = Net()
        apply_fsdp_to_blocks(model, mesh)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-root-only-after-tensor-parallel": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import parallelize_module
        from mylib import count_parameters
        model = Net()
        print(count_parameters(model))
        model = parallelize_module(model, tp_mesh, plan)
        fully_shard(model, mesh=dp_mesh)  # expect: FSDP034
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-block-shards-itself": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def apply_fsdp(self, mesh):
                fully_shard(self, mesh=mesh)
    """,
    # --- module.apply(fn) and arms a constant decides ---------------------------------------------
    "fsdp034-good-blocks-sharded-through-apply-with-a-lambda": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(model):
            model.apply(lambda m: fully_shard(m) if isinstance(m, TransformerBlock) else None)
            fully_shard(model)
            return torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-a-leaf-converted-by-a-function": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torchao.float8 import convert_to_float8_training
        def test_single_module_parity():
            module = convert_to_float8_training(torch.nn.Linear(16, 16))
            fully_shard(module)
            optim = torch.optim.Adam(module.parameters(), lr=1e-2)
    """,
    "fsdp034-a-model-converted-by-a-function-keeps-its-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torchao.float8 import convert_to_float8_training
        def main():
            model = convert_to_float8_training(Transformer())
            fully_shard(model)  # expect: FSDP034
            optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    """,
    # --- per model: another model's per-block plan says nothing about this one ------------------
    "fsdp034-second-model-root-only-in-the-same-function": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(4, 4)
        class Transformer(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Block() for _ in range(4)])
        def two_models():
            a = Transformer()
            for b in a.layers:
                fully_shard(b)
            fully_shard(a)
            other = Transformer()
            fully_shard(other)  # expect: FSDP034
            return torch.optim.AdamW([*a.parameters(), *other.parameters()])
    """,
    "fsdp034-second-model-root-only-in-another-function": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        def train_policy(name):
            policy = AutoModelForCausalLM.from_pretrained(name)
            for block in policy.model.layers:
                fully_shard(block)
            fully_shard(policy)
            return torch.optim.AdamW(policy.parameters())
        def train_value(name):
            value = AutoModelForCausalLM.from_pretrained(name)
            fully_shard(value)  # expect: FSDP034
            return torch.optim.AdamW(value.parameters())
    """,
    "fsdp034-second-model-root-only-when-a-sharding-function-takes-its-model-as-a-parameter": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_transformer(model, mesh):
            for block in model.layers:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
        def train_critic(mesh):
            critic = Critic()
            fully_shard(critic, mesh=mesh)  # expect: FSDP034
            optimizer = torch.optim.AdamW(critic.parameters())
    """,
    "fsdp034-trainer-shards-the-teacher-per-block-and-the-student-at-its-root": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class DistillationTrainer:
            def __init__(self, student, teacher, mesh):
                for layer in teacher.layers:
                    fully_shard(layer, mesh=mesh)
                self.teacher = fully_shard(teacher, mesh=mesh)
                self.student = fully_shard(student, mesh=mesh)  # expect: FSDP034
                self.optimizer = torch.optim.AdamW(self.student.parameters())
    """,
    "fsdp034-function-given-a-student-and-a-teacher-shards-only-the-teacher-per-block": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup_distillation(student, teacher, mesh):
            for layer in teacher.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(teacher, mesh=mesh)
            fully_shard(student, mesh=mesh)  # expect: FSDP034
            return torch.optim.AdamW(student.parameters())
    """,
    "fsdp034-good-an-untrained-reference-model-sharded-at-its-root": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def setup(model, ref_model):
            for layer in model.layers:
                fully_shard(layer)
            fully_shard(model)
            fully_shard(ref_model)  # only forwards, no optimizer: left alone like any untrained model
            return torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-trainer-built-models-one-sharded-per-block": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, config):
                self.actor = build_actor(config)
                self.critic = build_critic(config)
                for block in self.actor.blocks:
                    fully_shard(block)
                fully_shard(self.actor)
                fully_shard(self.critic)  # expect: FSDP034
                params = [*self.actor.parameters(), *self.critic.parameters()]
                self.optimizer = torch.optim.AdamW(params)
    """,
    "fsdp034-helper-shards-the-blocks-of-one-model-only": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_blocks(model):
            for block in model.layers:
                fully_shard(block)
        def main():
            policy = Policy()
            shard_blocks(policy)
            fully_shard(policy)
            reward = RewardModel()
            fully_shard(reward)  # expect: FSDP034
            optimizer = torch.optim.AdamW([*policy.parameters(), *reward.parameters()])
    """,
    "fsdp034-module-level-second-model-root-only": """
        import torch
        from torch.distributed.fsdp import fully_shard
        generator = Generator()
        for block in generator.blocks:
            fully_shard(block)
        fully_shard(generator)
        discriminator = Discriminator()
        fully_shard(discriminator)  # expect: FSDP034
        opt_g = torch.optim.Adam(generator.parameters())
        opt_d = torch.optim.Adam(discriminator.parameters())
    """,
    "fsdp034-trainer-shards-its-models-in-separate-methods": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class PPOTrainer:
            def __init__(self, actor, critic):
                self.actor = actor
                self.critic = critic
            def shard_actor(self):
                for block in self.actor.layers:
                    fully_shard(block)
                fully_shard(self.actor)
            def shard_critic(self):
                fully_shard(self.critic)  # expect: FSDP034
                self.critic_optimizer = torch.optim.AdamW(self.critic.parameters())
    """,
    "fsdp034-one-root-only-helper-run-by-several-tests": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def _run(mesh, compile_model):
            model = MLP(device=mesh.device_type)
            if compile_model:
                model = torch.compile(model)
            model = fully_shard(model, mesh=mesh)  # expect: FSDP034
            optim = torch.optim.SGD(model.parameters(), lr=1e-2)
        def test_eager(mesh):
            _run(mesh, compile_model=False)
        def test_compiled(mesh):
            _run(mesh, compile_model=True)
    """,
    "fsdp034-good-both-models-per-block-one-through-a-helper": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_blocks(model):
            for block in model.layers:
                fully_shard(block)
            fully_shard(model)
        def main():
            policy = Policy()
            shard_blocks(policy)
            value = ValueModel()
            for block in value.layers:
                fully_shard(block)
            fully_shard(value)
            optimizer = torch.optim.AdamW([*policy.parameters(), *value.parameters()])
    """,
    "fsdp034-good-second-model-is-a-leaf": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main():
            model = Transformer()
            for block in model.layers:
                fully_shard(block)
            fully_shard(model)
            head = torch.nn.Linear(1024, 1)
            fully_shard(head)
            probe = torch.nn.Sequential(torch.nn.Linear(1024, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
            fully_shard(probe)
            optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters(), *probe.parameters()])
    """,
    "fsdp034-good-blocks-sharded-through-an-alias": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main():
            model = Transformer()
            blocks = model.layers
            for block in blocks:
                fully_shard(block)
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-blocks-read-as-attributes-of-a-model-built-by-a-helper": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Linear(8, 32)
                self.down = nn.Linear(32, 8)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.block0 = Block()
                self.block1 = Block()
        def build(device):
            return Model().to(device)
        def main(device):
            model = build(device)
            fully_shard(model.block0)
            fully_shard(model.block1)
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-blocks-reached-through-a-call-on-the-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib import get_decoder_layers
        def main():
            model = Transformer()
            for block in get_decoder_layers(model):
                fully_shard(block)
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-blocks-given-as-a-parameter-beside-the-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def apply_fsdp(model, blocks):
            for block in blocks:
                fully_shard(block)
            fully_shard(model)
            return torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-a-function-the-file-never-calls-may-shard-the-returned-model-s-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_blocks(model):
            for block in model.layers:
                fully_shard(block)
        def build():
            model = Transformer()
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            return model, optimizer
    """,
    "fsdp034-good-a-function-shards-the-blocks-of-the-module-level-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Transformer()
        def shard_blocks():
            for block in model.layers:
                fully_shard(block)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-a-per-layer-callback-other-code-runs-on-the-model-s-layers": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib import for_each_layer
        def shard_layer(layer):
            fully_shard(layer.mlp)
            fully_shard(layer)
        def main():
            model = Transformer()
            for_each_layer(model, shard_layer)
            fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-another-method-shards-the-same-attribute-s-blocks": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def shard_blocks(self):
                for block in self.model.layers:
                    fully_shard(block)
            def setup(self, model):
                self.model = model
                fully_shard(model)
                self.optimizer = torch.optim.AdamW(self.model.parameters())
    """,
    "fsdp034-good-blocks-of-a-model-the-wrapper-also-holds": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        from models import Draft
        class DraftLoss(nn.Module):
            def __init__(self, draft):
                super().__init__()
                self.draft = draft
            def forward(self, x):
                return self.draft(x).sum()
        class Recipe:
            def setup(self):
                self.draft = Draft(config).to(device)
                loss_module = DraftLoss(self.draft)
                for layer in loss_module.draft.layers:
                    fully_shard(layer)
                fully_shard(loss_module)
                self.loss_module = loss_module
                self.optimizer = torch.optim.AdamW(self.loss_module.parameters())
        Recipe().setup()
    """,
    "fsdp034-good-blocks-sharded-by-their-first-name": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from models import Backbone, Head, RunState
        def main():
            state = RunState()
            backbone = Backbone()
            state.backbone = backbone
            head = Head()
            setattr(head, "body", backbone)
            for block in backbone.blocks:
                fully_shard(block)
            model = fully_shard(head)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """,
    "fsdp034-blocks-of-a-model-the-wrapper-does-not-hold": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        from models import Draft
        class DraftLoss(nn.Module):
            def __init__(self, draft):
                super().__init__()
                self.draft = draft
        class Recipe:
            def setup(self):
                self.draft = Draft(config)
                self.teacher = Draft(config)
                loss_module = DraftLoss(self.draft)
                for layer in self.teacher.layers:
                    fully_shard(layer)
                fully_shard(self.teacher)
                fully_shard(loss_module)  # expect: FSDP034
                self.loss_module = loss_module
                self.optimizer = torch.optim.AdamW(self.loss_module.parameters())
        Recipe().setup()
    """,
    # --- models without blocks: leaves, and at most one module of leaves between them -------------
    "fsdp034-good-an-mlp-class-of-linear-layers-after-tensor-parallelism": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import parallelize_module
        class GatedMLP(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.w1 = nn.Linear(dim, 4 * dim)
                self.w2 = nn.Linear(dim, 4 * dim)
                self.out_proj = nn.Linear(4 * dim, dim)
        def test_parity(mesh):
            model = parallelize_module(GatedMLP(64), mesh["tp"], plan)
            model = fully_shard(model, mesh=mesh["dp"])
            optim = torch.optim.SGD(model.parameters(), lr=1e-2)
    """,
    "fsdp034-good-a-toy-model-wrapping-one-feed-forward-from-a-builder": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class FeedForward(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.up = nn.Linear(size, 2 * size)
                self.act = nn.SiLU()
                self.down = nn.Linear(2 * size, size)
        class ToyModel(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.norm = nn.LayerNorm(size)
                self.ffn = FeedForward(size)
        def init_toy_model(size):
            return ToyModel(size).to("cuda")
        class ParityTest:
            def test_root(self):
                model = init_toy_model(128)
                fully_shard(model)
                self.optim = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-an-mlp-with-an-optional-layer": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Head(nn.Module):
            def __init__(self, dim, bias_proj):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.extra = nn.Linear(dim, dim) if bias_proj else None
        head = fully_shard(Head(32, bias_proj=True))
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    """,
    "fsdp034-a-copy-of-a-model-of-two-mlp-blocks-built-by-a-helper": """
        import copy
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class MLP(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.up = nn.Linear(dim, 4 * dim)
                self.down = nn.Linear(4 * dim, dim)
        class EncoderDecoder(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.encoder = MLP(dim)
                self.decoder = MLP(dim)
        def build(dim):
            return EncoderDecoder(dim)
        def main():
            model = copy.deepcopy(build(64))
            fully_shard(model)  # expect: FSDP034
            optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-a-sequential-of-mlp-blocks": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def mlp():
            return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))
        model = nn.Sequential(mlp(), mlp(), mlp())
        fully_shard(model)  # expect: FSDP034
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """,
    "fsdp034-a-sequential-of-named-blocks": """
        import torch
        import torch.nn as nn
        from collections import OrderedDict
        from torch.distributed.fsdp import fully_shard
        blocks = OrderedDict((f"block{i}", nn.Sequential(nn.Linear(8, 8), nn.GELU())) for i in range(4))
        model = nn.Sequential(blocks)
        fully_shard(model)  # expect: FSDP034
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """,
    "fsdp034-a-wrapper-around-a-model-whose-layers-are-not-shown": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModel
        class WithValueHead(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.backbone = AutoModel.from_pretrained(name)
                self.value_head = nn.Linear(4096, 1)
        model = fully_shard(WithValueHead("llama"))  # expect: FSDP034
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    # --- parity tests: the run trains an unsharded copy of the same model beside the sharded one ---
    "fsdp034-good-a-parity-test-shards-a-copy-of-a-reference-it-trains": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        def run_parity(get_test_case):
            model, batch = get_test_case()
            model_copy = copy.deepcopy(model)
            ref_optim = torch.optim.SGD(model.parameters(), lr=0.1)
            model(batch).sum().backward()
            ref_optim.step()
            fsdp_model = fully_shard(model_copy)
            optim = torch.optim.SGD(fsdp_model.parameters(), lr=0.1)
    """,
    "fsdp034-good-a-parity-test-keeps-the-copy-as-the-reference": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib import make_transformer
        def test_parity():
            model = make_transformer()
            ref_model = copy.deepcopy(model)
            ref_optim = torch.optim.AdamW(ref_model.parameters())
            fully_shard(model)
            optim = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-a-pair-of-copies-from-a-helper-one-sharded": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        from mylib import make_transformer
        def make_pair():
            model = make_transformer()
            return copy.deepcopy(model), copy.deepcopy(model)
        def test_parity():
            ref_model, dist_model = make_pair()
            dist_model = fully_shard(dist_model)
            ref_optim = torch.optim.SGD(ref_model.parameters(), lr=1e-2)
            dist_optim = torch.optim.SGD(dist_model.parameters(), lr=1e-2)
    """,
    "fsdp034-an-untrained-copy-is-no-parity-reference": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        def main():
            model = AutoModelForCausalLM.from_pretrained("llama")
            ema = copy.deepcopy(model)
            fully_shard(model)  # expect: FSDP034
            optimizer = torch.optim.AdamW(model.parameters())
            return ema
    """,
    "fsdp034-a-trained-copy-of-another-model-is-no-parity-reference": """
        import copy
        import torch
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        def main():
            teacher = AutoModelForCausalLM.from_pretrained("teacher")
            student = AutoModelForCausalLM.from_pretrained("student")
            probe = copy.deepcopy(teacher)
            probe_optim = torch.optim.SGD(probe.parameters(), lr=0.1)
            fully_shard(student)  # expect: FSDP034
            optimizer = torch.optim.AdamW(student.parameters())
    """,
    "fsdp034-good-toy-layer-converted-by-a-classmethod": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LoRALinear(nn.Linear):
            def __init__(self, *args, rank=8, **kwargs):
                super().__init__(*args, **kwargs)
                self.config = LoRAConfig(rank)
            @classmethod
            def from_linear(cls, mod, rank=8):
                with torch.device("meta"):
                    new = cls(mod.in_features, mod.out_features, bias=False, rank=rank)
                new.weight = mod.weight
                return new
        class LoRAConfig:
            def __init__(self, rank):
                self.rank = rank
        def test_single_module_parity():
            module = LoRALinear.from_linear(nn.Linear(16, 16))
            fully_shard(module)
            optim = torch.optim.Adam(module.parameters(), lr=1e-2)
    """,
    "fsdp034-good-toy-layer-subclass-without-init": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class ScaledEmbedding(nn.Embedding):
            def forward(self, ids):
                return super().forward(ids) * 2.0
            @classmethod
            def build(cls, size):
                return cls(size, 16)
        model = ScaledEmbedding.build(128)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-a-model-with-blocks-built-by-a-classmethod": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from mylib.blocks import Block
        class Transformer(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.layers = layers
            @classmethod
            def from_depth(cls, depth):
                return cls(nn.ModuleList([Block() for _ in range(depth)]))
        model = Transformer.from_depth(12)
        fully_shard(model)  # expect: FSDP034
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp034-good-one-library-layer-sharded": """
        import torch
        import transformer_engine.pytorch as te
        from torch.distributed.fsdp import fully_shard
        model = te.LayerNormLinear(512, 1536, params_dtype=torch.bfloat16)
        fully_shard(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    """,
    "fsdp034-good-one-project-layer-with-helpers-sharded": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from comms import make_communicator
        class ColumnParallelLinear(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(dim, dim))
                self.communicator = make_communicator()
        model = ColumnParallelLinear(16)
        fully_shard(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    """,
    "fsdp034-one-library-transformer-sharded-at-its-root": """
        import torch
        import transformer_engine.pytorch as te
        from torch.distributed.fsdp import fully_shard
        model = te.TransformerLayer(512, 2048, 8)
        fully_shard(model)  # expect: FSDP034
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    """,
}
