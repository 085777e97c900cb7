"""Each probe detects its symptom in a tiny script run under the rank pool and stays quiet on a
correct one. The scripts run for real (2 ranks, CPU, gloo); nothing here is labelled."""

from __future__ import annotations

from runtime_helpers import line_of, script_source

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence import events
from fsdp2_lint.runtime.evidence.registry import matches, observe
from fsdp2_lint.runtime.launch.stall import STALL_SECONDS


def kinds(record) -> list[str]:
    return sorted(evidence.kind for evidence in observe(record))


OPTIMIZER_BEFORE_SHARD = """
model = make_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # <opt>
train(shard(model), optimizer)  # <train>
"""
OPTIMIZER_AFTER_SHARD = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
train(model, optimizer)
"""
# The optimizer holds the DTensors but lr=0 changes nothing: not the FSDP001 symptom.
ZERO_LR_AFTER_SHARD = """
model = shard(make_model())
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
train(model, optimizer)
"""


def test_step_probe_sees_an_optimizer_that_updates_nothing(run_scripts):
    bad, good, zero_lr = run_scripts(OPTIMIZER_BEFORE_SHARD, OPTIMIZER_AFTER_SHARD, ZERO_LR_AFTER_SHARD)

    [evidence] = observe(bad)
    assert evidence.kind == "params_unchanged"
    assert evidence.ranks == (0, 1)
    source = script_source(OPTIMIZER_BEFORE_SHARD)
    assert line_of(source, "# <opt>") in evidence.lines
    assert "holds 4 tensor(s) fully_shard replaced and no DTensor; after 2 step(s)" in evidence.summary
    steps = [event for _, event in bad.of_kind(events.STEP)]
    assert len(steps) == 4  # 2 probed steps on each rank
    assert all(step["changed"] == 0 and step["model_dtensor"] == step["model_params"] == 4 for step in steps)
    assert all(step["optimizer_dtensor"] == 0 and step["held_by_optimizer"] == 0 for step in steps)
    assert all(step["optimizer_replaced"] == 4 for step in steps)  # the parameters fully_shard replaced

    for record in (good, zero_lr):
        assert record.completed()
        assert observe(record) == []
    good_steps = [event for _, event in good.of_kind(events.STEP)]
    assert good_steps and all(event["changed"] == 4 for event in good_steps)
    zero_lr_steps = [event for _, event in zero_lr.of_kind(events.STEP)]
    assert zero_lr_steps and all(event["changed"] == 0 and event["optimizer_dtensor"] == 4 for event in zero_lr_steps)


# A plain model trained in the same loop as the sharded one (a single-process reference).
PLAIN_MODEL_BESIDE = """
model = shard(make_model())
reference = make_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)  # <plain>
x = torch.randn(4, 8)
for _ in range(2):
    for net, opt in ((model, optimizer), (reference, reference_optimizer)):
        net(x).sum().backward()
        opt.step()
        opt.zero_grad()
"""
# An unsharded copy taken before sharding (same shapes, never the model's parameters), trained and
# clipped (it has no gradient: 0 is its right norm) while the sharded model has gradients.
UNSHARDED_COPY = """
import copy

base = make_model()
teacher = copy.deepcopy(base)
model = shard(base)
teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=0.1)  # <plain>
train(teacher, teacher_optimizer)
model(torch.randn(4, 8)).sum().backward()
teacher_optimizer.zero_grad()
assert torch.nn.utils.clip_grad_norm_(teacher.parameters(), 1.0).item() == 0.0
model.zero_grad()
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_an_optimizer_over_an_unsharded_model_beside_a_sharded_one_is_no_evidence(run_scripts):
    records = run_scripts(PLAIN_MODEL_BESIDE, UNSHARDED_COPY)
    for body, record in zip((PLAIN_MODEL_BESIDE, UNSHARDED_COPY), records, strict=True):
        assert record.completed() and observe(record) == []
        plain_line = line_of(script_source(body), "# <plain>")
        plain_steps = [event for _, event in record.of_kind(events.STEP) if event["optimizer_line"] == plain_line]
        # what used to pass for FSDP001: no DTensor held, and the sharded model unchanged by the step
        assert plain_steps and all(step["optimizer_dtensor"] == 0 and step["changed"] == 0 for step in plain_steps)
        assert all(step["optimizer_replaced"] == 0 for step in plain_steps)
    clips = [event for _, event in record.of_kind(events.GRAD_NORM) if "given" in event]
    assert clips and all(clip["value"] == 0.0 and clip["given_replaced"] == 0 for clip in clips)


FORWARD_BEFORE_OPTIMIZER = """
model = make_model()
fully_shard(model[0])
fully_shard(model)  # the root's own group holds model[2]
with torch.no_grad():
    model(torch.randn(4, 8))  # the root stays unsharded after its forward
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # <opt>
train(model, optimizer)
"""
SYNC_NEVER_ENABLED = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.set_requires_gradient_sync(False)  # <off>
train(model, optimizer)
"""
# Switched back on after the backward, before the step: too late, that backward reduced nothing.
SYNC_ENABLED_AFTER_BACKWARD = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model[2].set_requires_gradient_sync(False, recurse=False)  # <off>
model(torch.randn(4, 8)).sum().backward()
model[2].set_requires_gradient_sync(True, recurse=False)
optimizer.step()
"""
# Only the head trains, with a learnable scale outside the model: the first layer is left out on purpose.
HEAD_AND_SCALE = """
model = shard(make_model())
scale = nn.Parameter(torch.ones(()))
optimizer = torch.optim.AdamW([*model[2].parameters(), scale], lr=1e-2)
x = torch.randn(4, 8)
for _ in range(2):
    (model(x).sum() * scale).backward()
    optimizer.step()
    optimizer.zero_grad()
"""
# A layer the forward never uses gets no gradient with sync on: correct code.
UNUSED_LAYER = """
class WithPooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = make_model()
        self.pooler = nn.Linear(4, 4)  # this task's forward never uses it

    def forward(self, x):
        return self.body(x)


model = WithPooler()
fully_shard(model.body[0])
fully_shard(model)
train(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
"""
FROZEN_LAYER = """
model = shard(make_model())
model[0].requires_grad_(False)  # fine-tuning: frozen params get no gradient, on purpose
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
train(model, optimizer)
"""


