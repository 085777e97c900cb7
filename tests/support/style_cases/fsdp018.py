"""Style cases for FSDP018: code written in styles the fixtures do not use."""

CASES = {
    "fsdp018-adjacent-calls-in-a-method": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
                self.lm_head.weight = self.wte.weight
            def shard(self, mesh):
                fully_shard(self.lm_head, mesh=mesh)  # expect: FSDP018
                fully_shard(self.wte, mesh=mesh)
                fully_shard(self, mesh=mesh)
        LM().shard(mesh)
    """,
    "fsdp018-adjacent-calls-differing-arguments": """
        from torch.distributed.fsdp import fully_shard
        model.head.weight = model.emb.weight
        fully_shard(model.emb, reshard_after_forward=False)  # expect: FSDP018
        fully_shard(model.head)
        fully_shard(model)
    """,
    "fsdp018-aliases": """
        from torch.distributed.fsdp import fully_shard
        emb, head = model.embed_tokens, model.lm_head
        head.weight = emb.weight
        fully_shard(emb)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-conditional-tie": """
        from torch.distributed.fsdp import fully_shard
        if config.tie_word_embeddings:
            model.lm_head.weight = model.model.embed_tokens.weight
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model.lm_head)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-nested-module-split": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = Decoder()
                self.out = nn.Linear(4, 8, bias=False)
                self.out.weight = self.decoder.embed.weight
        model = LM()
        fully_shard(model.decoder)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-good-block-holds-both": """
        from torch.distributed.fsdp import fully_shard
        model.body.head.weight = model.body.emb.weight
        fully_shard(model.body)
        fully_shard(model)
    """,
    "fsdp018-good-tuple-group": """
        from torch.distributed.fsdp import fully_shard
        model.lm_head.weight = model.embed_tokens.weight
        fully_shard((model.embed_tokens, model.lm_head))
        fully_shard(model)
    """,
    "fsdp018-good-cloned-parameter": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        model.head.weight = nn.Parameter(model.emb.weight.detach().clone())
        fully_shard(model.emb)
        fully_shard(model.head)
        fully_shard(model)
    """,
    "fsdp018-good-tie-after-other-model": """
        from torch.distributed.fsdp import fully_shard
        teacher.head.weight = teacher.emb.weight
        fully_shard(student.emb)
        fully_shard(student)
    """,
    "fsdp018-good-split-only-when-untied": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self, tie):
                super().__init__()
                self.tie = tie
                self.emb = nn.Embedding(8, 4)
                self.head = nn.Linear(4, 8, bias=False)
                if tie:
                    self.head.weight = self.emb.weight
            def apply_fsdp(self):
                if not self.tie:
                    fully_shard(self.emb)
                    fully_shard(self.head)
                fully_shard(self)
        LM(tie=config.tie_word_embeddings).apply_fsdp()
    """,
    "fsdp018-good-data-copy": """
        from torch.distributed.fsdp import fully_shard
        model.head.weight.data = model.emb.weight.data
        fully_shard(model.emb)
        fully_shard(model)
    """,
    "fsdp018-good-tensor-data-kept-on-another-module": """
        from torch.distributed.fsdp import fully_shard
        model.head.reference = model.emb.weight.data
        model.head.last_grad = model.emb.weight.grad
        fully_shard(model.emb)
        fully_shard(model)
    """,
    "fsdp018-tie-weights-called-by-the-script": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
            def tie_weights(self):
                self.lm_head.weight = self.embed.weight
        def build():
            model = LM()
            model.tie_weights()
            return model
        model = build()
        fully_shard(model.lm_head, mesh=mesh)  # expect: FSDP018
        fully_shard(model, mesh=mesh)
    """,
    "fsdp018-private-tie-helper-and-tuple-loop": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        def _tie(dst, src):
            dst.weight = src.weight
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok_embeddings = nn.Embedding(8, 4)
                self.output = nn.Linear(4, 8, bias=False)
                self._tie_weights()
            def _tie_weights(self):
                _tie(self.output, self.tok_embeddings)
        model = LM()
        for module in (model.tok_embeddings, model.output):
            fully_shard(module)  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-config-flag-set-before-construction": """
        from dataclasses import dataclass
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class LMConfig:
            vocab_size: int = 8
            tie_word_embeddings: bool = False
        class LM(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self.embed_tokens = nn.Embedding(config.vocab_size, 4)
                self.lm_head = nn.Linear(4, config.vocab_size, bias=False)
                self.post_init()
            def post_init(self):
                self.tie_weights()
            def tie_weights(self):
                if self.config.tie_word_embeddings:
                    self.lm_head.weight = self.embed_tokens.weight
        config = LMConfig()
        config.tie_word_embeddings = True
        model = LM(config)
        fully_shard(model.lm_head)  # expect: FSDP018
        fully_shard(model.embed_tokens)
        fully_shard(model)
    """,
    "fsdp018-constructor-flag-in-a-trainer": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self, vocab, dim, tie_word_embeddings=True):
                super().__init__()
                self.wte = nn.Embedding(vocab, dim)
                self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(2))
                self.lm_head = nn.Linear(dim, vocab, bias=False)
                if tie_word_embeddings:
                    self.lm_head.weight = self.wte.weight
        class Trainer:
            def __init__(self, mesh):
                self.model = LM(8, 4)
                for module in [self.model.wte, *self.model.blocks, self.model.lm_head]:
                    fully_shard(module, mesh=mesh)  # expect: FSDP018
                fully_shard(self.model, mesh=mesh)
        trainer = Trainer(mesh)
    """,
    "fsdp018-hf-getters": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model.get_output_embeddings())  # expect: FSDP018
        fully_shard(model)
    """,
    "fsdp018-hf-config-from-config": """
        from transformers import AutoConfig, AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        def apply_fsdp(model, mesh):
            fully_shard(model.model.embed_tokens, mesh=mesh)  # expect: FSDP018
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(model.lm_head, mesh=mesh)
            fully_shard(model, mesh=mesh)
        config = AutoConfig.from_pretrained(name)
        config.tie_word_embeddings = True
        model = AutoModelForCausalLM.from_config(config)
        apply_fsdp(model, mesh)
    """,
    "fsdp018-good-config-flag-false": """
        from dataclasses import dataclass
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class LMConfig:
            tie_word_embeddings: bool = True
        class LM(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.embed_tokens = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
                if config.tie_word_embeddings:
                    self.lm_head.weight = self.embed_tokens.weight
        model = LM(LMConfig(tie_word_embeddings=False))
        for module in (model.embed_tokens, model.lm_head):
            fully_shard(module)
        fully_shard(model)
    """,
    "fsdp018-good-tie-weights-never-called": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
            def tie_weights(self):
                self.lm_head.weight = self.embed.weight
        model = LM()
        fully_shard(model.embed)
        fully_shard(model.lm_head)
        fully_shard(model)
    """,
    "fsdp018-good-retied-after-to-empty": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.layers = nn.ModuleList([nn.Linear(4, 4)])
                self.lm_head = nn.Linear(4, 8, bias=False)
            def tie_weights(self):
                self.lm_head.weight = self.embed.weight
        with torch.device("meta"):
            model = LM()
        model.tie_weights()
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        model.to_empty(device="cpu")
        model.apply(init_weights)
        model.tie_weights()
    """,
    "fsdp018-good-hf-grouped-embeddings": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard([model.get_input_embeddings(), model.get_output_embeddings()])
        fully_shard(model)
    """,
    "fsdp018-good-hf-tie-not-given": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name)  # the checkpoint's default: tied or not
        fully_shard(model.model.embed_tokens)
        fully_shard(model.lm_head)
        fully_shard(model)
    """,
    "fsdp018-good-hf-tie-false-or-unknown": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=False)
        other = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=args.tie)
        for m in (model, other):
            fully_shard(m.get_input_embeddings())
            fully_shard(m.get_output_embeddings())
            fully_shard(m)
    """,
    "fsdp018-good-hf-only-blocks-sharded": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)  # the embeddings stay together in the root's group
    """,
    "fsdp018-good-hf-untied-after-load": """
        import torch.nn as nn
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name, tie_word_embeddings=True)
        head = model.get_output_embeddings()
        head.weight = nn.Parameter(head.weight.detach().clone())  # its own copy from here on
        fully_shard(model.get_input_embeddings())
        fully_shard(head)
        fully_shard(model)
    """,
    "fsdp018-good-retied-then-untied": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        model.lm_head.weight = model.embed.weight
        model.lm_head.weight = nn.Parameter(model.embed.weight.detach().clone())
        fully_shard(model.embed)
        fully_shard(model.lm_head)
        fully_shard(model)
    """,
    "fsdp018-meta-to-empty-in-a-trainer": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(8, 4)
                self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
                self.lm_head = nn.Linear(4, 8, bias=False)
                self.lm_head.weight = self.wte.weight
        class Trainer:
            def __init__(self, mesh):
                with torch.device("meta"):
                    self.model = LM()
                self.model.to_empty(device="cuda")  # expect: FSDP018
                self.model.apply(init_weights)  # to_empty() leaves memory uninitialised
                for block in self.model.blocks:
                    fully_shard(block, mesh=mesh)
                fully_shard(self.model, mesh=mesh)
        trainer = Trainer(mesh)
    """,
    "fsdp018-meta-to-empty-in-a-helper-blocks-sharded-first": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.layers = nn.ModuleList([nn.Linear(4, 4)])
                self.head = nn.Linear(4, 8, bias=False)
                self.tie()
            def tie(self):
                self.head.weight = self.embed.weight
        def materialize(model):
            model.to_empty(device="cpu")  # expect: FSDP018
            model.apply(init_weights)  # to_empty() leaves memory uninitialised
        with torch.device("meta"):
            model = LM()
        for layer in model.layers:
            fully_shard(layer)  # the blocks hold neither tied module
        materialize(model)
        fully_shard(model)
    """,
    "fsdp018-good-meta-retied-by-assignment-in-a-trainer": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(8, 4)
                self.lm_head = nn.Linear(4, 8, bias=False)
                self.lm_head.weight = self.wte.weight
        class Trainer:
            def __init__(self, mesh):
                with torch.device("meta"):
                    self.model = LM()
                self.model.to_empty(device="cuda")
                self.model.lm_head.weight = self.model.wte.weight
                self.model.apply(init_weights)  # to_empty() leaves memory uninitialised
                fully_shard(self.model, mesh=mesh)
        trainer = Trainer(mesh)
    """,
    "fsdp018-good-meta-root-sharded-before-to-empty": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.layers = nn.ModuleList([nn.Linear(4, 4)])
                self.head = nn.Linear(4, 8, bias=False)
                self.head.weight = self.embed.weight
        with torch.device("meta"):
            model = LM()
        for module in [*model.layers, model]:
            fully_shard(module)  # the root's group holds the tie as one DTensor
        model.to_empty(device="cpu")
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
    """,
    "fsdp018-good-meta-tied-after-to-empty": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(8, 4)
                self.head = nn.Linear(4, 8, bias=False)
            def tie_weights(self):
                self.head.weight = self.embed.weight
        with torch.device("meta"):
            model = LM()
        model.to_empty(device="cpu")
        model.tie_weights()
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
        fully_shard(model)
    """,
    "fsdp018-good-meta-untied": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 8, bias=False))
        model.to_empty(device="cpu")
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
        fully_shard(model)
    """,
    # --- a number read from a config is no parameter: storing it on two modules ties nothing -------
    "fsdp018-good-meta-norm-eps-from-a-plain-config-object": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class ModelArgs:
            def __init__(self, **values):
                self.__dict__.update(values)
        class RMSNorm(nn.Module):
            def __init__(self, dim, eps):
                super().__init__()
                self.eps = eps
                self.weight = nn.Parameter(torch.ones(dim))
        class LM(nn.Module):
            def __init__(self, model_args):
                super().__init__()
                self.model_args = model_args
                self.embed = nn.Embedding(8, model_args.dim)
                self.norm = RMSNorm(model_args.dim, eps=model_args.norm_eps)
        with torch.device("meta"):
            model = LM(ModelArgs(dim=4, norm_eps=1e-6))
        model.to_empty(device="cpu")
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
        fully_shard(model)
    """,
    "fsdp018-good-meta-scalar-a-config-class-declares": """
        import torch
        import torch.nn as nn
        from pydantic import BaseModel
        from torch.distributed.fsdp import fully_shard
        class ModelArgs(BaseModel):
            dim: int
            norm_eps: float
        class LM(nn.Module):
            def __init__(self, model_args):
                super().__init__()
                self.model_args = model_args
                self.embed = nn.Embedding(8, model_args.dim)
                self.norm = nn.LayerNorm(model_args.dim)
                self.norm.eps = model_args.norm_eps
        with torch.device("meta"):
            model = LM(ModelArgs(dim=4, norm_eps=1e-6))
        model.to_empty(device="cuda")
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
        fully_shard(model)
    """,
    "fsdp018-meta-tie-through-a-module-held-in-a-variable": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class SharedEmbedding(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(8, 4))
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                shared = SharedEmbedding()
                self.embed = shared
                self.head = nn.Linear(4, 8, bias=False)
                self.head.weight = shared.weight
        with torch.device("meta"):
            model = LM()
        model.to_empty(device="cpu")  # expect: FSDP018
        model.apply(init_weights)  # to_empty() leaves memory uninitialised
        fully_shard(model)
    """,
    "fsdp018-good-a-setting-read-through-a-model-config": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        class SpeechDecoder(nn.Module):
            def __init__(self, latent_dim):
                super().__init__()
                self.latent_dim = latent_dim
                self.proj = nn.Linear(latent_dim, latent_dim)
        class DuplexModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.llm = AutoModelForCausalLM.from_pretrained("llama")
                self.speech = SpeechDecoder(self.llm.config.hidden_size)
                self.speech.latent_dim = self.llm.config.hidden_size
        model = DuplexModel()
        fully_shard(model.speech)
        fully_shard(model.llm)
        fully_shard(model)
    """,
    "fsdp018-a-weight-read-next-to-the-config": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        class SpeechDecoder(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
        class DuplexModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.llm = AutoModelForCausalLM.from_pretrained("llama")
                self.speech = SpeechDecoder(self.llm.config.hidden_size)
                self.speech.embed = self.llm.embed_tokens
        model = DuplexModel()
        fully_shard(model.speech)  # expect: FSDP018
        fully_shard(model.llm)
        fully_shard(model)
    """,
    "fsdp018-good-a-setting-the-model-keeps-from-its-builder-config": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class ModelConfig:
            def __init__(self, compile_cfg, mtp_config, rms_norm_eps):
                self.compile_cfg = compile_cfg
                self.mtp_config = mtp_config
                self.rms_norm_eps = rms_norm_eps
            def build(self):
                return Model(self)
        class RMSNorm(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(dim))
        class Model(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self._compile_cfg = self.resolve_compile_cfg(config)
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
                self.mtp_block = nn.Linear(8, 8)
                self.mtp_block.mtp_config = config.mtp_config
                self.norm = RMSNorm(8)
                self.norm.variance_epsilon = config.rms_norm_eps
            def resolve_compile_cfg(self, config):
                return config.compile_cfg
        class Engine:
            def __init__(self, model_cfg):
                self.model_cfg = model_cfg
                self.model = self.model_cfg.build()
                for layer in (*self.model.layers, self.model.mtp_block, self.model.norm):
                    fully_shard(layer)
                fully_shard(self.model)
        engine = Engine(ModelConfig({"layers": True}, {"depth": 1}, 1e-6))
    """,
    "fsdp018-tie-between-modules-named-like-settings-holders": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed_configurable = nn.Embedding(8, 4)
                self.head = nn.Linear(4, 8, bias=False)
                self.head.weight = self.embed_configurable.weight
        model = Model()
        fully_shard(model.head)  # expect: FSDP018
        fully_shard(model)
    """,
}
