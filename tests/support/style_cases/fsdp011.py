"""Style cases for FSDP011: code written in styles the fixtures do not use."""

CASES = {
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
    "fsdp011-good-device-id-in-keyword-mapping": """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group(**dist_options)
        model = Net().cuda()
        fully_shard(model)
    """,
    "fsdp011-good-mesh-on-the-group-the-caller-created": """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        def parallelize(model):
            model.cuda()
            mesh = init_device_mesh("cuda", mesh_shape=(dist.get_world_size(),), mesh_dim_names=("dp",))
            for block in model.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
    """,
    "fsdp011-good-mesh-shaped-from-the-world-size": """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        model = Transformer().cuda()
        world_size = dist.get_world_size()
        mesh = init_device_mesh("cuda", (world_size // 2, 2), mesh_dim_names=("replicate", "shard"))
        fully_shard(model, mesh=mesh)
    """,
    "fsdp011-mesh-shaped-from-the-environment": """
        import os
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        model = Transformer().cuda()
        mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
        fully_shard(model, mesh=mesh)  # expect: FSDP011
    """,
}