def test_step_probe_sees_parameters_that_never_train(run_scripts):
    frozen_root, no_sync, late_sync, frozen_layer, unused_layer, head_only = run_scripts(
        FORWARD_BEFORE_OPTIMIZER,
        SYNC_NEVER_ENABLED,
        SYNC_ENABLED_AFTER_BACKWARD,
        FROZEN_LAYER,
        UNUSED_LAYER,
        HEAD_AND_SCALE,
    )

    [evidence] = observe(frozen_root)
    assert evidence.kind == "partial_update" and evidence.ranks == (0, 1)
    assert line_of(script_source(FORWARD_BEFORE_OPTIMIZER), "# <opt>") in evidence.lines
    assert "holds 2 plain tensor(s), the sharded model's unsharded parameters" in evidence.summary
    assert "2 of 4 parameters changed, never: 2.weight, 2.bias" in evidence.summary

    for record, body, count in ((no_sync, SYNC_NEVER_ENABLED, 4), (late_sync, SYNC_ENABLED_AFTER_BACKWARD, 2)):
        [evidence] = observe(record)
        assert evidence.kind == "grads_not_reduced"
        assert f"{count} of 4 sharded parameters had no gradient and did not change" in evidence.summary
        assert line_of(script_source(body), "# <off>") in evidence.lines

    assert head_only.completed() and observe(head_only) == []
    steps = [event for _, event in head_only.of_kind(events.STEP)]
    assert steps and all(step["changed"] == 2 and step["optimizer_dtensor"] == 2 for step in steps)

    assert unused_layer.completed() and observe(unused_layer) == []
    steps = [event for _, event in unused_layer.of_kind(events.STEP)]
    assert steps and all(step["no_grad"] == ["pooler.weight", "pooler.bias"] for step in steps)
    assert all(step["sync_off_count"] == 0 for step in steps)

    assert frozen_layer.completed() and observe(frozen_layer) == []
    frozen_steps = [event for _, event in frozen_layer.of_kind(events.STEP)]
    assert frozen_steps and all(event["changed"] == 2 for event in frozen_steps)


META_INIT_NO_INIT = """
with torch.device("meta"):
    model = make_model()
model = shard(model)
model.to_empty(device="cpu")  # <to_empty>
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
META_INIT_RESET = """
with torch.device("meta"):
    model = make_model()
model = shard(model)
model.to_empty(device="cpu")
for module in model.modules():
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
# Materialised before sharding: what initialises the parameters is what writes the DTensors after.
META_TO_EMPTY_THEN_SHARD = """
with torch.device("meta"):
    model = make_model()
model.to_empty(device="cpu")  # <to_empty>
model = shard(model)
if INIT:
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
META_ASSIGN_LOAD = """
full = make_model().state_dict()
with torch.device("meta"):
    model = make_model()
model.to_empty(device="cpu")
model.load_state_dict(full, assign=True)  # other tensors take the parameters' places
train(shard(model), torch.optim.SGD(model.parameters(), lr=0.1))
"""
ROOT_ONLY = """
model = make_model()
fully_shard(model)  # <root>
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
ONE_MODULE = """
model = nn.Linear(8, 4)
fully_shard(model)
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
# Blocks of several modules each, sharded before their root, and one group of two leaves.
BLOCKS_THEN_ROOT = """
def block():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))


model = nn.Sequential(block(), block(), nn.Linear(8, 8), nn.Linear(8, 4))
fully_shard(model[0])
fully_shard(model[1])
fully_shard([model[2], model[3]])
fully_shard(model)
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
# Top-down: the root first, then its submodule (FSDP002's failure, caught): nothing ever runs forward.
ROOT_FIRST = """
model = make_model()
fully_shard(model)
try:
    fully_shard(model[0])
except (TypeError, RuntimeError) as error:
    print("top-down sharding failed:", error)
"""
# FSDP1 units under an FSDP2 root: the blocks are sharded, by the wrong API (FSDP017's failure, not FSDP034's).
FSDP1_BLOCKS = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = make_model()
model[0] = FSDP(model[0], device_id=torch.device("cpu"))
model[2] = FSDP(model[2], device_id=torch.device("cpu"))
fully_shard(model)
model(torch.randn(4, 8)).sum().backward()
"""


def test_single_param_group_is_the_outermost_group_at_its_first_forward(run_scripts):
    blocks, root_first, fsdp1_blocks = run_scripts(BLOCKS_THEN_ROOT, ROOT_FIRST, FSDP1_BLOCKS)

    assert blocks.completed() and observe(blocks) == []
    [(_, forward)] = [item for item in blocks.of_kind(events.FIRST_FORWARD) if item[0] == 0]
    assert (forward["module"], forward["nested"]) == ("FSDPSequential", 4)  # the root only, not its blocks

    assert root_first.completed() and observe(root_first) == []
    assert root_first.of_kind(events.FULLY_SHARD) and not root_first.of_kind(events.FIRST_FORWARD)

    assert kinds(fsdp1_blocks) == ["fsdp1_params_resharded"]


def test_to_empty_probe_follows_parameters_that_fully_shard_or_an_assigning_load_replace(run_scripts):
    no_init, init, assigned = run_scripts(
        "INIT = False" + META_TO_EMPTY_THEN_SHARD, "INIT = True" + META_TO_EMPTY_THEN_SHARD, META_ASSIGN_LOAD
    )
    [evidence] = observe(no_init)
    assert evidence.kind == "not_materialized" and "left 4 parameters uninitialised" in evidence.summary
    assert evidence.lines[0] == line_of(script_source("INIT = False" + META_TO_EMPTY_THEN_SHARD), "# <to_empty>")
    for record in (init, assigned):
        assert record.completed() and observe(record) == []
        [(_, event), _] = record.of_kind(events.MATERIALIZED)
        assert event["compared"] == 4 and event["untouched_count"] == 0


def test_to_empty_and_fully_shard_probes_see_uninitialised_memory_and_root_only_sharding(run_scripts):
    no_init, reset, root_only, one_module = run_scripts(META_INIT_NO_INIT, META_INIT_RESET, ROOT_ONLY, ONE_MODULE)

    [evidence] = observe(no_init)
    assert evidence.kind == "not_materialized" and evidence.ranks == (0, 1)
    assert evidence.lines[0] == line_of(script_source(META_INIT_NO_INIT), "# <to_empty>")
    assert "left 4 parameters uninitialised" in evidence.summary

    [evidence] = observe(root_only)
    assert evidence.kind == "single_param_group"
    assert evidence.lines[0] == line_of(script_source(ROOT_ONLY), "# <root>")
    assert "holds all 4 parameters of 2 modules" in evidence.summary

    for record in (reset, one_module):
        assert record.completed() and observe(record) == []


RANK0_SAVES_SHARDS = """
model = shard(make_model())
if rank == 0:
    torch.save({"model": model.state_dict()}, "ckpt.pt")  # <save>
