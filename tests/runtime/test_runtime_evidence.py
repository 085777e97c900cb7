"""Evidence detectors, matchers and verdicts over hand-written events (no processes, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_helpers import EXIT, START, synthetic_record

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence import EVIDENCE_KINDS, describe_expected, matches, observe
from fsdp2_lint.runtime.fixtures import Fixture
from fsdp2_lint.runtime.record import StackSite, parse_stack
from fsdp2_lint.runtime.verdict import Verdict, judge

NO_SYNC = RuntimeSignature("exception", ("AttributeError",), r"has no attribute 'no_sync'")
PARAMS_UNCHANGED = RuntimeSignature("params_unchanged")


NAMES = ["a.weight", "a.bias", "b.weight", "b.bias"]


def step(changed: int, optimizer_dtensor: int = 0, model_dtensor: int = 4, step_number: int = 1,
         no_grad: int = 0, not_held: int = 4) -> dict:
    """A step event of a 4-parameter model; the first parameters are the unchanged / gradient-less /
    not-held ones."""
    return {
        "kind": "step", "optimizer": "AdamW", "optimizer_id": 7, "optimizer_line": 12, "step": step_number,
        "optimizer_params": 4, "optimizer_dtensor": optimizer_dtensor, "model_params": 4,
        "model_dtensor": model_dtensor, "held_by_optimizer": 4 - not_held, "not_held": NAMES[:not_held],
        "grads_missing": no_grad, "no_grad": NAMES[:no_grad], "compared": 4, "changed": changed,
        "unchanged": NAMES[: 4 - changed], "line": 20,
    }  # fmt: skip


def save(target: str, dtensors: int = 3, line: int = 30) -> dict:
    return {"kind": "save", "target": target, "tensors": dtensors, "dtensors": dtensors, "line": line, "site": None}


def exception(message: str, types=("AttributeError", "Exception", "BaseException"), line: int = 40) -> dict:
    return {"kind": "exception", "type": types[0], "types": list(types), "message": message, "line": line,
            "script_lines": [line, 50]}  # fmt: skip


def test_every_kind_is_registered_with_a_description():
    assert {
        "exception", "params_unchanged", "dtensor_save", "hang", "crash",
        "partial_update", "grads_not_reduced", "not_materialized", "single_param_group",
    } <= set(EVIDENCE_KINDS)  # fmt: skip
    for name in EVIDENCE_KINDS:
        assert describe_expected(RuntimeSignature(name, message="x"))


def test_clean_run_shows_nothing_and_completes():
    run = synthetic_record({0: [START, step(changed=4, optimizer_dtensor=4, not_held=0), EXIT], 1: [START, EXIT]})
    assert observe(run) == []
    assert run.completed()


@pytest.mark.parametrize(
    "steps, expected",
    [
        ([step(0), step(0, step_number=2)], True),  # FSDP001: stale optimizer, nothing moves
        ([step(0), step(3, step_number=2)], False),  # something changed on a later step
        ([step(0, optimizer_dtensor=4, not_held=0)], False),  # optimizer holds the DTensors (e.g. lr=0)
        ([step(0, model_dtensor=0)], False),  # model not sharded: not this failure
    ],
)
def test_params_unchanged_needs_a_stale_optimizer_and_no_change_on_every_probed_step(steps, expected):
    run = synthetic_record({0: [START, *steps, EXIT], 1: [START, EXIT]})
    found = [evidence for evidence in observe(run) if evidence.kind == "params_unchanged"]
    assert bool(found) is expected
    if expected:
        assert found[0].ranks == (0,) and found[0].lines == (12, 20)
        assert matches(found[0], PARAMS_UNCHANGED)


@pytest.mark.parametrize(
    "steps, kind",
    [
        # FSDP008: the root's 2 params never change and the optimizer holds plain tensors instead
        ([step(2, optimizer_dtensor=2, not_held=2), step(2, optimizer_dtensor=2, not_held=2, step_number=2)],
         "partial_update"),
        # different parameters stuck at different steps: not "never"
        ([step(2, optimizer_dtensor=2, not_held=2), step(3, optimizer_dtensor=2, not_held=2, step_number=2)], None),
        # unchanged but held by the optimizer: not a capture problem
        ([step(2, optimizer_dtensor=2, not_held=0)], None),
        # FSDP014: held, trainable, no gradient, unchanged
        ([step(0, optimizer_dtensor=4, not_held=0, no_grad=4)], "grads_not_reduced"),
        ([step(2, optimizer_dtensor=4, not_held=0, no_grad=2)], "grads_not_reduced"),  # sync off on one block
        ([step(4, optimizer_dtensor=4, not_held=0)], None),  # every parameter trained
    ],
)
def test_step_evidence_for_parameters_that_never_train(steps, kind):
    run = synthetic_record({0: [START, *steps, EXIT], 1: [START, EXIT]})
    assert [evidence.kind for evidence in observe(run)] == ([kind] if kind else [])


META = RuntimeSignature("not_materialized", ("RuntimeError",), r"should be materialized from meta device")


def materialized(untouched: int, compared: int = 4) -> dict:
    return {"kind": "materialized", "to_empty_line": 30, "compared": compared, "untouched": NAMES[:untouched],
            "untouched_count": untouched, "line": 40}  # fmt: skip


def test_not_materialized_is_to_empty_memory_nobody_wrote_or_fsdps_meta_error():
    [never_written] = observe(synthetic_record({0: [START, materialized(4), EXIT], 1: [START, materialized(4), EXIT]}))
    assert never_written.kind == "not_materialized" and never_written.lines == (30, 40)
    assert matches(never_written, META)
    # a zero-initialised bias may equal the zeros to_empty() happened to leave: only "all" counts
    assert observe(synthetic_record({0: [START, materialized(1), EXIT], 1: [START, EXIT]})) == []
    meta_error = exception("FSDP parameters should be materialized from meta device before training",
                           types=("RuntimeError", "Exception"))  # fmt: skip
    [error] = observe(synthetic_record({0: [START, meta_error], 1: [START, meta_error]}))
    assert matches(error, META)
    assert not matches(error, RuntimeSignature("not_materialized"))  # no exception declared: only the probe
    other = exception("boom", types=("RuntimeError", "Exception"))
    assert not matches(observe(synthetic_record({0: [START, other], 1: [START, EXIT]}))[0], META)


def fully_shard(nested: int, owners: int) -> dict:
    return {"kind": "fully_shard", "module": "FSDPModel", "params": 7, "nested": nested, "owners": owners,
            "line": 25, "site": None}  # fmt: skip


@pytest.mark.parametrize(
    "events, evidence",
    [
        ([fully_shard(nested=0, owners=4)], True),  # only the root: one group for 4 modules
        ([fully_shard(nested=0, owners=1), fully_shard(nested=0, owners=1)], False),  # blocks, each alone
        ([fully_shard(nested=2, owners=2)], False),  # the root's own group after its blocks: normal
        ([fully_shard(nested=0, owners=1)], False),  # a one-module model
    ],
)
def test_single_param_group_needs_several_modules_in_a_group_with_no_nested_group(events, evidence):
    run = synthetic_record({0: [START, *events, EXIT], 1: [START, *events, EXIT]})
    assert [e.kind for e in observe(run)] == (["single_param_group"] if evidence else [])


@pytest.mark.parametrize(
    "rank0, rank1, evidence",
    [
        ([save("/o/ckpt.pt")], [], True),  # rank 0 only: the file lacks rank 1's shards
        ([save("/o/ckpt.pt")], [save("/o/ckpt.pt")], True),  # both ranks overwrite one file
        ([save("/o/shard0.pt")], [save("/o/shard1.pt")], False),  # one file per rank, on purpose
        ([save("/o/ckpt.pt", dtensors=0)], [], False),  # plain tensors (a gathered full state dict)
    ],
)
def test_dtensor_save_ignores_per_rank_shard_files(rank0, rank1, evidence):
    run = synthetic_record({0: [START, *rank0, EXIT], 1: [START, *rank1, EXIT]})
    found = [e for e in observe(run) if e.kind == "dtensor_save"]
    assert bool(found) is evidence
    if evidence:
        assert found[0].lines == (30,) and "ckpt.pt" in found[0].summary


def test_exceptions_are_grouped_across_ranks_and_matched_by_type_and_message():
    error = exception("'FSDPModel' object has no attribute 'no_sync'")
    run = synthetic_record({0: [START, error], 1: [START, error]})
    [evidence] = observe(run)
    assert evidence.ranks == (0, 1) and evidence.lines == (40, 50)
    assert matches(evidence, NO_SYNC)
    assert not matches(evidence, RuntimeSignature("exception", ("RuntimeError",), NO_SYNC.message))
    assert not matches(evidence, RuntimeSignature("exception", ("AttributeError",), "mixed"))
    assert not matches(evidence, PARAMS_UNCHANGED)
    subclass = exception("boom", types=("DistBackendError", "RuntimeError", "Exception"))
    [backend_error] = observe(synthetic_record({0: [START, subclass], 1: [START, EXIT]}))
    assert matches(backend_error, RuntimeSignature("exception", ("RuntimeError",), "boom"))


def test_hang_reports_each_ranks_last_event_and_stack_line():
    collective = {"kind": "collective", "op": "barrier", "line": 33, "site": None}
    run = synthetic_record(
        {0: [START, collective], 1: [START, EXIT]},
        timed_out=(0,),
        stacks={0: StackSite(lines=(33, 60), innermost="barrier (distributed_c10d.py:4800)")},
    )
    [evidence] = observe(run)
    assert evidence.kind == "hang" and evidence.ranks == (0,) and evidence.lines == (33, 60)
    assert "rank 0 last reached barrier at line 33; stuck at line 33 in barrier" in evidence.summary
    assert "rank 1 finished" in evidence.summary


def test_crash_excludes_ranks_the_launcher_stopped():
    error = exception("boom", types=("RuntimeError", "Exception"))
    stopped = synthetic_record({0: [START, error], 1: [START]}, returncodes={0: 1, 1: -9}, stopped=(1,))
    assert [e.kind for e in observe(stopped)] == ["exception"]
    died = synthetic_record({0: [START, EXIT], 1: [START]}, returncodes={0: 0, 1: -11})
    assert [(e.kind, e.ranks) for e in observe(died)] == [("crash", (1,))]
    exited = synthetic_record({0: [START, EXIT], 1: [START, {"kind": "exit", "code": 3}]})
    assert [e.summary for e in observe(exited)] == ["rank 1 exited with code 3"]


def test_parse_stack_finds_the_innermost_script_line():
    dump = """Thread 0x00007f00 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait

