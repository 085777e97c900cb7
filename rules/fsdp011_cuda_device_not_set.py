from __future__ import annotations

from collections.abc import Iterator

from fsdp2_lint.analysis import apis
from fsdp2_lint.analysis.facts import FileFacts
from fsdp2_lint.analysis.model import Const, Event, EventKind, Symbol, options, refs, walk_contents
from fsdp2_lint.analysis.trace import Trace
from fsdp2_lint.diagnostics import Applicability
from fsdp2_lint.fixing import builders
from fsdp2_lint.fixing.rewrite import Rewrite
from fsdp2_lint.rule import Finding, FixOffer, Rule, RuntimeSignature, TorchVersions

INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
INIT_DEVICE_MESH = "torch.distributed.init_device_mesh"
# Questions only an existing process group answers.
GROUP_QUERIES = ("torch.distributed.get_world_size", "torch.distributed.get_rank")
SPAWNING = ("torch.multiprocessing.", "multiprocessing.")
TORCH_TEST_HARNESS = "torch.testing._internal."
# torch.cuda functions that do not create the CUDA context (so a device mesh still selects the device).
CUDA_WITHOUT_CONTEXT = frozenset(
    {"is_available", "device_count", "manual_seed", "manual_seed_all", "is_initialized", "empty_cache"}
)
DEVICE_MODULE_SETTERS = frozenset({"set_device", "set_device_index"})
DEVICE_SELECTION = frozenset(
    {"torch.cuda.set_device", "torch.accelerator.set_device_index", "torch.cuda.device", "torch.xpu.set_device"}
)