dist.barrier()
"""
CORRECT_SAVES = """
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

model = shard(make_model())
full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if rank == 0:
    torch.save(full, "full.pt")  # plain tensors
torch.save(model.state_dict(), f"shard-{rank}.pt")  # deliberate per-rank shard files
dcp.save({"model": model.state_dict()}, checkpoint_id="dcp")  # torch.save inside DCP is not user code
"""


def test_save_probe_sees_dtensors_written_to_one_file(run_scripts):
    bad, good = run_scripts(RANK0_SAVES_SHARDS, CORRECT_SAVES)

    [evidence] = observe(bad)
    assert evidence.kind == "dtensor_save"
    assert evidence.ranks == (0,)
    assert evidence.lines == (line_of(script_source(RANK0_SAVES_SHARDS), "# <save>"),)
    assert "4 DTensors" in evidence.summary and "ckpt.pt" in evidence.summary

    assert good.completed()
    assert observe(good) == []
    saves = [event for _, event in good.of_kind(events.SAVE)]
    assert sorted((event["dtensors"] > 0, event["target"].rsplit("/", 1)[-1]) for event in saves) == [
        (False, "full.pt"),
        (True, "shard-0.pt"),
        (True, "shard-1.pt"),
    ]


NO_SYNC = """
model = shard(make_model())


def accumulate(model):
    with model.no_sync():  # <raise>
        model(torch.randn(4, 8)).sum().backward()


accumulate(model)  # <call>
"""


BACKEND_ERROR = """
raise dist.DistBackendError("boom")
"""


def test_exception_probe_records_type_message_and_script_lines(run_scripts):
    record, backend_error = run_scripts(NO_SYNC, BACKEND_ERROR)

    [evidence] = observe(record)
    source = script_source(NO_SYNC)
    assert evidence.kind == "exception"
    assert evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(source, "# <raise>"), line_of(source, "# <call>"))
    assert "AttributeError" in evidence.exception_types
    no_sync = RuntimeSignature("exception", ("AttributeError",), r"has no attribute 'no_sync'")
    assert matches(evidence, no_sync)
    assert not matches(evidence, RuntimeSignature("exception", ("RuntimeError",), r"has no attribute 'no_sync'"))
    assert not matches(evidence, RuntimeSignature("exception", ("AttributeError",), r"mixed torch\.Tensor"))
    assert not record.completed()

    # types by name and qualified name, bases included (once, on a loaded machine, the run also showed a
    # second, different piece of evidence: this test is about the names, not the count)
    [evidence] = [e for e in observe(backend_error) if e.message == "boom"]
    assert {"DistBackendError", "torch.distributed.DistBackendError", "RuntimeError"} <= set(evidence.exception_types)
    assert "builtins.RuntimeError" not in evidence.exception_types
    assert matches(evidence, RuntimeSignature("exception", ("torch.distributed.DistBackendError",), "boom"))


DEADLOCK = """
buffer = torch.zeros(1)
dist.recv(buffer, src=1 - rank)  # <recv> both ranks wait for the other to send
"""


def test_a_deadlock_is_a_hang_found_stalled_with_each_ranks_last_event_and_stack(run_scripts):
    hang, after = run_scripts(DEADLOCK, OPTIMIZER_AFTER_SHARD, timeout=120.0)

    assert hang.timed_out == (0, 1)
    assert hang.stalled_for is not None and hang.stalled_for >= STALL_SECONDS
    assert hang.seconds < 30.0  # found stuck long before its timeout
    [evidence] = observe(hang)
    recv_line = line_of(script_source(DEADLOCK), "# <recv>")
    assert evidence.kind == "hang"
    assert evidence.lines == (recv_line,)
    assert evidence.summary.startswith(f"stalled after {hang.seconds:.0f}s: no event and no CPU for")
    assert f"rank 0 last reached recv at line {recv_line}; stuck at line {recv_line}" in evidence.summary
    assert f"rank 1 last reached recv at line {recv_line}; stuck at line {recv_line}" in evidence.summary
    # the hung run was killed with its process group; the run next to it was unaffected
    assert after.completed() and observe(after) == []


# Longer than a stall takes to be found, rank 1 waits in a collective for rank 0, which sleeps in the
# script's own code (no CPU, not inside torch) or computes (CPU, no event): slow runs, not stuck ones.
SLEEP_THEN_BARRIER = """
import time

if rank == 0:
    time.sleep(STALL_SECONDS + 2)
dist.barrier()
"""
COMPUTE_THEN_BARRIER = """
import time

if rank == 0:
    layer, x = nn.Linear(2048, 2048), torch.randn(2048, 2048)
    deadline = time.monotonic() + STALL_SECONDS + 2
    with torch.no_grad():
        while time.monotonic() < deadline:
            layer(x)  # inside torch's own code nearly all the time: only the CPU it uses says it computes
dist.barrier()
"""
COMPUTE_FOREVER = """
while True:
    torch.randn(32, 32) @ torch.randn(32, 32)
"""


def test_slow_runs_are_not_stalled_and_a_run_that_never_stops_times_out(run_scripts):
    stall = f"STALL_SECONDS = {STALL_SECONDS}\n"
    sleeping, computing = run_scripts(stall + SLEEP_THEN_BARRIER, stall + COMPUTE_THEN_BARRIER, timeout=120.0)
    for record in (sleeping, computing):
        assert record.completed() and observe(record) == []
        assert record.seconds > STALL_SECONDS

    [spinning] = run_scripts(COMPUTE_FOREVER, timeout=3.0)
    assert spinning.timed_out == (0, 1) and spinning.stalled_for is None
    [evidence] = observe(spinning)
    assert evidence.kind == "hang" and evidence.summary.startswith("timed out after 3s")


RANK1_DIES = """
import signal

