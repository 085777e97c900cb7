"""Style cases for FSDP007: code written in styles the fixtures do not use."""


def _printer_fallback(accelerator: str, mark: str = "") -> str:
    """A data helper that broadcasts what rank 0 loaded unless it was given its own stand-in for
    an accelerator (ModelOpt's ``create_validation_dataloader``), called on rank 0 only."""
    return f"""
        import torch.distributed as dist
        class Printer:
            is_main_process = True
        class QuietPrinter(Printer):
            pass
        class Recorder:
            is_main_process = True
        def make_data(accelerator=None):
            if accelerator is None:
                accelerator = Printer()
            data = [1, 2, 3] if accelerator.is_main_process else None
            if not isinstance(accelerator, Printer):
                objects = [data]
                dist.broadcast_object_list(objects)
                data = objects[0]
            return data
        data = make_data({accelerator}) if dist.get_rank() == 0 else None{mark}
    """


def _serving(*handler: str, mark: str = "") -> str:
    """A serving class: the other ranks wait in `generate_other_ranks` for rank 0's broadcast, which
    the request handler (given a serving framework on rank 0, never called by the file) runs."""
    body = "\n                ".join(handler)
    return f"""
        import torch
        import torch.distributed as dist
        class Deployable:
            def __init__(self, model):
                self.model = model
            def triton_infer_fn(self, **inputs):
                {body}
                return self.model(inputs["prompts"])
            def generate_other_ranks(self):
                while True:
                    message = torch.empty(1, dtype=torch.long)
                    dist.broadcast(message, src=0)
                    if message == 0:
                        self.model(None)
                    else:
                        return
        def serve(model, server):
            deployable = Deployable(model)
            if dist.get_rank() == 0:
                server.bind(infer_func=deployable.triton_infer_fn)
                server.serve()
                server.stop()
            else:
                deployable.generate_other_ranks(){mark}
    """


# A helper that syncs only when told to, resolving its default with a conditional expression.
_FINISH = """
        import os
        import torch.distributed as dist
        SYNC_BY_DEFAULT = False
        def finish(path, sync=None):
            do_sync = SYNC_BY_DEFAULT if sync is None else sync
            if do_sync:
                dist.barrier()
            os.remove(path)
"""