class CudaDeviceNotSet(Rule):
    code = "FSDP011"
    name = "cuda-device-not-set"
    summary = "CUDA/NCCL script shards without selecting each rank's GPU: every rank lands on cuda:0"
    hint = 'call `torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))` before `init_process_group`'
    failure = 'every rank uses GPU 0: out of memory, NCCL "Duplicate GPU detected", or a hang'
    fix_offer = FixOffer(
        summary=(
            'inserts `torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))` before `init_process_group` '
            "(under `if torch.cuda.is_available():` when the backend is not always NCCL), adding `import "
            "os`; none when the script starts its own processes"
        ),
        applicabilities=(Applicability.SAFE,),
        safety="each rank selects the GPU torchrun assigned it before anything is placed on a device.",
    )
    docs = """
## What it does
Flags a script that sets up its own process group (`init_process_group`, `init_device_mesh`),
uses CUDA with NCCL (`init_process_group("nccl")`, `init_device_mesh("cuda", ...)`, `.cuda()`)
and shards with `fully_shard`, but never selects the device of its rank:
no `torch.cuda.set_device(...)`, `torch.accelerator.set_device_index(...)`, `set_device(...)` on a
device module found at run time (`getattr(torch, device_type).set_device(...)`),
`init_process_group(..., device_id=...)`, or `CUDA_VISIBLE_DEVICES` assignment. Reported at
`init_process_group` (or the first `fully_shard` when the process group is created elsewhere).
Not flagged: a mesh built after the code asked the process group its size or rank
(`init_device_mesh("cuda", (dist.get_world_size(),))` in a library's sharding helper): the group
exists already, and the code that created it selects the device.

Tests of classes built on torch's distributed test harness (`torch.testing._internal`:
`FSDPTest`, `MultiProcessTestCase`, `DTensorTestBase`) are left alone: the harness selects the
device before each test.

## Why is this bad?
FSDP2 places parameters on `torch.device(mesh.device_type, torch.cuda.current_device())`, and the
current device is `cuda:0` in every process until the script selects another. All ranks then put
their shards and NCCL communicators on GPU 0: out-of-memory on GPU 0, `NCCL error: Duplicate GPU
detected: rank 0 and rank 1 both on CUDA device ...`, or a hang. (Needs two GPUs to observe; the
CPU harness reports this rule as not runnable there.)
"""
    valid = (
        """
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
fully_shard(model.cuda())
""",
        """
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

def setup_device(device_type):
    device_module = getattr(torch, device_type)  # cuda, npu, xpu: whichever this machine has
    device_module.set_device(int(os.environ["LOCAL_RANK"]))

setup_device("cuda")
dist.init_process_group("nccl")
fully_shard(model.cuda())
""",
    )
    invalid = (
        """
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group(backend="nccl")  # expect: FSDP011
fully_shard(model.cuda())
""",
    )
    requires = (("fully_shard",), ("nccl", "cuda"))
    signature = RuntimeSignature(
        evidence="exception",
        exception=("RuntimeError", "torch.OutOfMemoryError", "torch.distributed.DistBackendError"),
        message=r"Duplicate GPU detected|out of memory",
        min_gpus=2,
        note="or a hang; needs at least two GPUs",
    )
    torch_versions = TorchVersions(
        why=(
            "On torch 2.13 a device mesh (`init_device_mesh`, or the one `fully_shard` makes without `mesh=`) "
            "selects each rank's GPU from `LOCAL_RANK` (else rank modulo the GPUs per host) when CUDA is not "
            "initialised yet (`DeviceMesh._setup_world_group_and_device`), so the rule reports only scripts that "
            "use CUDA before their first mesh: there the mesh leaves every rank on cuda:0, on 2.13 too. Older torch (before about 2.8; not checked here) selected "
            "the GPU only when the mesh created the process group itself, so a script that calls "
            "`init_process_group` before its mesh fails there without touching CUDA; the rule does not report that."
        )
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if b"CUDA_VISIBLE_DEVICES" in facts.source or any(_selects_device(event) for _, event in facts.events()):
            return
        for trace in facts.traces:
            if _in_torch_test_harness(trace):
                continue
            # The flow that creates the process group must be the one that shards: a group made
            # by a launcher or framework comes with the device already selected.
            creates = [
                e
                for e in trace.events
                if e.kind is EventKind.CALL and e.qname in (INIT_PROCESS_GROUP, INIT_DEVICE_MESH)
            ]
            shards = trace.shards
            if (
                creates
                and not _mesh_on_existing_group(trace, creates)
                and shards
                and any(_uses_cuda(event) for event in trace.events)
                and not _mesh_selects_device(trace)
            ):
                inits = [event for event in creates if event.qname == INIT_PROCESS_GROUP]
                yield Finding((inits[0] if inits else shards[0]).node, fix=_set_device_first(facts, creates[0]))


def _mesh_on_existing_group(trace: Trace, creates: list[Event]) -> bool:
    """Are the meshes built after the code asked the process group its size or rank
    (`init_device_mesh("cuda", (dist.get_world_size(),))`)? The group exists already: the code
    that created it, elsewhere, selected the device."""
    first = creates[0]
    return all(e.qname == INIT_DEVICE_MESH for e in creates) and any(
        query.index <= first.index for query in trace.calls(*GROUP_QUERIES)
    )


def _set_device_first(facts: FileFacts, creation: Event) -> Rewrite | None:
    """Insert ``torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))`` before the statement that
    creates the process group (or the mesh): torchrun sets LOCAL_RANK for every rank. Guarded by
    ``torch.cuda.is_available()`` unless the script always uses CUDA, so a CPU run still works. No
    fix for scripts that start their own processes, where LOCAL_RANK may not be set."""
    if any(event.kind is EventKind.CALL and (event.qname or "").startswith(SPAWNING) for _, event in facts.events()):
        return None
    set_device, set_device_import = builders.reference(facts.module, "torch.cuda.set_device")
    os_module, os_import = builders.reference(facts.module, "os")
    code = f'{builders.code_of(set_device)}(int({builders.code_of(os_module)}.environ["LOCAL_RANK"]))\n'
    needed = [set_device_import, os_import]
    if not _always_cuda(creation):
        is_available, is_available_import = builders.reference(facts.module, "torch.cuda.is_available")
        code = f"if {builders.code_of(is_available)}():\n    {code}"
        needed.append(is_available_import)
    insertion = builders.insert_before(facts, creation.node, code)
    if insertion is None:
        return None
    return Rewrite(
        "select the rank's GPU from LOCAL_RANK (set by torchrun) before creating the process group",
        insertion,
        imports=tuple(needed_import for needed_import in needed if needed_import is not None),
    )


def _always_cuda(creation: Event) -> bool:
    """An NCCL process group, or a CUDA device mesh, whatever the run's configuration."""
    if creation.qname == INIT_PROCESS_GROUP:
        wanted, value = "nccl", creation.arg(0, "backend")
    else:
        wanted, value = "cuda", creation.arg(0, "device_type")
    return value is not None and all(
        isinstance(option, Const) and isinstance(option.value, str) and wanted in option.value
        for option in options(value)
    )


def _in_torch_test_harness(trace: Trace) -> bool:
    """A test of a class built on torch's distributed test harness (``FSDPTest``,
    ``MultiProcessTestCase``, ``DTensorTestBase``): the harness starts the ranks, creates the
    process group and selects each rank's device before the test runs."""
    cls = trace.instance.root.cls if trace.instance is not None else None
    return cls is not None and any(base.startswith(TORCH_TEST_HARNESS) for base in cls.external_bases())


def _selects_device(event: Event) -> bool:
    """A call that selects this rank's device: torch's own, or ``set_device`` on a device module
    found at run time (``getattr(torch, device_type).set_device(i)``, ``torch.get_device_module()``)."""
    if event.kind is EventKind.METHOD:
        return event.name in DEVICE_MODULE_SETTERS
    if event.kind is not EventKind.CALL:
        return False
    if event.qname in DEVICE_SELECTION or (
        event.name in DEVICE_MODULE_SETTERS and (event.qname or "").startswith("torch.")
    ):
        return True
    return event.qname == INIT_PROCESS_GROUP and event.may_pass("device_id")


def _mesh_selects_device(trace: Trace) -> bool:
    """Creating a CUDA device mesh (``init_device_mesh("cuda", ...)``, or the default mesh of a
    ``fully_shard`` without ``mesh=``) selects the device from LOCAL_RANK itself, as long as
    nothing has initialised CUDA before: torch's ``DeviceMesh`` sets it when the current device
    is not initialised yet. A mesh made by code we cannot see may have done so too."""
    mesh = trace.shards[0].kwargs.get("mesh")
    if mesh is not None and not any(_made_here(ref.root.event) for ref in refs(mesh)):
        return True
    for event in trace.events:
        if _creates_mesh(event):
            return True
        if _initialises_cuda(event):
            return False
    return False


def _made_here(creation: Event | None) -> bool:
    return creation is not None and creation.qname == INIT_DEVICE_MESH


def _creates_mesh(event: Event) -> bool:
    if event.kind is not EventKind.CALL:
        return False
    if event.qname == apis.FULLY_SHARD:
        return "mesh" not in event.kwargs
    return event.qname == INIT_DEVICE_MESH and not _only(event.arg(0, "device_type"), "cpu")


def _initialises_cuda(event: Event) -> bool:
    """Does the event create or move tensors on a device other than the CPU (or may it)?"""
    if event.kind is EventKind.METHOD:
        return event.name == "cuda" or (event.name == "to" and not all(_only(arg, "cpu") for arg in event.args))
    if event.kind is not EventKind.CALL:
        return False
    if (event.qname or "").startswith("torch.cuda.") and event.name not in CUDA_WITHOUT_CONTEXT:
        return True
    device = event.kwargs.get("device")
    return device is not None and not _only(device, "cpu", "meta")


def _only(value, *devices: str) -> bool:
    """Is the value certainly one of these device names (or a dtype, for ``.to``)?"""
    if value is None:
        return False
    for option in options(value):
        if isinstance(option, Const) and isinstance(option.value, str):
            if option.value.split(":")[0] not in devices:
                return False
        elif not (isinstance(option, Symbol) and option.qname.startswith("torch.") and "float" in option.qname):
            return False
    return True


def _uses_cuda(event: Event) -> bool:
    if event.kind is EventKind.CALL and event.qname == INIT_PROCESS_GROUP:
        return _mentions(event.arg(0, "backend"), "nccl")
    if event.kind is EventKind.CALL and event.qname == INIT_DEVICE_MESH:
        return _mentions(event.arg(0, "device_type"), "cuda")
    return event.kind is EventKind.METHOD and event.name == "cuda"


def _mentions(value, text: str) -> bool:
    if value is None:
        return False
    return any(isinstance(v, Const) and isinstance(v.value, str) and text in v.value for v in walk_contents(value))