model = shard(make_model())
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
dist.barrier()  # <wait> rank 0 waits for a rank that is gone
"""


def test_a_rank_killed_by_a_signal_is_a_crash_and_its_peer_is_stopped(run_scripts):
    [record] = run_scripts(RANK1_DIES)

    assert record.returncodes[1] == -9
    crashes = [evidence for evidence in observe(record) if evidence.kind == "crash"]
    assert [evidence.ranks for evidence in crashes] == [(1,)]
    assert crashes[0].summary.startswith("rank 1 killed by SIGKILL; last: ")
    # rank 0 either fails on the broken connection or is stopped: never a hang
    assert record.timed_out == ()
    assert "hang" not in kinds(record)
    assert 0 in record.stopped or record.final_event(0) is not None


EXIT_EARLY = """
import torch.distributed._composable.fsdp as composable

model = nn.Linear(8, 8)
composable.fully_shard(model)  # <alias>
total = torch.ones(1)
for _ in range(3):
    dist.all_reduce(total)  # <reduce>
assert total.item() == 8.0
os._exit(0)
"""


def test_fully_shard_alias_collectives_and_os_exit_are_recorded(run_scripts):
    [record] = run_scripts(EXIT_EARLY)

    source = script_source(EXIT_EARLY)
    assert record.completed()
    assert observe(record) == []
    for rank in (0, 1):
        rank_events = record.events[rank]
        sharded = [event for event in rank_events if event["kind"] == events.FULLY_SHARD]
        assert [(event["module"], event["line"]) for event in sharded] == [("FSDPLinear", line_of(source, "# <alias>"))]
        reduces = [event for event in rank_events if event["kind"] == events.COLLECTIVE and event["op"] == "all_reduce"]
        assert [event["line"] for event in reduces] == [line_of(source, "# <reduce>")]  # 3 calls, one event
        assert rank_events[-1] == {**rank_events[-1], "kind": events.EXIT, "code": 0}


FORKS_A_WORKER = """
worker = os.fork()
if worker == 0:
    torch.save({"w": torch.ones(1)}, os.devnull)
    os._exit(0)  # a forked worker's exit is not the rank's
os.waitpid(worker, 0)
raise RuntimeError("the rank fails after its worker exited")  # <raise>
"""


def test_events_of_processes_forked_by_the_script_are_not_the_ranks(run_scripts):
    [record] = run_scripts(FORKS_A_WORKER)

    for rank in (0, 1):
        assert record.final_event(rank)["kind"] == events.EXCEPTION
        assert [event["kind"] for event in record.events[rank]] == [events.START, events.EXCEPTION]
    assert [e.kind for e in observe(record)] == ["exception"]


RANK0_LOADS = """
checkpoint = {name: torch.full_like(value, 0.5) for name, value in make_model().state_dict().items()}
model = make_model()
if rank == 0:
    model.load_state_dict(checkpoint)  # <load>
shard(model)
"""
EVERY_RANK_LOADS = """
checkpoint = {name: torch.full_like(value, 0.5) for name, value in make_model().state_dict().items()}
model = make_model()
model.load_state_dict(checkpoint)
shard(model)
"""
RANK0_LOADS_THEN_BROADCASTS = """
checkpoint = {name: torch.full_like(value, 0.5) for name, value in make_model().state_dict().items()}
torch.manual_seed(rank)  # ranks start from different random weights
model = make_model()
if rank == 0:
    model.load_state_dict(checkpoint)
for param in model.parameters():
    dist.broadcast(param.data, src=0)
shard(model)
"""
# Rank 0 also loads before sharding, but the full state dict broadcast from it after sharding
# writes every rank's shard before the first forward.
RANK0_LOADS_BROADCAST_AFTER_SHARDING = """
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

checkpoint = {name: torch.full_like(value, 0.5) for name, value in make_model().state_dict().items()}
model = make_model()
if rank == 0:
    model.load_state_dict(checkpoint)
shard(model)
options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
set_model_state_dict(model, checkpoint if rank == 0 else {}, options=options)
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
# Rank 0 loads, then re-initialises: its own shard no longer holds the loaded values, so nothing
# can be said about the other rank's.
RANK0_LOADS_THEN_RESETS = """
checkpoint = {name: torch.full_like(value, 0.5) for name, value in make_model().state_dict().items()}
model = make_model()
if rank == 0:
    model.load_state_dict(checkpoint)
    model[0].reset_parameters()
    model[2].reset_parameters()
shard(model)
"""


def test_load_probe_sees_shards_that_do_not_hold_what_rank_0_loaded(run_scripts):
    bad, bad_trained, every_rank, broadcast, broadcast_after, reset = run_scripts(
        RANK0_LOADS,
        RANK0_LOADS + "train(model, torch.optim.SGD(model.parameters(), lr=0.1))\n",
        EVERY_RANK_LOADS,
        RANK0_LOADS_THEN_BROADCASTS,
        RANK0_LOADS_BROADCAST_AFTER_SHARDING,
        RANK0_LOADS_THEN_RESETS,
    )

    [evidence] = observe(bad)
    source = script_source(RANK0_LOADS)
    assert evidence.kind == "not_loaded" and evidence.ranks == (1,)
    assert evidence.lines[0] == line_of(source, "# <load>")
    assert "rank 0 loaded 4 parameters" in evidence.summary and "rank 1's shard of 4 of them" in evidence.summary
    assert matches(evidence, RuntimeSignature("not_loaded"))
    loads = [(rank, event["params"]) for rank, event in bad.of_kind(events.LOAD)]
    assert loads == [(0, 4)]

    [evidence] = observe(bad_trained)  # trained as it was sharded: nothing wrote rank 1's shards
    assert evidence.kind == "not_loaded" and evidence.ranks == (1,)

    for record in (every_rank, broadcast, broadcast_after, reset):
        assert record.completed() and observe(record) == []
    rewritten = {
        rank: len(event["changed_since_shard"]) for rank, event in broadcast_after.of_kind(events.FIRST_FORWARD)
    }
    assert rewritten == {0: 0, 1: 4}  # the broadcast wrote rank 1's shards; rank 0's already held the values
    # every rank of a correct run records its shards; the loaders also every rank's chunk
    values = [value for _, event in every_rank.of_kind(events.FULLY_SHARD) for value in event["values"]]
    assert len(values) == 8 and all("chunks" in value for value in values)
    reset_values = [value for _, event in reset.of_kind(events.FULLY_SHARD) for value in event["values"]]
    assert not any("chunks" in value for value in reset_values)  # changed since the load: not "loaded"


