"""Rules on code written in styles the fixtures do not use. A case named `fsdpNNN-...` is linted
with rule FSDPNNN; it marks the expected diagnostics with `# expect: FSDPNNN`, and a case without
marks must produce none."""

from __future__ import annotations

import textwrap

import pytest
from fixture_marks import expected_diagnostics

from fsdp2_lint.engine import lint_source
from fsdp2_lint.rule import all_rules

CASES = {
    # --- FSDP001 -----------------------------------------------------------------------------
    "fsdp001-comprehension-params": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])  # expect: FSDP001
        fully_shard(model)
        opt.step()
    """,
    "fsdp001-param-groups-named-parameters": """
        import torch
        from torch.distributed._composable.fsdp import fully_shard
        model = Net()
        decay, no_decay = [], []
        for name, param in model.named_parameters():
            (no_decay if name.endswith("bias") else decay).append(param)
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups)  # expect: FSDP001
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        train(model, opt)
    """,
    "fsdp001-dynamic-optimizer-class": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        opt = getattr(torch.optim, cfg.optimizer)(model.parameters(), lr=cfg.lr)  # expect: FSDP001
        fully_shard(model)
        opt.step()
    """,
    "fsdp001-submodule-params-before-root-shard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        head_opt = torch.optim.SGD(model.head.parameters(), lr=0.1)  # expect: FSDP001
        fully_shard(model)
        head_opt.step()
    """,
    "fsdp001-init-calls-setup-after-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.AdamW(self.model.parameters())  # expect: FSDP001
                self._setup_fsdp()
            def _setup_fsdp(self):
                for layer in self.model.layers:
                    fully_shard(layer)
                fully_shard(self.model)
    """,
    "fsdp001-helpers-in-wrong-order-in-main": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_model(m):
            for block in m.layers:
                fully_shard(block)
            fully_shard(m)
        def build_optimizer(m, lr):
            return torch.optim.AdamW(m.parameters(), lr=lr)
        def main():
            model = Net()
            optimizer = build_optimizer(model, 1e-3)  # expect: FSDP001
            shard_model(model)
            for batch in loader:
                optimizer.step()
        if __name__ == "__main__":
            main()
    """,
    "fsdp001-functools-partial-factory": """
        import functools
        import torch
        from torch.distributed.fsdp import fully_shard
        make_optimizer = functools.partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01)
        model = Net()
        optimizer = make_optimizer(model.parameters())  # expect: FSDP001
        fully_shard(model)
        optimizer.step()
    """,
    "fsdp001-partial-of-fully-shard-after-optimizer": """
        import functools
        import torch
        from torch.distributed.fsdp import fully_shard
        shard = functools.partial(fully_shard, mesh=mesh, reshard_after_forward=True)
        model = Net()
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP001
        for block in model.layers:
            shard(block)
        shard(model)
        optimizer.step()
    """,
    "fsdp001-good-partial-after-sharding": """
        from functools import partial
        import torch
        from torch.distributed.fsdp import fully_shard
        make_optimizer = partial(torch.optim.AdamW, lr=1e-3)
        model = Net()
        fully_shard(model)
        optimizer = make_optimizer(model.parameters())
        optimizer.step()
    """,
    "fsdp001-container-built-from-parts-sharded-later": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        encoder, decoder = Encoder(), Decoder()
        model = nn.ModuleList([encoder, decoder])
        opt = torch.optim.AdamW(model.parameters())  # expect: FSDP001
        fully_shard(encoder)
        fully_shard(decoder)
        opt.step()
    """,
    "fsdp001-imported-optimizer-factory": """
        from torch.distributed.fsdp import fully_shard
        from trainlib.optim import build_optimizers
        model = Net()
        optimizers = build_optimizers([model], job_config)  # expect: FSDP001
        fully_shard(model)
        optimizers.step()
    """,
    "fsdp001-configure-optimizers-of-a-model-defined-elsewhere": """
        from torch.distributed.fsdp import fully_shard
        from model import GPT
        model = GPT(config)
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda")  # expect: FSDP001
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
        optimizer.step()
    """,
    "fsdp001-good-factory-after-sharding": """
        from torch.distributed.fsdp import fully_shard
        from trainlib.optim import build_lr_schedulers, build_optimizer
        model = Net()
        fully_shard(model)
        optimizer = build_optimizer(model, cfg)
        scheduler = build_lr_schedulers(optimizer, cfg)
        optimizer.step()
    """,
    "fsdp001-dataclass-post-init": """
        from dataclasses import dataclass
        from typing import ClassVar
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        @dataclass
        class Trainer:
            model: nn.Module
            lr: float = 1e-3
            name: ClassVar[str] = "trainer"
            def __post_init__(self):
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr)  # expect: FSDP001
            def shard(self):
                fully_shard(self.model)
        trainer = Trainer(Net(), lr=3e-4)
        trainer.shard()
        trainer.optimizer.step()
    """,
    "fsdp001-good-helpers-in-right-order": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def shard_model(m):
            for block in m.layers:
                fully_shard(block)
            fully_shard(m)
        def build_optimizer(m):
            return torch.optim.AdamW(m.parameters())
        model = Net()
        shard_model(model)
        optimizer = build_optimizer(model)
        optimizer.step()
    """,
    "fsdp001-good-separate-methods-unknown-order": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class LitModel:
            def configure_model(self):
                fully_shard(self.model)
            def configure_optimizers(self):
                return torch.optim.AdamW(self.model.parameters())
    """,
    "fsdp001-good-exclusive-branches": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        if args.fsdp:
            fully_shard(model)
            opt = torch.optim.AdamW(model.parameters())
        else:
            opt = torch.optim.AdamW(model.parameters())
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt.step()
    """,
    "fsdp001-good-other-model": """
        import torch
        from torch.distributed.fsdp import fully_shard
        teacher, student = Net(), Net()
        teacher_opt = torch.optim.AdamW(teacher.parameters())
        fully_shard(student)
        student_opt = torch.optim.AdamW(student.parameters())
        teacher_opt.step()
        student_opt.step()
    """,
    "fsdp001-good-megatron-fully-shard": """
        import torch
        from megatron_fsdp import fully_shard
        model = Net()
        opt = torch.optim.AdamW(model.parameters())
        model = fully_shard(model)
        opt.step()
    """,
    # --- FSDP002 -----------------------------------------------------------------------------
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
    # --- FSDP003 -----------------------------------------------------------------------------
    "fsdp003-kwargs-batch": """
        from torch.distributed.fsdp import fully_shard
        model = fully_shard(model)
        outputs = model.forward(**batch)  # expect: FSDP003
    """,
    "fsdp003-unshard-with-autograd": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        model.unshard()
        loss = model.forward(x).sum()  # expect: FSDP003
        loss.backward()
    """,
    "fsdp003-child-outside-root-forward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        hidden = model.encoder.forward(x)  # expect: FSDP003
    """,
    "fsdp003-good-inference-mode-after-unshard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        model.unshard()
        with torch.inference_mode():
            logits = model.forward(x)
        model.reshard()
    """,
    "fsdp003-good-child-forward-inside-root-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.head = nn.Linear(4, 4)
            def forward(self, x):
                return self.head.forward(self.encoder.forward(x))
        model = Net()
        fully_shard(model)
        y = model(x)
    """,
    "fsdp003-sharded-child-forward-inside-root-forward": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
            def forward(self, x):
                for layer in self.layers:
                    x = layer.forward(x)  # expect: FSDP003
                return x
        model = Net()
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        y = model(x)
    """,
    "fsdp003-good-own-child-in-forward-of-sharded-lightning-module": """
        import lightning as L
        from torch.distributed.fsdp import fully_shard
        class Lit(L.LightningModule):
            def configure_model(self):
                for layer in self.model.layers:
                    fully_shard(layer)
                fully_shard(self)
            def forward(self, x):
                return self.model.forward(x)
            def training_step(self, batch):
                return self(batch).sum()
    """,
    "fsdp003-sharded-child-in-forward-of-lightning-module": """
        import lightning as L
        from torch.distributed.fsdp import fully_shard
        class Lit(L.LightningModule):
            def configure_model(self):
                fully_shard(self.model)
            def forward(self, x):
                return self.model.forward(x)  # expect: FSDP003
    """,
    "fsdp003-good-before-sharding": """
        from torch.distributed.fsdp import fully_shard
        reference = model.forward(x)
        fully_shard(model)
        y = model(x)
    """,
    # --- FSDP004 -----------------------------------------------------------------------------
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
    # --- FSDP005 -----------------------------------------------------------------------------
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
    # --- FSDP006 -----------------------------------------------------------------------------
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
    "fsdp006-meta-helper-reported-at-caller": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def build():
            with torch.device("meta"):
                return Transformer(args)
        def main():
            model = build()  # expect: FSDP006
            fully_shard(model)
            model(tokens).sum().backward()
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
    # --- FSDP007 -----------------------------------------------------------------------------
    "fsdp007-early-return": """
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        def save(model, path):
            if not dist.get_rank() == 0:
                return
            state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))  # expect: FSDP007
            torch.save(state, path)
    """,
    "fsdp007-rank-zero-only-decorator": """
        import torch.distributed as dist
        from lightning.pytorch.utilities import rank_zero_only
        @rank_zero_only
        def log_norm(model):
            total = sum(p.full_tensor().norm() for p in model.parameters())  # expect: FSDP007
            print(total)
    """,
    "fsdp007-is-main-process-barrier": """
        import torch.distributed as dist
        if accelerator.is_main_process:
            save_artifacts()
            dist.barrier()  # expect: FSDP007
    """,
    "fsdp007-helper-called-from-branch": """
        import torch.distributed.checkpoint as dcp
        def checkpoint(model, step):
            dcp.save({"model": model.state_dict()}, checkpoint_id=f"ckpt/{step}")
        for step in range(steps):
            train_step()
            if rank == 0 and step % 100 == 0:
                checkpoint(model, step)  # expect: FSDP007
    """,
    "fsdp007-single-process-or-rank-zero-helper": """
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        def is_main_process():
            return not dist.is_initialized() or dist.get_rank() == 0
        def save(model, step):
            if is_main_process():
                dcp.save({"model": model.state_dict()}, checkpoint_id=f"ckpt/{step}")  # expect: FSDP007
    """,
    "fsdp007-initialized-and-nonzero-early-return": """
        import torch.distributed as dist
        def finish():
            if dist.is_initialized() and dist.get_rank() != 0:
                return
            dist.barrier()  # expect: FSDP007
    """,
    "fsdp007-good-world-size-guard": """
        import os
        import torch.distributed as dist
        world_size = int(os.environ["WORLD_SIZE"])
        if world_size > 1:
            dist.barrier()
    """,
    "fsdp007-good-grad-norm-gathered-on-rank-zero": """
        import torch
        import torch.distributed as dist
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if dist.get_rank() == 0:
            print(f"grad norm {grad_norm.full_tensor().item():.3f}")
    """,
    "fsdp007-weight-gathered-on-rank-zero": """
        import torch.distributed as dist
        if dist.get_rank() == 0:
            head = model.output.weight.full_tensor()  # expect: FSDP007
    """,
    "fsdp007-rank-zero-checks-defined-elsewhere": """
        import torch.distributed as dist
        from utils import *
        if is_main_process():
            dist.barrier()  # expect: FSDP007
        if trainer.is_world_process_zero():
            dist.barrier()  # expect: FSDP007
        if helpers.is_rank_0():
            dist.all_reduce(loss)  # expect: FSDP007
        if is_training():
            dist.barrier()
    """,
    "fsdp007-good-lora-rank-is-not-a-process-rank": """
        import torch
        import torch.distributed as dist
        def merge(rank, dim):
            lora_a = torch.zeros(dim, rank)
            if lora_a.numel() > 0 and isinstance(lora_a, torch.Tensor):
                dist.all_reduce(lora_a)
    """,
    "fsdp007-good-gather-only-if-dtensor-on-rank-zero": """
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor
        def get_logits(model, ids):
            out = model(ids)
            if isinstance(out, DTensor):
                out = out.full_tensor()
            return out
        if dist.get_rank() == 0:
            reference = get_logits(hf_model, ids)
    """,
    "fsdp007-sharded-weight-gathered-if-dtensor-on-rank-zero": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        fully_shard(model)
        if dist.get_rank() == 0:
            weight = model.head.weight
            if isinstance(weight, DTensor):
                weight = weight.full_tensor()  # expect: FSDP007
    """,
    "fsdp007-good-nanogpt-ddp-flag": """
        import os
        import torch.distributed as dist
        ddp = int(os.environ.get("RANK", -1)) != -1
        if ddp:
            dist.init_process_group(backend="nccl")
            master_process = int(os.environ["RANK"]) == 0
        else:
            master_process = True
        for it in range(max_iters):
            if ddp:
                dist.all_reduce(loss)
            if master_process:
                print(loss.item())
        if ddp:
            dist.barrier()
    """,
    "fsdp007-rank-helpers-for-single-and-distributed-runs": """
        import torch.distributed as dist
        from myutils import is_distributed
        def get_rank():
            if not dist.is_initialized():
                return 0
            return dist.get_rank()
        def save(state):
            if get_rank() == 0:
                dist.barrier()  # expect: FSDP007
        if is_distributed() and get_rank() != 0:
            dist.gather_object(names, dst=0)
        else:
            dist.gather_object(names, gathered, dst=0)
    """,
    "fsdp007-good-full-state-dict-of-a-plain-model-on-rank-zero": """
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from mylib.fsdp import prepare_fully_shard
        def parallelize(model, config):
            full_state_dict = {}
            if dist.get_rank() == 0:
                options = StateDictOptions(full_state_dict=True, cpu_offload=True)
                full_state_dict = get_model_state_dict(model, options=options)
            prepare_fully_shard(model, config)
            return full_state_dict
    """,
    "fsdp007-full-state-dict-of-a-sharded-model-on-rank-zero": """
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import fully_shard
        def parallelize(model):
            fully_shard(model)
            if dist.get_rank() == 0:
                options = StateDictOptions(full_state_dict=True, cpu_offload=True)
                state = get_model_state_dict(model, options=options)  # expect: FSDP007
    """,
    "fsdp007-good-other-arm-of-a-partly-rank-test": """
        import torch.distributed as dist
        def gathered(model):
            for name, param in model.named_parameters():
                yield name, param.full_tensor()
        def sync_weights(model):
            if dist.get_rank() == 0 and transfer is not None:
                transfer.send(gathered(model))
            else:
                for _ in gathered(model):
                    pass
    """,
    "fsdp007-good-point-to-point": """
        import torch.distributed as dist
        if rank == 0:
            dist.send(tensor, dst=1)
        else:
            dist.recv(tensor, src=0)
    """,
    "fsdp007-good-broadcast-in-both-arms": """
        import torch.distributed as dist
        if dist.get_rank() == 0:
            sizes = compute_sizes()
            dist.broadcast_object_list(sizes, src=0)
        else:
            sizes = [None]
            dist.broadcast_object_list(sizes, src=0)
    """,
    "fsdp007-good-sharded-state-dict-on-rank-zero": """
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        if dist.get_rank() == 0:
            keys = list(get_model_state_dict(model).keys())
    """,
    # --- FSDP008 -----------------------------------------------------------------------------
    "fsdp008-eval-helper-before-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        @torch.no_grad()
        def evaluate(model, batches):
            return sum(model(b).mean() for b in batches)
        def main():
            model = Net()
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            baseline = evaluate(model, val_batches)
            optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
            optimizer.step()
    """,
    "fsdp008-generate-before-optimizer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        sample = model.generate(prompt)
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
    """,
    "fsdp008-good-reshard-after-forward-true": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model, reshard_after_forward=True)
        model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-forward-before-sharding": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model(sample)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    # --- FSDP010 -----------------------------------------------------------------------------
    "fsdp010-main-process-from-pretrained": """
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForCausalLM
        if accelerator.is_main_process:
            model = AutoModelForCausalLM.from_pretrained(name)  # expect: FSDP010
        else:
            model = AutoModelForCausalLM.from_config(config)
        fully_shard(model)
    """,
    "fsdp010-trainer-rank-attribute": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model, rank):
                self.rank = rank
                self.model = model
                if self.rank == 0:
                    self.model.load_state_dict(torch.load("init.pt"))  # expect: FSDP010
                fully_shard(self.model)
    """,
    "fsdp010-good-broadcast-after": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        if rank == 0:
            model.load_state_dict(torch.load("init.pt"))
        for param in model.parameters():
            dist.broadcast(param.data, src=0)
        fully_shard(model)
    """,
    "fsdp010-good-all-ranks-load": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model.load_state_dict(torch.load("init.pt", map_location="cpu"))
        fully_shard(model)
    """,
    # --- FSDP011 -----------------------------------------------------------------------------
    "fsdp011-cuda-used-before-device-mesh": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        def main():
            model = Net().cuda()
            mesh = init_device_mesh("cuda", (8,))
            fully_shard(model, mesh=mesh)  # expect: FSDP011
    """,
    "fsdp011-good-test-on-torchs-fsdp-harness": """
        import copy
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.testing._internal.common_fsdp import FSDPTest
        class TestClip(FSDPTest):
            def test_clip(self):
                model = Net()
                ref_model = copy.deepcopy(model).cuda()
                for module in model:
                    fully_shard(module)
                fully_shard(model)
                mesh = init_device_mesh("cuda", (self.world_size,))
    """,
    "fsdp011-test-on-its-own-harness": """
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        class TestClip(unittest.TestCase):
            def test_clip(self):
                torch.distributed.init_process_group("nccl")  # expect: FSDP011
                model = Net().cuda()
                fully_shard(model)
    """,
    "fsdp011-good-device-mesh-selects-device": """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        def main():
            mesh = init_device_mesh("cuda", (8,))
            fully_shard(model.cuda(), mesh=mesh)
    """,
    "fsdp011-good-default-mesh-selects-device": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("nccl")
        model = Net()
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        batch = batch.cuda()
    """,
    "fsdp011-good-device-id": """
        import os
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        fully_shard(model.cuda())
    """,
    "fsdp011-good-mesh-made-elsewhere": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        class Worker:
            def __init__(self, device_mesh):
                dist.init_process_group(backend="cpu:gloo,cuda:nccl")
                self.device_mesh = device_mesh
            def init_model(self):
                model = AutoModelForCausalLM.from_pretrained(path)
                for layer in model.model.layers:
                    fully_shard(layer, mesh=self.device_mesh)
                fully_shard(model, mesh=self.device_mesh)
                model.cuda()
    """,
    "fsdp011-good-gloo": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        fully_shard(model)
    """,
    # --- FSDP014 -----------------------------------------------------------------------------
    "fsdp014-disabled-once-at-start": """
        model.set_requires_gradient_sync(False)  # expect: FSDP014
        for batch in loader:
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
    """,
    "fsdp014-good-reenabled-before-last-backward": """
        for step, batch in enumerate(loader):
            last = (step + 1) % accumulation == 0
            if not last:
                model.set_requires_gradient_sync(False)
            else:
                model.set_requires_gradient_sync(True)
            model(batch).sum().backward()
            if last:
                optimizer.step()
    """,
    "fsdp014-reenabled-only-after-the-step": """
        def train(model, optimizer, loader, accum):
            for i, batch in enumerate(loader):
                model.set_requires_gradient_sync(False)  # expect: FSDP014
                model(batch).mean().backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    model.set_requires_gradient_sync(True)
    """,
    "fsdp014-good-profiler-step-while-disabled": """
        def train(model, optimizer, micro, prof):
            model.set_requires_gradient_sync(False)
            for mb in micro[:-1]:
                model(mb).mean().backward()
                prof.step()
            model.set_requires_gradient_sync(True)
            model(micro[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-no-step-in-file": """
        def freeze_sync(model):
            model.set_requires_gradient_sync(False)
    """,
    # --- FSDP015 -----------------------------------------------------------------------------
    "fsdp015-stale-list-in-trainer": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.params = [p for p in model.parameters() if p.requires_grad]
                fully_shard(self.model)
            def step(self):
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # expect: FSDP015
    """,
    "fsdp015-local-norm-stack": """
        import torch
        norms = [p.grad.to_local().norm() for p in model.parameters() if p.grad is not None]
        total = torch.norm(torch.stack(norms))  # expect: FSDP015
    """,
    "fsdp015-good-generator-after-shard": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        torch.nn.utils.clip_grad_norm_((p for p in model.parameters() if p.grad is not None), 1.0)
    """,
    "fsdp015-good-full-tensor-norm": """
        import torch
        total = torch.sqrt(sum(p.grad.full_tensor().pow(2).sum() for p in model.parameters()))
    """,
    # --- FSDP034 -----------------------------------------------------------------------------
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
    "fsdp021-good-plain-load-in-the-unsharded-arm": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict, StateDictOptions
        def resume(model, optimizer, path):
            state = torch.load(path)
            if isinstance(model, FSDPModule):
                set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
            else:
                optimizer.load_state_dict(state)
        def main(shard):
            model = Net()
            if shard:
                for block in model.blocks:
                    fully_shard(block)
                fully_shard(model)
            optimizer = torch.optim.AdamW(model.parameters())
            resume(model, optimizer, "ckpt.pt")
    """,
    "fsdp021-plain-load-after-an-early-exit-for-wrappers-only": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        def resume(model, optimizer, path):
            if isinstance(model, FSDPModule):
                return
            optimizer.load_state_dict(torch.load(path))
        def resume_any(model, optimizer, path):
            if isinstance(model, DDP):
                return
            optimizer.load_state_dict(torch.load(path))  # expect: FSDP021
        model = Net()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        resume(model, optimizer, "ckpt.pt")
        resume_any(model, optimizer, "ckpt.pt")
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
    "fsdp008-good-reshard-every-fsdp-module": """
        import torch
        from torch.distributed.fsdp import FSDPModule, fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-only-resharded-blocks-after-forward": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        block_optimizer = torch.optim.SGD(model.blocks.parameters(), lr=1e-2)
    """,
    "fsdp008-head-is-in-the-root-group": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        with torch.no_grad():
            model(sample)
        head_optimizer = torch.optim.SGD(model.head.parameters(), lr=1e-3)  # expect: FSDP008
    """,
    "fsdp015-local-grads-total-norm": """
        import torch
        from torch.distributed.fsdp import fully_shard
        from torch.nn.utils import get_total_norm
        def log_norm(model):
            grads = [p.grad.to_local() for p in model.parameters() if p.grad is not None]
            return get_total_norm(grads, norm_type=2.0).item()  # expect: FSDP015
        fully_shard(model)
        log_norm(model)
    """,
    "fsdp021-optimizer-set-by-another-method": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class Trainer:
            def setup(self, model):
                self.model = model
                fully_shard(self.model)
                self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
                self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
            def resume(self, path):
                ckpt = torch.load(path, map_location="cpu")
                self.optimizer.load_state_dict(ckpt["optimizer"])  # expect: FSDP021
                self.scheduler.load_state_dict(ckpt["scheduler"])
    """,
    "fsdp023-policy-in-a-class-attribute": """
        from torch.distributed.fsdp import CPUOffload, fully_shard
        class Strategy:
            offload = CPUOffload(offload_params=True)  # expect: FSDP023
            def setup(self, model):
                fully_shard(model, offload_policy=self.offload)
        Strategy().setup(Net())
    """,
    "fsdp007-gather-in-a-conditional-expression": """
        import torch
        import torch.distributed as dist
        def gather(model):
            return {k: v.full_tensor() for k, v in model.state_dict().items()}
        def save(model, path):
            state = gather(model) if dist.get_rank() == 0 else None  # expect: FSDP007
            if state is not None:
                torch.save(state, path)
    """,
    "fsdp007-good-conditional-expression-on-every-rank": """
        import torch
        import torch.distributed as dist
        def gather(model):
            return {k: v.full_tensor() for k, v in model.state_dict().items()}
        def save(model, path):
            state = gather(model)
            torch.save(state, path) if dist.get_rank() == 0 else None
    """,
    "fsdp021-optimizer-state-from-dict-get": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        checkpoint = {"model": torch.load("model.pt"), "optimizer": torch.load("optim.pt")}
        optimizer_state = checkpoint.get("optimizer")
        if optimizer_state:
            optimizer.load_state_dict(optimizer_state)  # expect: FSDP021
    """,
    "fsdp021-good-dict-get-of-a-missing-key": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters())
        checkpoint = {"model": torch.load("model.pt")}
        optimizer_state = checkpoint.get("optimizer")
        if optimizer_state:
            optimizer.load_state_dict(optimizer_state)
    """,
    "fsdp008-good-root-reshard-after-forward-from-config": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def apply_fsdp(model, mesh, policy: str):
            for block in model.layers:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh, reshard_after_forward=policy != "never")
        apply_fsdp(model, mesh, cfg.policy)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-good-root-keywords-from-config": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block, **cfg.fsdp_kwargs)
        fully_shard(model, **cfg.fsdp_kwargs)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())
    """,
    "fsdp008-root-kept-unsharded-explicitly": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fsdp_kwargs = {"mesh": mesh}
        for block in model.layers:
            fully_shard(block, **fsdp_kwargs)
        fully_shard(model, **fsdp_kwargs, reshard_after_forward=False)
        with torch.no_grad():
            model(sample)
        optimizer = torch.optim.AdamW(model.parameters())  # expect: FSDP008
    """,
    "fsdp011-good-device-id-in-keyword-mapping": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group(**dist_options)
        model = Net().cuda()
        fully_shard(model)
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
    "fsdp015-good-shard-norms-checked-in-assertions": """
        import torch
        from torch.distributed.fsdp import fully_shard
        class ClipTest(FSDPTest):
            def test_clip(self):
                model = Net()
                fully_shard(model)
                model(torch.randn(2, 4)).sum().backward()
                local_grads = [p.grad.to_local().detach().clone() for p in model.parameters()]
                assert all(torch.linalg.vector_norm(g).item() > 1.0 for g in local_grads)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                for param in model.parameters():
                    self.assertLessEqual(torch.linalg.vector_norm(param.grad.to_local()).item(), 1.0)
    """,
    "fsdp015-shard-norm-logged-next-to-an-assertion": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = Net()
        fully_shard(model)
        model(batch).sum().backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.to_local().norm() for p in model.parameters()]))  # expect: FSDP015
        assert norm.isfinite()
        print(f"grad norm {norm.item():.3f}")
    """,
    "fsdp008-good-sequential-root-owns-no-parameters": """
        import torch
        from torch import nn
        from torch.distributed.fsdp import fully_shard
        model = nn.Sequential(*[nn.Linear(4, 4, bias=False) for _ in range(2)])
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        loss = model(inp).sum()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        loss.backward()
        opt.step()
    """,
    "fsdp008-good-roots-sharded-in-a-loop-over-settings": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for norm_type in (2, 1, float("inf")):
            model = Net()
            for module in model.modules():
                if isinstance(module, Block):
                    fully_shard(module)
            fully_shard(model)
            optim = torch.optim.Adam(model.parameters(), lr=1e-2)
            model(inp).sum().backward()
            optim.step()
    """,
    "fsdp008-children-loop-leaves-the-roots-own-parameters": """
        import torch
        from torch.distributed.fsdp import fully_shard
        model = GPT()
        for child in model.children():
            fully_shard(child)
        fully_shard(model)
        loss = model(inp).sum()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)  # expect: FSDP008
        loss.backward()
        opt.step()
    """,
    # --- values named like a rank that do not select ranks ------------------------------------------
    "fsdp007-good-lora-rank-is-a-hyperparameter": """
        import torch.distributed as dist
        class Strategy:
            def __init__(self, cfg):
                self.is_lora = cfg.trainer.policy.model.lora.rank > 0
            def _save_adapters(self, model, path):
                if dist.get_rank() == 0:
                    print("writing", path)
                dist.barrier()
            def save(self, model, path):
                if self.is_lora:
                    self._save_adapters(model, path)
    """,
    "fsdp007-good-optional-rank-given-or-not": """
        import torch.distributed as dist
        def save_model_weights(state_dict, global_rank=None):
            for name, tensor in state_dict.items():
                if global_rank is not None and dist.is_initialized():
                    dist.barrier()
    """,
    "fsdp007-optional-rank-given-and-zero": """
        import torch.distributed as dist
        def save_model_weights(state_dict, global_rank=None):
            if global_rank is not None and global_rank == 0:
                dist.barrier()  # expect: FSDP007
    """,
    # --- gathers only DTensors reach --------------------------------------------------------------
    "fsdp007-good-dtensor-guarded-helper-on-a-plain-reference-model": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor, Replicate
        def make_grads(model):
            for p in model.parameters():
                if not isinstance(p, DTensor):
                    p.grad = torch.ones_like(p)
                    continue
                full = DTensor.from_local(torch.ones(p.shape), p.device_mesh, [Replicate()])
                p.grad = full.redistribute(p.device_mesh, p.placements)
        model = Net()
        fully_shard(model)
        make_grads(model)
        if dist.get_rank() == 0:
            reference = Net()
            make_grads(reference)
    """,
    "fsdp007-dtensor-guarded-helper-on-the-sharded-model": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        def gathered(model):
            return [p.full_tensor() for p in model.parameters() if isinstance(p, DTensor)]
        model = Net()
        fully_shard(model)
        if dist.get_rank() == 0:
            torch.save(gathered(model), "params.pt")  # expect: FSDP007
    """,
    "fsdp007-isinstance-guard-on-the-state-dict-of-a-model-passed-in": """
        import torch
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor
        def save(model, path):
            if dist.get_rank() == 0:
                state = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}  # expect: FSDP007
                torch.save(state, path)
    """,
    "fsdp007-good-hasattr-guard-on-a-full-state-dict": """
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        def _maybe_full(value):
            if hasattr(value, "full_tensor") and callable(getattr(value, "full_tensor")):
                return value.full_tensor()
            return value
        def gather_state_dict(model):
            options = StateDictOptions(full_state_dict=True, cpu_offload=True)
            full = dict(get_model_state_dict(model, options=options))
            if dist.get_rank() != 0:
                return {}
            return {k: _maybe_full(v) for k, v in full.items()}
    """,
    "fsdp007-isinstance-guard-on-a-sharded-state-dict": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        model = Net()
        fully_shard(model)
        if dist.get_rank() == 0:
            state = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}  # expect: FSDP007
            torch.save(state, "model.pt")
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
    # --- module.apply(fn) and arms a constant decides ---------------------------------------------
    "fsdp034-good-blocks-sharded-through-apply-with-a-lambda": """
        import torch
        from torch.distributed.fsdp import fully_shard
        def main(model):
            model.apply(lambda m: fully_shard(m) if isinstance(m, TransformerBlock) else None)
            fully_shard(model)
            return torch.optim.AdamW(model.parameters())
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
    "fsdp023-good-helper-called-with-the-fsdp2-algorithm": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        def get_policy(algo):
            if algo == 1:
                return MixedPrecision(param_dtype=torch.bfloat16)
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        def wrap(model):
            fully_shard(model, mp_policy=get_policy(2))
            return model
    """,
    "fsdp023-helper-called-with-the-fsdp1-algorithm": """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard
        def get_policy(algo):
            if algo == 1:
                return MixedPrecision(param_dtype=torch.bfloat16)  # expect: FSDP023
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16)
        def wrap(model):
            fully_shard(model, mp_policy=get_policy(1))
            return model
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
    "fsdp007-barrier-after-an-elif-that-returns-on-other-ranks": """
        import torch.distributed as dist
        def save(model, rank, fast):
            if fast:
                print("fast")
            elif rank != 0:
                return
            dist.barrier()
    """,
    # --- code a test runs to watch it fail ------------------------------------------------------
    "fsdp007-test-expects-the-barrier-to-time-out": """
        import torch.distributed as dist
        class BarrierTest(TestCase):
            def test_barrier_timeout(self):
                if dist.get_rank() == 0:
                    if dist.get_debug_level() == dist.DebugLevel.DETAIL:
                        expected = self.assertRaisesRegex(Exception, "monitoredBarrier")
                    else:
                        expected = self.assertRaisesRegex(Exception, "Timed out")
                    with expected:
                        dist.barrier()
                    with self.assertRaises(RuntimeError):
                        dist.monitored_barrier()
                    dist.barrier()  # expect: FSDP007
    """,
    "fsdp003-test-expects-forward-to-fail": """
        import pytest
        from torch.distributed.fsdp import fully_shard
        def test_forward_without_hooks_fails():
            model = Net()
            fully_shard(model)
            with pytest.raises(RuntimeError, match="size mismatch"):
                model.forward(torch.randn(2, 8))
            with open("log.txt") as log:
                model.forward(torch.randn(2, 8))  # expect: FSDP003
    """,
}


RULES = {rule.code: rule for rule in all_rules()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name):
    source = textwrap.dedent(CASES[name])
    rule = RULES[name.split("-", 1)[0].upper()]
    got = sorted((d.line, d.code) for d in lint_source(source.encode(), "example.py", [rule]))
    assert got == expected_diagnostics(source)