CASES = {
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
    "fsdp007-good-main-process-first-try-finally": """
        import torch.distributed as dist
        from contextlib import contextmanager
        @contextmanager
        def main_process_first(local_rank):
            try:
                if local_rank != 0:
                    dist.barrier()
                yield
            finally:
                if local_rank == 0:
                    dist.barrier()
        def prepare(local_rank):
            with main_process_first(local_rank):
                download()
    """,
    "fsdp007-good-main-process-first-if-else": """
        import torch.distributed as dist
        from contextlib import contextmanager
        @contextmanager
        def main_process_first(is_main):
            if is_main:
                yield
                dist.barrier()
            else:
                dist.barrier()
                yield
        with main_process_first(dist.get_rank() == 0):
            prepare_data()
    """,
    # --- collective pairs split across methods: `__enter__`/`__exit__`, the two halves of a protocol --
    "fsdp007-good-rank-zero-first-class": """
        import torch.distributed as dist
        class RankZeroFirst:
            def __enter__(self):
                if dist.get_rank() != 0:
                    dist.barrier()  # the other ranks wait here
            def __exit__(self, *exc):
                if dist.get_rank() == 0:
                    dist.barrier()  # rank 0 joins after doing the work
        def main(model):
            with RankZeroFirst():
                download()
    """,
    "fsdp007-good-local-zero-first-class-entered-through-a-variable": """
        import torch.distributed as dist
        class LocalZeroFirst:
            def __init__(self, local_rank):
                self.local_rank = local_rank
            def __enter__(self):
                if self.local_rank not in (-1, 0):
                    dist.barrier(device_ids=[self.local_rank])
                return self
            def __exit__(self, exc_type, exc, tb):
                if self.local_rank == 0:
                    dist.barrier(device_ids=[0])
                return False
        first = LocalZeroFirst(args.local_rank)
        with first as guard:
            dataset = load_dataset(args.data)
    """,
    "fsdp007-good-main-process-first-class-used-in-another-file": """
        import torch.distributed as dist
        def is_main_process():
            return dist.get_rank() == 0
        class MainProcessFirst:
            def __enter__(self):
                if not is_main_process():
                    dist.barrier()
                return self
            def __exit__(self, exc_type, exc, tb):
                if is_main_process():
                    dist.barrier()
    """,
    "fsdp007-good-async-rank-zero-first": """
        import torch.distributed as dist
        class RankZeroFirst:
            def __init__(self, rank):
                self.rank = rank
            async def __aenter__(self):
                if self.rank != 0:
                    dist.barrier()
            async def __aexit__(self, exc_type, exc, tb):
                if self.rank == 0:
                    dist.barrier()
        async def prepare():
            async with RankZeroFirst(dist.get_rank()):
                await download()
    """,
    "fsdp007-good-zero-first-generator-with-a-rank-helper": """
        import torch.distributed as dist
        from contextlib import contextmanager
        def is_main_process():
            return not dist.is_initialized() or dist.get_rank() == 0
        @contextmanager
        def torch_distributed_zero_first():
            if not is_main_process():
                dist.barrier()
            yield
            if is_main_process():
                dist.barrier()
        with torch_distributed_zero_first():
            dataset = build_dataset()
    """,
    "fsdp007-good-leader-and-worker-halves-on-one-path": """
        import torch.distributed as dist
        class PlanChannel:
            def __init__(self):
                self.rank = dist.get_rank()
            def publish(self, plan):
                if self.rank == 0:
                    dist.broadcast_object_list([plan], src=0)
            def receive(self, plan):
                box = [plan]
                if self.rank != 0:
                    dist.broadcast_object_list(box, src=0)
                return box[0]
        def agree(plan):
            channel = PlanChannel()
            channel.publish(plan)
            return channel.receive(plan)
    """,
    "fsdp007-good-leader-and-worker-halves-called-from-another-file": """
        import torch.distributed as dist
        class PlanChannel:
            def __init__(self):
                self.rank = dist.get_rank()
            def publish(self, plan):
                if self.rank == 0:
                    dist.broadcast_object_list([plan], src=0)
            def receive(self):
                box = [None]
                if self.rank != 0:
                    dist.broadcast_object_list(box, src=0)
                return box[0]
    """,
    "fsdp007-class-enter-and-exit-wait-on-the-same-ranks": """
        import torch.distributed as dist
        class RankZeroFirst:
            def __enter__(self):
                if dist.get_rank() != 0:
                    dist.barrier()  # expect: FSDP007
            def __exit__(self, *exc):
                if dist.get_rank() != 0:  # the same ranks again: rank 0 never enters a barrier
                    dist.barrier()  # expect: FSDP007
        def main(model):
            with RankZeroFirst():
                download()
    """,
    "fsdp007-class-exit-without-the-partner-barrier": """
        import torch.distributed as dist
        class LocalZeroFirst:
            def __init__(self, local_rank):
                self.local_rank = local_rank
            def __enter__(self):
                if self.local_rank != 0:
                    dist.barrier()  # expect: FSDP007
                return self
            def __exit__(self, exc_type, exc, tb):
                return False
        with LocalZeroFirst(local_rank):
            dataset = load_dataset()
    """,
    "fsdp007-class-exit-runs-another-collective": """
        import torch.distributed as dist
        class RankZeroFirst:
            def __enter__(self):
                if dist.get_rank() != 0:
                    dist.barrier()  # expect: FSDP007
            def __exit__(self, *exc):
                if dist.get_rank() == 0:
                    dist.all_reduce(done)  # expect: FSDP007
    """,
    "fsdp007-leader-half-run-without-the-worker-half": """
        import torch.distributed as dist
        class PlanChannel:
            def __init__(self):
                self.rank = dist.get_rank()
            def publish(self, plan):
                if self.rank == 0:
                    dist.broadcast_object_list([plan], src=0)  # expect: FSDP007
            def receive(self):
                box = [None]
                if self.rank != 0:
                    dist.broadcast_object_list(box, src=0)  # expect: FSDP007
                return box[0]
        def main(plan):
            channel = PlanChannel()
            channel.publish(plan)  # the other ranks never call receive()
    """,
    "fsdp007-halves-of-a-protocol-in-two-tests": """
        import torch.distributed as dist
        class BroadcastTest(TestCase):
            def test_leader(self):
                if dist.get_rank() == 0:
                    dist.broadcast_object_list([1], src=0)  # expect: FSDP007
            def test_worker(self):
                if dist.get_rank() != 0:
                    dist.broadcast_object_list([None], src=0)  # expect: FSDP007
    """,
    "fsdp007-good-main-process-first-class": """
        import torch.distributed as dist
        class MainProcessFirst:
            def __enter__(self):
                if dist.get_rank() != 0:
                    dist.barrier()
                return self
            def __exit__(self, *exc):
                if dist.get_rank() == 0:
                    dist.barrier()
        class Trainer:
            def prepare(self):
                with MainProcessFirst():
                    download()
    """,
    "fsdp007-main-process-first-class-that-never-releases": """
        import torch.distributed as dist
        class MainProcessFirst:
            def __enter__(self):
                if dist.get_rank() != 0:
                    dist.barrier()  # expect: FSDP007
            def __exit__(self, *exc):
                return False
        def prepare():
            with MainProcessFirst():
                download()
    """,
    # `isinstance` of an object built from a project class is decided from the class and its bases.
    "fsdp007-good-printer-given": _printer_fallback("Printer()"),
    "fsdp007-good-printer-given-none": _printer_fallback("accelerator=None"),
    "fsdp007-good-printer-subclass": _printer_fallback("QuietPrinter()"),
    "fsdp007-another-project-class-broadcasts": _printer_fallback("Recorder()", "  # expect: FSDP007"),
    "fsdp007-library-accelerator-broadcasts": _printer_fallback("accelerator", "  # expect: FSDP007"),
    "fsdp007-rank-unpacked-from-a-helper-s-result": """
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from mylib import get_dist_info
        def save(model, path):
            rank, world_size = get_dist_info()
            if rank == 0:
                state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))  # expect: FSDP007
                torch.save(state, path)
    """,
    "fsdp007-good-a-numbered-part-not-named-like-a-rank": """
        import torch
        import torch.distributed as dist
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from mylib import get_paths
        def save(model):
            path, backup = get_paths()
            if path:
                state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
                torch.save(state, path)
    """,
    "fsdp007-good-worker-loop-fed-by-a-request-handler": _serving(
        "if dist.get_world_size() > 1:", "    dist.broadcast(torch.tensor([0]), src=0)"
    ),
    "fsdp007-good-worker-loop-fed-by-a-handler-through-a-module-alias": _serving(
        "torch.distributed.broadcast(torch.tensor([0]), src=0)"
    ),
    "fsdp007-worker-loop-whose-handler-sends-nothing": _serving("dist.barrier()", mark="  # expect: FSDP007"),
    "fsdp007-good-helper-default-resolved-by-a-conditional-expression": f"""{_FINISH}\
        if dist.get_rank() == 0:
            finish("/tmp/done")
    """,
    "fsdp007-good-context-manager-told-not-to-sync": """
        import os
        import tempfile
        import torch.distributed as dist
        class NamedDir(tempfile.TemporaryDirectory):
            def __init__(self, name, sync=True):
                self.name = str(name)
                os.makedirs(name, exist_ok=True)
                if sync:
                    dist.barrier()
                self.sync = sync
            def cleanup(self, override_sync=None):
                sync = self.sync if override_sync is None else override_sync
                if sync:
                    dist.barrier()
            def __enter__(self):
                return self.name
            def __exit__(self, exc_type, exc_value, traceback):
                if exc_type is None:
                    self.cleanup()
        def shared_dir(path):
            if dist.get_rank() == 0:
                with NamedDir(path, sync=False):
                    yield path
            else:
                yield path
    """,
    "fsdp007-helper-told-to-sync-on-rank-zero": f"""{_FINISH}\
        if dist.get_rank() == 0:
            finish("/tmp/done", sync=True)  # expect: FSDP007
    """,
}