STALE_CLIP = """
model = make_model()
params = list(model.parameters())
shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(4, 8)).sum().backward()
    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)  # <clip>
    optimizer.step()
    optimizer.zero_grad()
"""
LOCAL_NORM = """
model = shard(make_model())
model(torch.randn(4, 8)).sum().backward()
local = torch.sqrt(sum(p.grad.to_local().pow(2).sum() for p in model.parameters()))  # <norm>
"""
CORRECT_NORMS = """
model = shard(make_model())
model(torch.randn(4, 8)).sum().backward()
squares = sum(p.grad.to_local().pow(2).sum() for p in model.parameters())
dist.all_reduce(squares)
total = torch.sqrt(squares)
per_parameter = [torch.linalg.vector_norm(p.grad.full_tensor()) for p in model.parameters()]
clipped = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
assert abs(clipped.item() - total.item()) < 1e-5


@torch.jit.script
def scripted_norm(x: torch.Tensor) -> torch.Tensor:  # TorchScript still compiles the wrapped builtins
    return torch.sqrt(torch.linalg.vector_norm(x))


assert abs(scripted_norm(torch.full((4,), 4.0)).item() - 8.0**0.5) < 1e-6
"""
# Clipping only the frozen half of the model: a norm of 0 over the model's own parameters is right.
FROZEN_PART_CLIP = """
model = shard(make_model())
model[0].requires_grad_(False)
model(torch.randn(4, 8)).sum().backward()
frozen = torch.nn.utils.clip_grad_norm_(list(model[0].parameters()), 1.0)
assert frozen.item() == 0.0
"""


def test_grad_norm_probe_sees_stale_and_local_norms_and_not_correct_ones(run_scripts):
    stale, local, correct, frozen = run_scripts(STALE_CLIP, LOCAL_NORM, CORRECT_NORMS, FROZEN_PART_CLIP)

    [evidence] = observe(stale)
    assert evidence.kind == "wrong_grad_norm" and evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(script_source(STALE_CLIP), "# <clip>"),)
    assert "clip_grad_norm_" in evidence.summary and "returned 0 over 4 tensors" in evidence.summary
    assert len(stale.of_kind(events.GRAD_NORM)) == 4  # 2 steps x 2 ranks

    [evidence] = observe(local)
    assert evidence.kind == "wrong_grad_norm" and evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(script_source(LOCAL_NORM), "# <norm>"),)
    assert "each rank's norm of its own gradient shards" in evidence.summary
    norms = {rank: event for rank, event in local.of_kind(events.GRAD_NORM)}
    assert norms[0]["value"] != norms[1]["value"]

    for record in (correct, frozen):
        assert record.completed() and observe(record) == []
    functions = {event["function"] for _, event in correct.of_kind(events.GRAD_NORM)}
    assert functions == {"torch.sqrt", "torch.linalg.vector_norm", "torch.nn.utils.clip_grad_norm_"}


FULL_STATE_DICT_ON_FSDP2 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType

model = shard(make_model())
FSDP.set_state_dict_type(model, StateDictType.FULL_STATE_DICT)  # <config>
state = model.state_dict()  # <state>
"""
FULL_STATE_DICT_ON_FSDP1 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType

model = FSDP(make_model(), device_id=torch.device("cpu"))
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
    state = model.state_dict()
assert not any(isinstance(value, torch.distributed.tensor.DTensor) for value in state.values())
"""
SUMMON_ON_FSDP2 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = shard(make_model())
with FSDP.summon_full_params(model):  # <summon>
    weight = model[0].weight.detach().clone()
"""
SUMMON_ON_FSDP1 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = FSDP(make_model(), device_id=torch.device("cpu"), use_orig_params=True)
with FSDP.summon_full_params(model):
    assert model.module[0].weight.shape == (8, 8)
"""


def test_fsdp1_probes_see_state_dict_and_summon_settings_ignored_on_fsdp2_only(run_scripts):
    configured, fsdp1_state, summoned, fsdp1_summon = run_scripts(
        FULL_STATE_DICT_ON_FSDP2, FULL_STATE_DICT_ON_FSDP1, SUMMON_ON_FSDP2, SUMMON_ON_FSDP1
    )

    source = script_source(FULL_STATE_DICT_ON_FSDP2)
    [evidence] = observe(configured)
    assert evidence.kind == "state_dict_type_ignored" and evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(source, "# <config>"), line_of(source, "# <state>"))
    assert "returned 4 DTensor shards" in evidence.summary

    [evidence] = observe(summoned)
    assert evidence.kind == "still_sharded"
    assert evidence.lines == (line_of(script_source(SUMMON_ON_FSDP2), "# <summon>"),)
    assert "4 of 4 parameters are still sharded DTensors" in evidence.summary

    for record in (fsdp1_state, fsdp1_summon):
        assert record.completed() and observe(record) == []
    assert [event["sharded"] for _, event in fsdp1_summon.of_kind(events.SUMMON)] == [0, 0]


FSDP1_INSIDE_FSDP2 = """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = make_model()
model[0] = FSDP(model[0], device_id=torch.device("cpu"))
fully_shard(model)  # <root>
"""
FSDP1_CPU_OFFLOAD = """
from torch.distributed.fsdp import CPUOffload

model = make_model()
fully_shard(model[0], offload_policy=CPUOffload(offload_params=True))  # <offload>
fully_shard(model)
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
FSDP2_POLICIES = """
from torch.distributed.fsdp import CPUOffloadPolicy, FullyShardedDataParallel as FSDP

model = make_model()
fully_shard(model[0], offload_policy=CPUOffloadPolicy(pin_memory=False))
fully_shard(model)
teacher = FSDP(make_model(), device_id=torch.device("cpu"))  # a separate FSDP1 model
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_fully_shard_probe_sees_fsdp1_parameters_and_foreign_offload_policies(run_scripts):
    mixed, offload, fsdp2 = run_scripts(FSDP1_INSIDE_FSDP2, FSDP1_CPU_OFFLOAD, FSDP2_POLICIES)

    [evidence] = [e for e in observe(mixed) if e.kind == "fsdp1_params_resharded"]
    assert evidence.lines == (line_of(script_source(FSDP1_INSIDE_FSDP2), "# <root>"),)
    assert "sharded again 1 parameters" in evidence.summary  # FSDP1's one FlatParameter

    [evidence] = observe(offload)
    assert evidence.kind == "offload_policy_ignored"
    assert evidence.lines == (line_of(script_source(FSDP1_CPU_OFFLOAD), "# <offload>"),)
    assert "offload_policy=CPUOffload(offload_params=True)" in evidence.summary

    assert fsdp2.completed() and observe(fsdp2) == []
    shards = [event for _, event in fsdp2.of_kind(events.FULLY_SHARD)]
    assert [(event["offload_policy"], event["offloaded"]) for event in shards][:2] == [
        ("CPUOffloadPolicy", 2),
        ("OffloadPolicy", 0),
    ]