Current thread 0x00007f01 (most recent call first):
  File "/venv/torch/distributed/distributed_c10d.py", line 4800 in barrier
  File "/work/train.py", line 42 in save
  File "/work/train.py", line 57 in <module>
"""
    expected = StackSite(lines=(42, 57), innermost="barrier (distributed_c10d.py:4800)")
    assert parse_stack(dump, "/work/train.py") == expected
    assert parse_stack("", "/work/train.py").line is None


def fixture(name: str, signature: RuntimeSignature = NO_SYNC) -> Fixture:
    return Fixture("FSDP005", Path(f"/f/FSDP005/{name}.py"), signature)


def test_verdicts_follow_the_evidence_not_the_exit():
    raised = synthetic_record({0: [START, exception("'M' has no attribute 'no_sync'")], 1: [START, EXIT]})
    other = synthetic_record({0: [START, exception("something else")], 1: [START, EXIT]})
    clean = synthetic_record({0: [START, EXIT], 1: [START, EXIT]})
    saved = synthetic_record({0: [START, save("/o/c.pt"), EXIT], 1: [START, EXIT]})

    assert judge(fixture("bad_x"), raised).verdict is Verdict.CONFIRMED
    assert judge(fixture("bad_x"), other).verdict is Verdict.NOT_CONFIRMED  # failed differently
    assert judge(fixture("bad_x"), clean).verdict is Verdict.NOT_CONFIRMED
    assert judge(fixture("good_x"), clean).verdict is Verdict.CLEAN
    assert judge(fixture("good_x"), saved).verdict is Verdict.UNEXPECTED  # finished, but with evidence
    assert judge(fixture("good_x"), raised).verdict is Verdict.UNEXPECTED
    assert judge(fixture("bad_x", PARAMS_UNCHANGED), raised).verdict is Verdict.NOT_CONFIRMED
