"""Style cases for FSDP012: code written in styles the fixtures do not use."""

CASES = {
    "fsdp012-probe-forward-under-a-setting-near-miss": """
        from torch.distributed.fsdp import fully_shard
        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        for step, batch in enumerate(loader):
            if args.probe_freq is not None and step % args.probe_freq == 0:
                model(batch[:1]).sum().backward()  # a probe on every rank: the setting is everyone's
                optimizer.zero_grad()
            if train_cfg.eval_every is not None:
                model.layers[0](batch)
            model(batch).sum().backward()
            optimizer.step()
    """,
    "fsdp012-vision-tower-run-when-pixels-are-there-and-a-setting-allows": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids, pixel_values=None):
                embeds = self.language_model.embed(input_ids)
                if model_args.vision_tower is not None and pixel_values is not None:  # expect: FSDP012
                    embeds = embeds + self.vision_tower(pixel_values)
                return self.language_model(embeds)

        model = Llava()
        fully_shard(model.vision_tower)
        fully_shard(model)
        for batch in loader:
            model(batch["input_ids"], batch.get("pixel_values")).sum().backward()
    """,
    "fsdp012-math-isnan-of-item-break": """
        import math
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            out = model(batch)
            loss = criterion(out, batch)
            if math.isnan(loss.item()):  # expect: FSDP012
                break
            loss.backward()
    """,
    "fsdp012-loss-spike-threshold": """
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        for step, batch in enumerate(loader):
            loss = model(batch).mean()
            if loss.item() > 10 * running_loss:  # expect: FSDP012
                print("spike, skipping")
                continue
            loss.backward()
            opt.step()
    """,
    "fsdp012-flag-all-reduced-near-miss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            skip = torch.tensor(float(not torch.isfinite(loss)))
            dist.all_reduce(skip, op=dist.ReduceOp.MAX)
            if skip.item() > 0:
                continue
            loss.backward()
    """,
    "fsdp012-raise-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            if not torch.isfinite(loss):
                raise FloatingPointError("loss is not finite")
            loss.backward()
    """,
    "fsdp012-unsharded-model-near-miss": """
        import torch
        for batch in loader:
            loss = model(batch).mean()
            if torch.isnan(loss):
                continue
            loss.backward()
    """,
    "fsdp012-global-step-tensor-near-miss": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            if global_step.item() >= max_steps:
                break
            loss.backward()
    """,
    "fsdp012-batch-none-continue-before-forward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for step in range(num_steps):
            batch = next(data_iter, None)
            if batch is None:  # expect: FSDP012
                continue
            loss = model(**batch).loss
            loss.backward()
            opt.step()
    """,
    "fsdp012-not-batch-or-len-zero": """
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        for batch in loader:
            if not batch or len(batch["input_ids"]) == 0:  # expect: FSDP012
                continue
            out = model(batch["input_ids"])
            out.sum().backward()
    """,
    "fsdp012-step-method-shape-zero-return": """
        from torch.distributed.fsdp import fully_shard

        class Trainer:
            def __init__(self, model):
                fully_shard(model)
                self.model = model

            def step(self, x, y):
                if x.shape[0] == 0:  # expect: FSDP012
                    return None
                loss = (self.model(x) - y).pow(2).mean()
                loss.backward()
                return loss
    """,
    "fsdp012-numel-between-forward-and-backward": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for tok, mask in loader:
            logits = model(tok)
            picked = logits[mask]
            if picked.numel() == 0:  # expect: FSDP012
                continue
            picked.sum().backward()
    """,
    "fsdp012-empty-batch-flag-agreed-near-miss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            n = torch.tensor(0 if batch is None else len(batch))
            dist.all_reduce(n, op=dist.ReduceOp.MIN)
            if batch is None or n.item() == 0:
                continue
            model(batch).sum().backward()
    """,
    "fsdp012-end-of-data-break-near-miss": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        while True:
            batch = next(data_iter, None)
            if batch is None:
                break
            model(batch).sum().backward()
    """,
    "fsdp012-empty-batch-skip-after-backward-near-miss": """
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).sum()
            loss.backward()
            if scheduler is None:
                continue
            scheduler.step()
    """,
    "fsdp012-empty-batch-unsharded-near-miss": """
        for batch in loader:
            if batch is None:
                continue
            model(batch).sum().backward()
    """,
    "fsdp012-vision-tower-sharded-alone-run-with-pixels": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids, pixel_values=None):
                embeds = self.language_model.embed(input_ids)
                if pixel_values is not None:  # expect: FSDP012
                    embeds = embeds + self.vision_tower(pixel_values)
                return self.language_model(embeds)

        model = Llava()
        fully_shard(model.vision_tower)
        fully_shard(model)
        for batch in loader:
            model(batch["input_ids"], batch.get("pixel_values")).sum().backward()
    """,
    "fsdp012-expert-blocks-sharded-run-when-routed": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class MoE(nn.Module):
            def __init__(self):
                super().__init__()
                self.experts = nn.ModuleList(Expert() for _ in range(4))

            def forward(self, x, routes):
                out = x
                for i, expert in enumerate(self.experts):
                    tokens = x[routes == i]
                    if tokens.numel() > 0:  # expect: FSDP012
                        out = out + expert(tokens).sum()
                return out

        model = MoE()
        for expert in model.experts:
            fully_shard(expert)
        fully_shard(model)
        for x, routes in loader:
            model(x, routes).sum().backward()
    """,
    "fsdp012-base-and-drafter-after-validation-raises-near-miss": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class WithDrafter(nn.Module):
            def __init__(self):
                super().__init__()
                self.base = LanguageModel()
                self.drafter = Drafter()

            def forward(self, input_ids=None, **kwargs):
                out = self.base(input_ids, output_hidden_states=True, **kwargs)
                hidden = getattr(out, "hidden_states", None)
                if hidden is None:
                    raise RuntimeError("the base returned no hidden states")
                cache = out.get("shared_kv")
                if cache is None: raise ValueError("no shared KV states")
                if input_ids is not None:
                    ids = input_ids
                else:
                    raise ValueError("the drafter needs input_ids")
                return self.drafter(ids, hidden[-1], cache)

        model = WithDrafter()
        fully_shard(model.base)
        fully_shard(model.drafter)
        for batch in loader:
            model(input_ids=batch["input_ids"]).logits.sum().backward()
    """,
    "fsdp012-vision-tower-after-early-return-on-text-only": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids, pixel_values=None):
                embeds = self.language_model.embed(input_ids)
                if pixel_values is None:  # expect: FSDP012
                    return self.language_model(embeds)
                return self.language_model(embeds + self.vision_tower(pixel_values))

        model = Llava()
        fully_shard(model.vision_tower)
        fully_shard(model)
        for batch in loader:
            model(batch["input_ids"], batch.get("pixel_values")).sum().backward()
    """,
    "fsdp012-hooks-fetched-by-getattr-while-sharding-near-miss": """
        from torch.distributed.fsdp import fully_shard

        def bind_groups(block, mesh):
            group = mesh.get_group()
            for sub in block.modules():
                setter = getattr(sub, "set_param_sync_group", None)
                if setter is not None:
                    setter(group)

        def shard(model, mesh):
            for layer in model.layers:
                fully_shard(layer, mesh=mesh)
                bind_groups(layer, mesh)
            fully_shard(model, mesh=mesh)

        class Trainer:
            def __init__(self, model, mesh):
                self.model = model
                shard(model, mesh)
                for child in model.children():
                    hook = getattr(child, "on_sharded", None)
                    if hook is not None:
                        hook(mesh)

            def fit(self, loader):
                for batch in loader:
                    self.model(batch).sum().backward()
    """,
    "fsdp012-library-tower-fetched-by-getattr-run-with-pixels": """
        from torch.distributed.fsdp import fully_shard
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained("some/vlm")
        fully_shard(model.vision_tower)
        fully_shard(model)
        tower = getattr(model, "vision_tower")
        for batch in loader:
            out = model(batch["input_ids"]).logits.sum()
            pixel_values = batch.get("pixel_values")
            if pixel_values is not None:  # expect: FSDP012
                out = out + tower(pixel_values).sum()
            out.backward()
    """,
    "fsdp012-vision-tower-text-only-caller-near-miss": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids=None, *, inputs_embeds=None, pixel_values=None):
                if inputs_embeds is None:
                    inputs_embeds = self.language_model.embed(input_ids)
                image = self.vision_tower(pixel_values) if pixel_values is not None else None
                if pixel_values is not None:
                    inputs_embeds = inputs_embeds + image
                return self.language_model(inputs_embeds)

        def train(model, loader):
            for batch in loader:
                model(batch["input_ids"]).sum().backward()

        model = Llava()
        fully_shard(model.vision_tower)
        fully_shard(model.language_model.embed)
        fully_shard(model)
        train(model, loader)
    """,
    "fsdp012-vision-tower-dummy-input-near-miss": """
        import torch
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids, pixel_values=None):
                embeds = self.language_model.embed(input_ids)
                has_images = pixel_values is not None
                if not has_images:
                    pixel_values = torch.zeros(1, 3, 224, 224)
                embeds = embeds + self.vision_tower(pixel_values) * float(has_images)
                return self.language_model(embeds)

        model = Llava()
        fully_shard(model.vision_tower)
        fully_shard(model)
        for batch in loader:
            model(batch["input_ids"], batch.get("pixel_values")).sum().backward()
    """,
    "fsdp012-vision-tower-config-flag-near-miss": """
        import torch.nn as nn
        from torch.distributed.fsdp import fully_shard

        class Llava(nn.Module):
            def __init__(self, use_vision):
                super().__init__()
                self.use_vision = use_vision
                self.vision_tower = VisionTower()
                self.language_model = LanguageModel()

            def forward(self, input_ids, pixel_values):
                embeds = self.language_model.embed(input_ids)
                if self.use_vision:
                    embeds = embeds + self.vision_tower(pixel_values)
                return self.language_model(embeds)

        model = Llava(cfg.use_vision)
        fully_shard(model.vision_tower)
        fully_shard(model)
        for batch in loader:
            model(batch["input_ids"], batch["pixel_values"]).sum().backward()
    """,
    "fsdp012-vision-tower-no-backward-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model.vision_tower)
        fully_shard(model)
        with torch.no_grad():
            for batch in loader:
                if batch.get("pixel_values") is not None:
                    feats = model.vision_tower(batch["pixel_values"])
    """,
    "fsdp012-trainer-packs-by-tokens-method": """
        import torch
        from torch.distributed.fsdp import fully_shard

        class Trainer:
            def __init__(self, model, max_tokens):
                fully_shard(model)
                self.model = model
                self.max_tokens = max_tokens

            def _pack(self, seqs):
                batches, current, used = [], [], 0
                for seq in seqs:
                    n = len(seq)
                    if current and used + n > self.max_tokens:
                        batches.append(current)
                        current, used = [], 0
                    current.append(seq)
                    used += n
                return batches + [current]

            def train_step(self, batch):
                for mb in self._pack(batch["input_ids"]):  # expect: FSDP012
                    loss = self.model(torch.cat(mb)).mean()
                    loss.backward()
    """,
    "fsdp012-ceil-of-token-total-range": """
        import math
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            local_tokens = batch["attention_mask"].sum().item()
            num_micro = math.ceil(local_tokens / max_tokens_per_mb)
            for i in range(num_micro):  # expect: FSDP012
                mb = {k: v[i::num_micro] for k, v in batch.items()}
                model(**mb).loss.backward()
            opt.step()
    """,
    "fsdp012-count-helper-in-the-loop": """
        from torch.distributed.fsdp import fully_shard

        def num_micro_batches(seq_lens, budget):
            return -(-sum(seq_lens) // budget)

        def train_step(model, batch, budget):
            n = num_micro_batches(batch["seq_lens"], budget)
            for i in range(n):  # expect: FSDP012
                model(batch["input_ids"][i::n]).sum().backward()

        fully_shard(model)
        for batch in loader:
            train_step(model, batch, 4096)
    """,
    "fsdp012-inline-packing-generator-helper": """
        from torch.distributed.fsdp import fully_shard

        def split_by_tokens(samples, max_tokens):
            bucket, tokens = [], 0
            for sample in samples:
                if tokens + sample["input_ids"].numel() >= max_tokens:
                    yield bucket
                    bucket, tokens = [], 0
                bucket.append(sample)
                tokens += sample["input_ids"].numel()
            yield bucket

        fully_shard(model)
        for step, local_batch in enumerate(loader):
            for mb in split_by_tokens(local_batch, 8192):  # expect: FSDP012
                loss = model(collate(mb)).loss
                loss.backward()
            opt.step()
    """,
    "fsdp012-fixed-chunks-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            for mb in batch.chunk(4):
                model(mb).sum().backward()
            for mb in torch.split(batch, mb_size):
                model(mb).sum().backward()
            for i in range(grad_accum_steps):
                model(batch[i::grad_accum_steps]).sum().backward()
            opt.step()
    """,
    "fsdp012-pack-by-sample-count-near-miss": """
        import math
        from torch.distributed.fsdp import fully_shard

        def pack(samples, mb_size):
            batches, current = [], []
            for sample in samples:
                if len(current) + 1 > mb_size:
                    batches.append(current)
                    current = []
                current.append(sample)
            return batches + [current]

        fully_shard(model)
        for batch in loader:
            for mb in pack(batch, 4):
                model(collate(mb)).sum().backward()
            for i in range(math.ceil(len(batch) / mb_size)):
                model(batch[i * mb_size:(i + 1) * mb_size]).sum().backward()
    """,
    "fsdp012-token-count-all-reduced-max-near-miss": """
        import math
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            num_micro = torch.tensor(math.ceil(batch["attention_mask"].sum().item() / max_tokens))
            dist.all_reduce(num_micro, op=dist.ReduceOp.MAX)
            for i in range(int(num_micro)):
                model(batch["input_ids"][i::int(num_micro)]).sum().backward()
    """,
    "fsdp012-token-packing-ddp-near-miss": """
        from torch.nn.parallel import DistributedDataParallel as DDP

        def split_by_tokens(samples, max_tokens):
            bucket, tokens = [], 0
            for sample in samples:
                if tokens + len(sample) > max_tokens:
                    yield bucket
                    bucket, tokens = [], 0
                bucket.append(sample)
                tokens += len(sample)
            yield bucket

        model = DDP(model)
        for local_batch in loader:
            for mb in split_by_tokens(local_batch, 8192):
                model(collate(mb)).sum().backward()
    """,
    "fsdp012-first-fit-count-helper": """
        from torch.distributed.fsdp import fully_shard

        def get_minimum_num_micro_batch_size(total_lengths, max_tokens_per_gpu):
            batches = []
            for l in total_lengths:
                for i in range(len(batches)):
                    if batches[i] + l <= max_tokens_per_gpu:
                        batches[i] += l
                        break
                else:
                    batches.append(l)
            return len(batches)

        class Actor:
            def __init__(self, model):
                fully_shard(model)
                self.model = model

            def train(self, rollout):
                num_microbatches = get_minimum_num_micro_batch_size(rollout["total_lengths"], 8192)
                for i in range(num_microbatches):  # expect: FSDP012
                    self.model(rollout["tokens"][i]).loss.backward()
    """,
    "fsdp012-first-fit-count-all-reduced-near-miss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        def get_minimum_num_micro_batch_size(total_lengths, max_tokens_per_gpu):
            batches = []
            for l in total_lengths:
                for i in range(len(batches)):
                    if batches[i] + l <= max_tokens_per_gpu:
                        batches[i] += l
                        break
                else:
                    batches.append(l)
            return len(batches)

        class Actor:
            def __init__(self, model, dp_group):
                fully_shard(model)
                self.model = model
                self.dp_group = dp_group

            def train(self, rollout):
                num_microbatches = torch.tensor(get_minimum_num_micro_batch_size(rollout["total_lengths"], 8192))
                dist.all_reduce(num_microbatches, op=dist.ReduceOp.MAX, group=self.dp_group)
                for i in range(num_microbatches.item()):
                    self.model(rollout["tokens"][i]).loss.backward()
    """,
    "fsdp012-split-into-packed-sizes": """
        import torch
        from torch.distributed.fsdp import fully_shard

        def token_budget_sizes(seq_lens, max_tokens):
            sizes, count, tokens = [], 0, 0
            for n in seq_lens:
                if count and tokens + n > max_tokens:
                    sizes.append(count)
                    count, tokens = 0, 0
                count += 1
                tokens += n
            return sizes + [count]

        fully_shard(model)
        for batch in loader:
            sizes = token_budget_sizes(batch["seq_lens"].tolist(), 8192)
            for mb in torch.split(batch["input_ids"], sizes):  # expect: FSDP012
                model(mb).sum().backward()
            for mb in batch["input_ids"].split([len(g) for g in batch["groups"]]):
                model(mb).sum().backward()
    """,
    "fsdp012-packer-returns-a-tuple": """
        from torch.distributed.fsdp import fully_shard

        def rearrange_micro_batches(batch, max_token_len):
            seq_lens = batch["attention_mask"].sum(dim=1).tolist()
            micro_batches, indices, tokens, current = [], [], 0, []
            for i, n in enumerate(seq_lens):
                if current and tokens + seq_lens[i] > max_token_len:
                    micro_batches.append([batch[j] for j in current])
                    indices.append(current)
                    current, tokens = [], 0
                current.append(i)
                tokens += seq_lens[i]
            return micro_batches, indices

        class Actor:
            def __init__(self, module):
                fully_shard(module)
                self.actor_module = module

            def update_policy(self, data):
                micro_batches, _ = rearrange_micro_batches(data, max_token_len=16384)
                for micro_batch in micro_batches:  # expect: FSDP012
                    self.actor_module(**micro_batch).logits.mean().backward()
    """,
    "fsdp012-decode-loop-eos-break": """
        import torch
        from torch.distributed.fsdp import fully_shard
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
        ids = tokenizer(prompts[rank], return_tensors="pt").input_ids
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model(ids)
                nxt = logits[:, -1].argmax(-1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                if (nxt == tokenizer.eos_token_id).all():  # expect: FSDP012
                    break
    """,
    "fsdp012-sampler-while-not-done": """
        import torch
        from torch.distributed.fsdp import fully_shard

        class Sampler:
            def __init__(self, model, eos_id):
                self.model = model
                self.eos_id = eos_id

            @torch.inference_mode()
            def sample(self, input_ids, temperature=1.0):
                done = False
                while not done:  # expect: FSDP012
                    out = self.model(input_ids=input_ids)
                    probs = torch.softmax(out.logits[:, -1] / temperature, dim=-1)
                    next_tok = torch.multinomial(probs, 1)
                    input_ids = torch.cat([input_ids, next_tok], dim=-1)
                    done = bool((next_tok == self.eos_id).all())
                return input_ids

        fully_shard(policy)
        rollouts = Sampler(policy, eos_id=2).sample(batch["input_ids"])
    """,
    "fsdp012-generate-helper-finished-mask-return": """
        import torch
        from torch.distributed.fsdp import fully_shard

        def greedy_generate(model, ids, eos, max_len):
            finished = torch.zeros(ids.size(0), dtype=torch.bool)
            for _ in range(max_len):
                step_logits = model(ids).logits[:, -1, :]
                tok = step_logits.argmax(dim=-1)
                finished |= tok == eos
                ids = torch.cat((ids, tok.unsqueeze(1)), dim=1)
                if finished.all():  # expect: FSDP012
                    return ids
            return ids

        for block in lm.transformer.h:
            fully_shard(block)
        fully_shard(lm)
        samples = greedy_generate(lm, prompt_ids, eos=tokenizer.eos_token_id, max_len=64)
    """,
    "fsdp012-early-stop-on-local-loss-after-backward": """
        import math
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            if not math.isfinite(loss.item()):
                continue
            if loss.item() < target_loss:  # expect: FSDP012
                break
    """,
    "fsdp012-early-stop-on-all-reduced-loss-near-miss": """
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        for batch in loader:
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
            if mean_loss.item() < target_loss:
                break
    """,
    "fsdp012-hf-generate-synced-gpus-false": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        out = model.generate(**inputs, max_new_tokens=128, synced_gpus=False)  # expect: FSDP012
    """,
    "fsdp012-hf-generate-layers-only-sharded": """
        import transformers
        from torch.distributed.fsdp import fully_shard
        lm = transformers.AutoModelForCausalLM.from_pretrained(path)
        for block in lm.model.layers:
            fully_shard(block)
        with torch.no_grad():
            seqs = lm.generate(input_ids, attention_mask=mask, synced_gpus=False)  # expect: FSDP012
    """,
    "fsdp012-trainer-rollout-generate-synced-gpus-false": """
        from torch.distributed.fsdp import fully_shard

        class RolloutWorker:
            def __init__(self, policy):
                fully_shard(policy)
                self.policy = policy

            def rollout(self, batch):
                return self.policy.generate(  # expect: FSDP012
                    input_ids=batch["input_ids"],
                    do_sample=True,
                    synced_gpus=False,
                )
    """,
    "fsdp012-hf-generate-synced-gpus-default-near-miss": """
        from transformers import AutoModelForCausalLM
        from torch.distributed.fsdp import fully_shard
        model = AutoModelForCausalLM.from_pretrained(name)
        fully_shard(model)
        a = model.generate(**inputs, max_new_tokens=128)
        b = model.generate(**inputs, max_new_tokens=128, synced_gpus=True)
    """,
    "fsdp012-hf-generate-unsharded-near-miss": """
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(name).eval()
        out = model.generate(**inputs, max_new_tokens=128, synced_gpus=False)
    """,
    "fsdp012-decode-done-all-reduced-near-miss": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        done = torch.zeros(ids.shape[0], dtype=torch.bool)
        with torch.no_grad():
            while True:
                nxt = model(ids)[:, -1].argmax(-1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                done |= nxt == eos
                all_done = done.all().float()
                dist.all_reduce(all_done, op=dist.ReduceOp.MIN)
                if all_done.item() == 1.0:
                    break
    """,
    "fsdp012-decode-fixed-count-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)

        @torch.no_grad()
        def decode(model, ids, steps):
            for _ in range(steps):
                nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
            return ids

        out = decode(model, prompt_ids, steps=cfg.max_new_tokens)
    """,
    "fsdp012-decode-unsharded-near-miss": """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp_model = DDP(model)
        with torch.no_grad():
            for _ in range(max_new):
                nxt = ddp_model(ids)[:, -1].argmax(-1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                if (nxt == eos).all():
                    break
    """,
    "fsdp012-decode-stop-on-setting-near-miss": """
        import torch
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        step = 0
        with torch.no_grad():
            while ids.shape[1] < cfg.max_len:
                nxt = model(ids)[:, -1].argmax(-1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                step += 1
                if step >= cfg.max_new:
                    break
    """,
    "fsdp012-good-loop-walking-wrappers-through-a-getattr-method": """
        import torch
        from torch.distributed.fsdp import fully_shard

        def loss_host(model):
            visited = set()
            cur = model
            while cur is not None and id(cur) not in visited:
                visited.add(id(cur))
                get_base_model = getattr(cur, "get_base_model", None)
                nxt = get_base_model() if callable(get_base_model) else None
                if isinstance(nxt, torch.nn.Module) and nxt is not cur:
                    cur = nxt
                    continue
                break
            return cur

        for module in model.modules():
            if isinstance(module, Block):
                fully_shard(module)
        fully_shard(model)
        host = loss_host(model)
        optimizer = torch.optim.AdamW(model.parameters())
        for batch in loader:
            model(batch).sum().backward()
            optimizer.step()
    """,
    "fsdp012-decode-loop-through-a-getattr-sharded-decoder": """
        import torch
        from torch.distributed.fsdp import fully_shard

        fully_shard(model.decoder)
        fully_shard(model)
        decode = getattr(model, "decoder")
        tokens = prompt
        while True:
            nxt = decode(tokens).argmax(-1)
            tokens = torch.cat([tokens, nxt], -1)
            if (nxt == eos).all():  # expect: FSDP012
                break
    """,
}