BF16_UNDER_BF16_POLICY = """
from torch.distributed.fsdp import MixedPrecisionPolicy

policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
model = make_model().to(torch.bfloat16)
fully_shard(model[0], mp_policy=policy)
fully_shard(model, mp_policy=policy)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)  # <opt>
"""
FP32_UNDER_BF16_POLICY_AND_FROZEN_BF16 = """
from torch.distributed.fsdp import MixedPrecisionPolicy

policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
model = make_model()
fully_shard(model, mp_policy=policy)
reference = make_model().to(torch.bfloat16).requires_grad_(False)
fully_shard(reference, mp_policy=policy)  # the policy is a no-op here too, but nothing trains it
pure = make_model().to(torch.bfloat16)
fully_shard(pure)  # pure bf16, no policy
optimizer = torch.optim.AdamW([*model.parameters(), *pure.parameters()], lr=1e-5)
"""


def test_master_weights_probe_sees_low_precision_parameters_a_policy_left_uncast(run_scripts):
    bf16, fine = run_scripts(BF16_UNDER_BF16_POLICY, FP32_UNDER_BF16_POLICY_AND_FROZEN_BF16)

    [evidence] = observe(bf16)
    assert evidence.kind == "low_precision_master_weights" and evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(script_source(BF16_UNDER_BF16_POLICY), "# <opt>"),)
    assert "holds 4 of 4 parameters as bfloat16 master weights" in evidence.summary
    assert matches(evidence, RuntimeSignature("low_precision_master_weights"))

    assert fine.completed() and observe(fine) == []
    [(_, held), _] = list(fine.of_kind(events.MASTER_WEIGHTS))
    assert held["dtypes"] == ["bfloat16", "float32"] and held["low_precision"] == 4 and held["policy_noop"] == 0
    noop = [event["policy_noop_params"] for _, event in fine.of_kind(events.FULLY_SHARD)]
    assert noop[:3] == [0, 4, 0]  # the reference's shards were left bf16, but no optimizer holds them


# FSDP039: a non-persistent buffer to_empty() leaves, recomputed or not before the first step.
META_BUFFER = """
class Rope(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", self.compute(), persistent=False)
        self.register_buffer("kept", torch.ones(4))  # persistent: not the probe's business

    def compute(self):
        return 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))

    def forward(self, x):
        return x * self.inv_freq.sum()

with torch.device("meta"):
    model = make_model().append(Rope())
model = shard(model)
model.to_empty(device="cpu")  # <to_empty>
for module in model.modules():
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
if RECOMPUTE == "copy":
    with torch.no_grad():
        model[3].inv_freq.copy_(model[3].compute())
elif RECOMPUTE == "register":
    model[3].register_buffer("inv_freq", model[3].compute(), persistent=False)
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_buffer_probe_sees_non_persistent_buffers_nothing_recomputed_after_to_empty(run_scripts):
    left, copied, registered = run_scripts(
        'RECOMPUTE = ""' + META_BUFFER, 'RECOMPUTE = "copy"' + META_BUFFER, 'RECOMPUTE = "register"' + META_BUFFER
    )
    [evidence] = [e for e in observe(left) if e.kind == "buffer_not_recomputed"]
    assert evidence.ranks == (0, 1) and "(Rope.inv_freq)" in evidence.summary and "1 of 1" in evidence.summary
    assert evidence.lines[0] == line_of(script_source('RECOMPUTE = ""' + META_BUFFER), "# <to_empty>")
    for record in (copied, registered):
        assert record.completed() and "buffer_not_recomputed" not in kinds(record)
        [(_, event), _] = record.of_kind(events.BUFFERS_AFTER_TO_EMPTY)
        assert event["compared"] == 1 and event["untouched_count"] == 0


# FSDP018: a tie made on the meta device, through to_empty() before or after fully_shard, tied again or not.
META_TIE = """
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.body = nn.Linear(8, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tok):
        return self.head(self.body(self.emb(tok)))

with torch.device("meta"):
    model = LM()
if ORDER == "shard first":
    fully_shard(model.body)
    fully_shard(model)
model.to_empty(device="cpu")  # <to_empty>
if ORDER == "retie":
    model.head.weight = model.emb.weight
if ORDER != "shard first":
    fully_shard(model.body)
    fully_shard(model)
with torch.no_grad():
    model.emb.weight.normal_()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
tok = torch.randint(0, 16, (2, 4))
model(tok).sum().backward()
optimizer.step()
"""


def test_tie_probe_sees_a_tie_to_empty_broke_and_nothing_restored(run_scripts):
    scripts = [f"ORDER = {order!r}" + META_TIE for order in ("broken", "shard first", "retie")]
    broken, shard_first, retied = run_scripts(*scripts)
    [evidence] = [e for e in observe(broken) if e.kind == "tie_broken"]
    assert evidence.ranks == (0, 1) and "(emb.weight = head.weight)" in evidence.summary
    assert evidence.lines[0] == line_of(script_source(scripts[0]), "# <to_empty>")
    for record in (shard_first, retied):
        assert record.completed() and "tie_broken" not in kinds(record)
        [(_, event), _] = record.of_kind(events.TIES_AFTER_TO_EMPTY)
        assert event["ties"] == 1 and event["broken_count"] == 0


# FSDP044: parameters left unsharded across the optimizer step.
RESHARD_OFF = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.set_reshard_after_backward(False)
train(model, optimizer, steps=3)
"""
# Resharded by hand before each step: the next forward all-gathers the updated shards.
RESHARD_BY_HAND = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.set_reshard_after_backward(False)
x = torch.randn(4, 8)
for _ in range(3):
    model(x).sum().backward()
    for module in (model[0], model[2], model):
        module.reshard()
    optimizer.step()
    optimizer.zero_grad()
