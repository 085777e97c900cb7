"""Style cases for FSDP002: code written in styles the fixtures do not use."""

CASES = {
    "fsdp002-items-loop-after-root": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, reshard_after_forward=False)
        for layer_id, block in model.layers.items():  # torchtitan's ModuleDict style
            fully_shard(block)  # expect: FSDP002
    """,
    "fsdp002-enumerate-after-root-reassigned": """
        import torch.distributed.fsdp as fsdp
        model = fsdp.fully_shard(model)
        for i, block in enumerate(model.blocks):
            fsdp.fully_shard(block, reshard_after_forward=i < len(model.blocks) - 1)  # expect: FSDP002
    """,
    "fsdp002-comprehension-after-root": """
        from torch.distributed.fsdp import fully_shard as FSDP
        FSDP(model)
        [FSDP(block) for block in model.layers]  # expect: FSDP002
    """,
    "fsdp002-within-one-block": """
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block)
            fully_shard(block.attention)  # expect: FSDP002
        fully_shard(model)
    """,
    "fsdp002-list-loop-root-first": """
        from torch.distributed.fsdp import fully_shard
        for module in [model, model.encoder]:
            fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-root-listed-before-its-blocks": """
        from torch.distributed.fsdp import fully_shard
        modules_to_shard = [model] + list(model.layers)
        for m in modules_to_shard:
            fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-blocks-listed-before-root": """
        from torch.distributed.fsdp import fully_shard
        for m in list(model.layers) + [model]:
            fully_shard(m)
    """,
    "fsdp002-computed-submodule-name-after-root": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for i in range(n_layers):
            fully_shard(model.get_submodule(f"layers.{i}"))  # expect: FSDP002
    """,
    "fsdp002-good-filter-lambda-over-modules": """
        from torch.distributed.fsdp import fully_shard
        for m in filter(lambda m: isinstance(m, Block), model.modules()):
            fully_shard(m)
        fully_shard(model)
    """,
    "fsdp002-filter-admits-every-module": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        for m in filter(lambda m: isinstance(m, nn.Module), model.modules()):
            fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-class-name-filter": """
        from torch.distributed.fsdp import fully_shard
        for module in model.modules():
            if module.__class__.__name__ in model._no_split_modules:
                fully_shard(module)
        fully_shard(model)
    """,
    "fsdp002-isinstance-admits-root": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        for module in model.modules():
            if isinstance(module, nn.Module):
                fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-good-continue-filter": """
        from torch.distributed.fsdp import fully_shard
        for module in model.modules():
            if not isinstance(module, Block):
                continue
            fully_shard(module)
        fully_shard(model)
    """,
    "fsdp002-good-nested-bottom-up": """
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block.attention)
            fully_shard(block.mlp)
            fully_shard(block)
        fully_shard(model)
    """,
    "fsdp002-good-sibling-modules": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model.encoder)
        fully_shard(model.decoder)
        fully_shard(model)
    """,
    # --- type filters the second batch of unseen repos used ---------------------------------------
    "fsdp002-good-any-isinstance-filter": """
        from torch.distributed.fsdp import fully_shard
        def shard(model, sub_modules_to_wrap):
            wrap_types = {Block, Embed}
            for sub_module in model.modules():
                if any(isinstance(sub_module, t) for t in wrap_types):
                    fully_shard(sub_module)
            fully_shard(model)
    """,
    "fsdp002-any-isinstance-filter-admitting-the-root": """
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            for m in model.modules():
                if any(isinstance(m, t) for t in (nn.Module,)):
                    fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-class-name-filter-on-a-model-built-in-two-branches": """
        from torch.distributed.fsdp import fully_shard
        def setup(meta):
            if meta:
                model = AutoModelForCausalLM.from_config(cfg)
            else:
                model = AutoModelForCausalLM.from_pretrained(path)
            modules = []
            for module in model.modules():
                if module.__class__.__name__ in model._no_split_modules or isinstance(module, nn.Embedding):
                    modules.append(module)
            for module in modules:
                fully_shard(module)
            fully_shard(model)
    """,
    "fsdp002-unfiltered-walk-of-a-model-built-in-two-branches": """
        from torch.distributed.fsdp import fully_shard
        def setup(meta):
            if meta:
                model = AutoModelForCausalLM.from_config(cfg)
            else:
                model = AutoModelForCausalLM.from_pretrained(path)
            for module in model.modules():
                fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-good-membership-search-of-a-layer-that-may-be-missing": """
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        def get_layers(model):
            inner = getattr(model, "model", None)
            if inner is not None and isinstance(getattr(inner, "layers", None), nn.ModuleList):
                return list(inner.layers)
            return None
        def find_experts(layer, experts):
            for module in layer.modules():
                if module in experts:
                    return module
            return None
        def wrap(model, experts):
            layers = get_layers(model)
            if layers is not None:
                for layer in layers:
                    experts_mod = find_experts(layer, experts)
                    if experts_mod is not None:
                        fully_shard(experts_mod)
                    fully_shard(layer)
            fully_shard(model)
    """,
    "fsdp002-apply-after-the-root-is-sharded": """
        from torch.distributed.fsdp import fully_shard
        def shard_blocks(module):
            if isinstance(module, TransformerBlock):
                fully_shard(module)
        def main(model):
            fully_shard(model)
            model.apply(shard_blocks)  # expect: FSDP002
    """,
    # --- early exits in elif / else arms ------------------------------------------------------
    "fsdp002-good-root-sharded-in-an-elif-that-returns": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, mesh, kind):
            if kind == "vlm":
                layers = model.language_model.layers
            elif kind == "hybrid":
                fully_shard(model, mesh=mesh)
                return model
            else:
                layers = model.layers
            for layer in layers:
                fully_shard(layer, mesh=mesh)
            return fully_shard(model, mesh=mesh)
    """,
    "fsdp002-good-root-sharded-in-an-else-whose-inner-if-returns": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, kind, tiny):
            if kind == "llm":
                layers = model.layers
            else:
                if tiny:
                    fully_shard(model)
                    return model
                layers = model.blocks
            for layer in layers:
                fully_shard(layer)
            fully_shard(model)
    """,
    "fsdp002-root-sharded-before-an-elif-that-returns": """
        from torch.distributed.fsdp import fully_shard
        def parallelize(model, kind):
            fully_shard(model)
            if kind == "none":
                return model
            elif kind == "debug":
                print(model)
            for layer in model.layers:
                fully_shard(layer)  # expect: FSDP002
    """,
    # --- type filters spelled other ways: does the filter admit the root and its submodules? ----
    "fsdp002-type-in-a-module-constant-that-lists-the-root-class": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)  # the set contains the root's class
        def shard(model: Model):
            for m in model.modules():  # pre-order: root first
                if type(m) in WRAP:
                    fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-type-in-a-module-constant-of-block-classes": """
        from torch.distributed.fsdp import fully_shard
        WRAP = {Block, Embedding}
        def shard(model: Model):
            for m in model.modules():
                if type(m) in WRAP:
                    fully_shard(m)
            fully_shard(model)  # the root separately, last
    """,
    "fsdp002-type-in-a-list-that-lists-the-root-class-in-a-method": """
        from torch.distributed.fsdp import fully_shard
        WRAP_CLASSES = [DecoderLayer, CausalLM]
        class Trainer:
            def parallelize(self, model: CausalLM):
                for module in model.modules():
                    if type(module) in WRAP_CLASSES:
                        fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-type-in-an-inline-set-with-the-root-class-at-module-level": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard as shard
        class Block(nn.Module):
            pass
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(Block() for _ in range(4))
        net = Net()
        for m in net.modules():
            if type(m) in {Block, Net}:
                shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-type-is-the-root-class-alone": """
        from torch.distributed.fsdp import fully_shard
        def shard(model: Model):
            for m in model.modules():
                if m.__class__ is Model:  # the root only: nothing below it is sharded
                    fully_shard(m)
    """,
    "fsdp002-good-class-name-not-in-names-then-continue": """
        from torch.distributed.fsdp import fully_shard
        NO_SPLIT = {"LlamaDecoderLayer"}
        def shard(model: LlamaForCausalLM):
            for m in model.modules():
                if type(m).__name__ not in NO_SPLIT:
                    continue
                fully_shard(m)
            fully_shard(model)
    """,
    "fsdp002-class-name-not-in-names-that-list-the-root-then-continue": """
        from torch.distributed.fsdp import fully_shard
        NO_SPLIT = {"LlamaDecoderLayer", "LlamaForCausalLM"}
        def shard(model: LlamaForCausalLM):
            for m in model.modules():
                if type(m).__name__ not in NO_SPLIT:
                    continue
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-dunder-class-name-in-names-that-list-the-root": """
        from transformers import LlamaForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = LlamaForCausalLM.from_pretrained(path)
        wrap_names = ("LlamaDecoderLayer", "LlamaForCausalLM")
        for module in model.modules():
            if module.__class__.__name__ in wrap_names:
                fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-good-class-name-filter-of-an-auto-model": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(path)  # its class is not known here
        wrap_names = ("LlamaDecoderLayer", "LlamaForCausalLM")
        for module in model.modules():
            if module.__class__.__name__ in wrap_names:
                fully_shard(module)
    """,
    "fsdp002-good-class-names-of-a-model-whose-class-is-unknown": """
        from torch.distributed.fsdp import fully_shard
        NAMES = {"Block", "Model"}
        def shard(model):
            for m in model.modules():
                if type(m).__name__ in NAMES:
                    fully_shard(m)
    """,
    "fsdp002-class-name-compared-with-equals": """
        from torch.distributed.fsdp import fully_shard
        def shard(model: Model):
            for m in model.modules():
                if type(m).__name__ == "Block" or "Model" == type(m).__name__:
                    fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-class-name-filter-in-a-comprehension": """
        from torch.distributed.fsdp import fully_shard
        NAMES = ["Block", "Model"]
        def shard(model: Model):
            for m in [m for m in model.modules() if type(m).__name__ in NAMES]:
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-class-name-filter-lambda": """
        from torch.distributed.fsdp import fully_shard
        NAMES = ["Block", "Model"]
        def shard(model: Model):
            for m in filter(lambda m: type(m).__name__ in NAMES, model.modules()):
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-type-not-in-a-constant-that-lists-the-root-then-continue": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)
        def shard(model: Model):
            for m in model.modules():
                if type(m) not in WRAP:
                    continue
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-isinstance-of-a-constant-that-lists-the-root-class": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)
        def shard(model: Model):
            for m in model.modules():
                if isinstance(m, WRAP):
                    fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-isinstance-of-a-base-the-root-and-its-blocks-share": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Base(nn.Module):
            pass
        class Block(Base):
            pass
        class Model(Base):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(Block() for _ in range(2))
        def shard(model: Model):
            for m in model.modules():
                if isinstance(m, Base):
                    fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-isinstance-of-the-root-class-alone": """
        from torch.distributed.fsdp import fully_shard
        def shard(model: Model):
            for m in model.modules():
                if not isinstance(m, Model):
                    continue
                fully_shard(m)
    """,
    # --- a list filled in pre-order with append: reversed is bottom-up, forward is top-down -------
    "fsdp002-good-reversed-list-appended-in-pre-order": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)
        def shard(model: Model):
            targets = []
            for m in model.modules():
                if isinstance(m, WRAP):
                    targets.append(m)
            for m in reversed(targets):  # leaves first, the root last
                fully_shard(m)
    """,
    "fsdp002-list-appended-in-pre-order-iterated-forward": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)
        def shard(model: Model):
            targets = []
            for m in model.modules():
                if isinstance(m, WRAP):
                    targets.append(m)
            for m in targets:
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-unfiltered-list-reversed-in-place": """
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            modules = []
            for m in model.modules():
                modules.append(m)
            modules.reverse()
            for m in modules:
                fully_shard(m)
    """,
    "fsdp002-good-walk-sliced-backwards": """
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            for m in list(model.modules())[::-1]:
                fully_shard(m)
    """,
    "fsdp002-good-helper-collects-and-the-caller-reverses": """
        from torch.distributed.fsdp import fully_shard
        NAMES = {"Block", "Model"}
        def collect(model):
            found = []
            for m in model.modules():
                if m.__class__.__name__ in NAMES:
                    found.append(m)
            return found
        def shard(model: Model):
            for m in reversed(collect(model)):
                fully_shard(m)
    """,
    "fsdp002-helper-collects-and-the-caller-iterates-forward": """
        from torch.distributed.fsdp import fully_shard
        NAMES = {"Block", "Model"}
        def collect(model):
            found = []
            for m in model.modules():
                if m.__class__.__name__ in NAMES:
                    found.append(m)
            return found
        def shard(model: Model):
            for m in collect(model):
                fully_shard(m)  # expect: FSDP002
    """,
    "fsdp002-good-class-name-held-in-a-variable-of-block-names": """
        from torch.distributed.fsdp import fully_shard
        def shard(model: Model):
            for module in model.modules():
                class_name = type(module).__name__
                if class_name in ("DecoderLayer", "VisionBlock"):
                    fully_shard(module)
            fully_shard(model)
    """,
    "fsdp002-class-held-in-a-variable-that-the-filter-lists": """
        from torch.distributed.fsdp import fully_shard
        WRAP = (Block, Model)
        def shard(model: Model):
            for module in model.modules():
                cls = module.__class__
                if cls in WRAP:
                    fully_shard(module)  # expect: FSDP002
    """,
    "fsdp002-good-attribute-test-written-negatively": """
        from torch.distributed.fsdp import fully_shard
        def shard(model):
            for m in model.modules():
                if m.weight is not None:  # no type test: the root is not taken to pass
                    fully_shard(m)
            fully_shard(model)
    """,
    "fsdp002-good-partial-of-either-sharder-on-the-inner-or-the-model": """
        import functools
        from torch.distributed.fsdp import fully_shard
        def shard_with_fp32_islands(module, **kwargs):
            fully_shard(module.norm, **kwargs)
            fully_shard(module, **kwargs)
        def parallelize(model, mesh, keeps_fp32):
            impl = shard_with_fp32_islands if keeps_fp32 else fully_shard
            shard = functools.partial(impl, mesh=mesh)
            inner = model.model if hasattr(model, "model") else model
            shard(inner)
    """,
    "fsdp002-partial-of-either-sharder-root-first": """
        import functools
        from torch.distributed.fsdp import fully_shard
        def shard_with_fp32_islands(module, **kwargs):
            fully_shard(module.norm, **kwargs)
            fully_shard(module, **kwargs)
        def parallelize(model, mesh, keeps_fp32):
            impl = shard_with_fp32_islands if keeps_fp32 else fully_shard
            shard = functools.partial(impl, mesh=mesh)
            shard(model)
            shard(model.encoder)  # expect: FSDP002
    """,
}