"""
# Unsharded before the forward, never resharded by hand: the post-backward hook reshards it (torch 2.13).
UNSHARD_BEFORE_FORWARD = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(4, 8)
for _ in range(3):
    for module in (model[0], model[2], model):
        module.unshard()
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""
# Off for the early micro-batches only, still unsharded between them: no step in between, no evidence.
RESHARD_ON_FOR_LAST = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(4, 8)
for _ in range(3):
    for micro in range(3):
        model.set_requires_gradient_sync(micro == 2)  # accumulate: reduce once per step
        model.set_reshard_after_backward(micro == 2)
        model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""

# Unshard by hand after the last backward (the root's group only: `unshard()` is not recursive).
UNSHARD_AFTER_BACKWARD = """
model = shard(make_model())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(4, 8)
for _ in range(3):
    model(x).sum().backward()
    model[0].unshard()
    optimizer.step()
    optimizer.zero_grad()
"""
# The same, resharded before the step.
UNSHARD_AFTER_BACKWARD_RESHARDED = UNSHARD_AFTER_BACKWARD.replace(
    "model[0].unshard()", "model[0].unshard()\n    model[0].reshard()"
)


def test_stale_unsharded_probe_needs_an_unsharded_copy_older_than_the_step(run_scripts):
    stale, by_hand, unshard, on_for_last, manual, manual_resharded = run_scripts(
        RESHARD_OFF,
        RESHARD_BY_HAND,
        UNSHARD_BEFORE_FORWARD,
        RESHARD_ON_FOR_LAST,
        UNSHARD_AFTER_BACKWARD,
        UNSHARD_AFTER_BACKWARD_RESHARDED,
    )
    found = observe(stale)
    assert found and {e.kind for e in found} == {"stale_unsharded_params"}
    assert all(e.ranks == (0, 1) for e in found)
    assert len(found) == 2  # one per parameter group: model[0] and model[2]
    assert any(
        "2 of 2 differ from the shards the optimizer step updated (0.weight, 0.bias)" in e.summary for e in found
    )
    assert all(e.lines == (line_of(script_source(RESHARD_OFF), "model(x).sum().backward()"),) for e in found)
    assert matches(found[0], RuntimeSignature("stale_unsharded_params"))
    [after_backward] = observe(manual)  # only model[0]'s group stays unsharded
    assert after_backward.kind == "stale_unsharded_params" and after_backward.ranks == (0, 1)
    assert "(0.weight, 0.bias)" in after_backward.summary
    for record in (by_hand, unshard, on_for_last, manual_resharded):
        assert record.completed() and observe(record) == []
        assert not list(record.of_kind(events.STALE_UNSHARDED))


# FSDP026: the second Linear kept in fp32 under a bf16 model, in the root's group with the first.
FP32_ISLAND_IN_GROUP = """
model = make_model().bfloat16()
model[2].float()
fully_shard(model)
model(torch.randn(4, 8, dtype=torch.bfloat16)).sum().backward()  # <forward>
"""
# The island frozen: since torch 2.8 only trainable parameters must share a dtype (the bf16
# policy casts the fp32 weight for compute).
FP32_ISLAND_FROZEN = """
from torch.distributed.fsdp import MixedPrecisionPolicy
model = make_model().bfloat16()
model[2].float().requires_grad_(False)
fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
model(torch.randn(4, 8, dtype=torch.bfloat16)).float().sum().backward()
"""
# The island is its own group, sharded before the root (fp32 storage, bf16 compute).
FP32_ISLAND_OWN_GROUP = """
from torch.distributed.fsdp import MixedPrecisionPolicy
model = make_model().bfloat16()
model[2].float()
fully_shard(model[2], mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
fully_shard(model)
model(torch.randn(4, 8, dtype=torch.bfloat16)).float().sum().backward()
"""


def test_group_dtype_probe_sees_trainable_parameters_of_two_dtypes_in_one_group(run_scripts):
    island, frozen, own_group = run_scripts(FP32_ISLAND_IN_GROUP, FP32_ISLAND_FROZEN, FP32_ISLAND_OWN_GROUP)
    found = [e for e in observe(island) if e.kind == "nonuniform_group_dtype"]
    assert len(found) == 1 and found[0].ranks == (0, 1)
    assert found[0].lines == (line_of(script_source(FP32_ISLAND_IN_GROUP), "# <forward>"),)
    assert "bfloat16 (2: 0.weight, 0.bias); float32 (2: 2.weight, 2.bias)" in found[0].summary
    assert matches(found[0], RuntimeSignature("nonuniform_group_dtype"))
    assert any(e.kind == "exception" and "uniform original parameter dtype" in e.message for e in observe(island))
    [event] = [event for rank, event in island.of_kind(events.GROUP_DTYPES) if rank == 0]
    assert event["dtypes"] == {"bfloat16": 2, "float32": 2} and event["frozen_dtypes"] == []
    for record in (frozen, own_group):
        assert record.completed(), record.log_tail(0)
        assert not list(record.of_kind(events.GROUP_DTYPES))
        assert "nonuniform_group_dtype" not in kinds(record)


# FSDP028: a sharded block returns a view; the parent's forward writes it in place (or not).
VIEW_BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).view(x.shape)


class Model(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.block, self.head, self.op = Block(), nn.Linear(8, 4), op

    def forward(self, x):
        h = self.block(x)  # block call
        if self.op == "iadd":
            h += 1.0
        elif self.op == "clone":
            h = h.clone()
            h += 1.0
        else:
            h = h + 1.0
        return self.head(h)


model = Model(OP)
fully_shard(model.block, reshard_after_forward=RESHARD)
fully_shard(model)
x = torch.randn(4, 8)
with torch.set_grad_enabled(GRAD):
    try:
        for _ in range(2):
            out = model(x).sum()
            if GRAD:
                out.backward()
    except RuntimeError as error:
        print(error)
"""


def _view_block(op: str, reshard: bool = True, grad: bool = True) -> str:
    return VIEW_BLOCK.replace("OP", repr(op)).replace("RESHARD", str(reshard)).replace("GRAD", str(grad))


def test_view_output_probe_needs_an_in_place_write_on_a_resharded_view(run_scripts):
    iadd, clone, out_of_place, kept, no_grad = run_scripts(
        _view_block("iadd"), _view_block("clone"), _view_block("add"), _view_block("iadd", reshard=False),
        _view_block("iadd", grad=False),
    )  # fmt: skip
    [found] = observe(iadd)
    assert found.kind == "inplace_on_view_output" and found.ranks == (0, 1)
    assert found.lines == (line_of(script_source(VIEW_BLOCK), "# block call"),)
    assert "the output of FSDPBlock" in found.summary and "a view, shape [4, 8]" in found.summary
    assert matches(found, RuntimeSignature("inplace_on_view_output"))
    for record in (clone, out_of_place, no_grad):
        assert record.completed() and observe(record) == []
        assert not list(record.of_kind(events.INPLACE_VIEW_OUTPUT))
    # Not resharded after forward: the write is seen, but the parameters are still there (no evidence).
    assert kept.completed() and observe(kept) == []
    assert [event["resharded"] for _, event in kept.of_kind(events.INPLACE_VIEW_OUTPUT)] == [False, False]


# FSDP040: the mesh each fully_shard group was laid out on, and its placements.
MESH_NAMES = """
from torch.distributed.device_mesh import init_device_mesh

world = init_device_mesh("cpu", (1, 2), mesh_dim_names=NAMES)
model = make_model()
fully_shard(model, mesh=world[SLICE] if SLICE else world)  # <shard>
train(model, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_mesh_probe_sees_placements_that_contradict_the_mesh_dims_names(run_scripts):
    def body(names, slice_):
        return f"NAMES = {names!r}\nSLICE = {slice_!r}\n" + MESH_NAMES

    whole, hsdp, sliced = run_scripts(
        body(("dp", "tp"), None), body(("replicate", "shard"), None), body(("dp", "tp"), "tp")
    )

    # (the root's one parameter group is FSDP034's evidence too)
    [evidence] = [found for found in observe(whole) if found.kind == "wrong_mesh"]
    assert evidence.kind == "wrong_mesh" and evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(script_source(body(("dp", "tp"), None)), "# <shard>"),)
    assert "on the 2-D mesh ('dp', 'tp') (shape (1, 2)) as (Replicate(), Shard(dim=0))" in evidence.summary
    assert matches(evidence, RuntimeSignature("wrong_mesh", min_ranks=2))
    for fine in (hsdp, sliced):  # a (replicate, shard) HSDP mesh; a 1-D slice (whatever its name)
        assert fine.completed() and "wrong_mesh" not in kinds(fine)
    [(_, layout)] = [item for item in sliced.of_kind(events.SHARD_MESH) if item[0] == 0]
    assert layout["ndim"] == 1 and layout["dim_names"] == ["tp"] and layout["placements"] == ["Shard(dim=0)"]


# FSDP036: a reentrant checkpoint around an already-sharded block, run twice before one backward.
REENTRANT_TWICE = """
from torch.utils.checkpoint import checkpoint

model = shard(make_model())
x = torch.randn(4, 8, requires_grad=True)
for _ in range(2):
    a = checkpoint(model[0], x, use_reentrant=True)  # twice
    b = checkpoint(model[0], x * 2, use_reentrant=True)
    (a + b).sum().backward()
"""
# The same two runs, non-reentrant; one run per backward; and the checkpoint inside the sharded module.
REENTRANT_NEAR_MISSES = """
from torch.utils.checkpoint import checkpoint

model = shard(make_model())
x = torch.randn(4, 8, requires_grad=True)
(checkpoint(model[0], x, use_reentrant=False) + checkpoint(model[0], x * 2, use_reentrant=False)).sum().backward()
for _ in range(2):
    checkpoint(model[0], x, use_reentrant=True).sum().backward()
inner = nn.Linear(8, 8)
wrapper = nn.Module()
wrapper.inner = inner
wrapper.forward = lambda t: checkpoint(inner, t, use_reentrant=True)
fully_shard(wrapper)
(wrapper(x) + wrapper(x * 2)).sum().backward()
with torch.no_grad():
    checkpoint(model[0], x, use_reentrant=True)
    checkpoint(model[0], x, use_reentrant=True)
checkpoint(model[0], x, use_reentrant=True).sum().backward()
"""


def test_reentrant_checkpoint_probe_needs_two_runs_of_a_sharded_module_before_its_backward(run_scripts):
    twice, near = run_scripts(REENTRANT_TWICE, REENTRANT_NEAR_MISSES)
    found = observe(twice)
    kinds = {e.kind for e in found}
    assert "reentrant_checkpoint_of_sharded" in kinds
    [evidence] = [e for e in found if e.kind == "reentrant_checkpoint_of_sharded"]
    assert evidence.ranks == (0, 1)
    assert evidence.lines == (line_of(script_source(REENTRANT_TWICE), "# twice"),)
    assert "ran the sharded FSDPLinear" in evidence.summary
    assert "2 times before one backward recomputed it" in evidence.summary
    assert matches(evidence, RuntimeSignature("reentrant_checkpoint_of_sharded"))
    assert len(list(twice.of_kind(events.REENTRANT_CHECKPOINT))) == 2  # once per rank, not once per step
    assert near.completed()
    assert not list(near.of_kind(events.REENTRANT_CHECKPOINT))
    assert all(e.kind != "reentrant_checkpoint_of_sharded" for e in observe(near))


# A sharded layer's weight given to a loss helper outside its forward: DTensor refuses the mix.
WEIGHT_OUTSIDE_FORWARD = """
import torch.nn.functional as F
def project(h, weight):
    return F.linear(h, weight)
model = shard(make_model())
x = torch.randn(4, 8)
project(x, model[0].weight)
"""
# The same error from a DTensor of the script's own (no FSDP parameter among the operands).
OWN_DTENSOR_MIXED = """
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
model = shard(make_model())
own = distribute_tensor(torch.randn(8, 8), init_device_mesh("cpu", (2,)), [Shard(0)])
torch.randn(4, 8) @ own
"""


def test_sharded_operand_probe_needs_an_fsdp_parameter_among_the_operands(run_scripts):
    weight, own = run_scripts(WEIGHT_OUTSIDE_FORWARD, OWN_DTENSOR_MIXED)
    [found] = [e for e in observe(weight) if e.kind == "sharded_param_outside_forward"]
    assert found.ranks == (0, 1)
    assert found.lines == (line_of(script_source(WEIGHT_OUTSIDE_FORWARD), "return F.linear(h, weight)"),)
    assert "got 0.weight of FSDPLinear as a sharded DTensor" in found.summary
    assert matches(found, RuntimeSignature("sharded_param_outside_forward"))
    assert "mixed torch.Tensor and DTensor" in list(own.of_kind(events.EXCEPTION))[0][1]["message"]
    assert not list(own.of_kind(events.SHARDED_OPERAND))
    assert [e.kind for e in observe(own)] == ["exception"]
