"""Evidence detectors, matchers and verdicts over hand-written events (no processes, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_helpers import EXIT, START, synthetic_record

from fsdp2_lint.rule import RuntimeSignature
from fsdp2_lint.runtime.evidence.device import CPU
from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec, StackSite, parse_stack
from fsdp2_lint.runtime.evidence.registry import EVIDENCE_KINDS, describe_expected, matches, observe
from fsdp2_lint.runtime.harness.fixtures import Fixture
from fsdp2_lint.runtime.harness.verdict import Verdict, judge, not_reproducible, not_runnable

NO_SYNC = RuntimeSignature("exception", ("AttributeError",), r"has no attribute 'no_sync'")
PARAMS_UNCHANGED = RuntimeSignature("params_unchanged")


NAMES = ["a.weight", "a.bias", "b.weight", "b.bias"]


def step(
    changed: int,
    optimizer_dtensor: int = 0,
    model_dtensor: int = 4,
    step_number: int = 1,
    no_grad: int = 0,
    not_held: int = 4,
    replaced: int = 0,
    sync_off: int = 0,
    unsharded: int = 0,
) -> dict:
    """A step event of a 4-parameter model; the first parameters are the unchanged / gradient-less /
    not-held / gradient-sync-off ones. The optimizer holds ``replaced`` tensors fully_shard replaced
    and ``unsharded`` plain tensors that were the sharded model's parameters when it was built."""
    return {
        "kind": "step", "optimizer": "AdamW", "optimizer_id": 7, "optimizer_line": 12, "optimizer_lines": [12],
        "step": step_number,
        "optimizer_params": 4, "optimizer_dtensor": optimizer_dtensor, "optimizer_replaced": replaced,
        "optimizer_unsharded": unsharded, "model_params": 4, "model_dtensor": model_dtensor,
        "held_by_optimizer": 4 - not_held, "not_held": NAMES[:not_held], "grads_missing": no_grad,
        "no_grad": NAMES[:no_grad], "sync_off": NAMES[:sync_off], "sync_off_count": sync_off,
        "sync_off_changed": max(0, sync_off - (4 - changed)), "sync_off_not_held": min(sync_off, not_held),
        "sync_off_lines": [16] if sync_off else [], "compared": 4, "changed": changed,
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
        "not_loaded", "wrong_grad_norm", "state_dict_type_ignored", "still_sharded",
        "fsdp1_params_resharded", "offload_policy_ignored",
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
        ([step(0, replaced=4), step(0, replaced=4, step_number=2)], True),  # FSDP001: stale optimizer, nothing moves
        ([step(0, replaced=4), step(3, replaced=4, step_number=2)], False),  # something changed on a later step
        ([step(0, optimizer_dtensor=4, not_held=0)], False),  # optimizer holds the DTensors (e.g. lr=0)
        ([step(0, replaced=4, model_dtensor=0)], False),  # model not sharded: not this failure
        # an optimizer over another, unsharded model: the sharded one does not move at its step
        ([step(0), step(0, step_number=2)], False),
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
        # FSDP008: the root's 2 params never change and the optimizer holds their unsharded tensors instead
        (
            [step(2, 2, not_held=2, unsharded=2), step(2, 2, not_held=2, unsharded=2, step_number=2)],
            "partial_update",
        ),
        # different parameters stuck at different steps: not "never"
        ([step(2, 2, not_held=2, unsharded=2), step(3, 2, not_held=2, unsharded=2, step_number=2)], None),
        # unchanged but held by the optimizer: not a capture problem
        ([step(2, 2, not_held=0, unsharded=2)], None),
        # the plain tensors held are not the model's (a learnable scale of its own), the rest left out on purpose
        ([step(2, 2, not_held=2), step(2, 2, not_held=2, step_number=2)], None),
        # FSDP014: held, trainable, no gradient (its sync off at the backward), unchanged
        ([step(0, optimizer_dtensor=4, not_held=0, no_grad=4, sync_off=4)], "grads_not_reduced"),
        ([step(2, optimizer_dtensor=4, not_held=0, no_grad=2, sync_off=2)], "grads_not_reduced"),  # one block
        ([step(2, optimizer_dtensor=4, not_held=0, no_grad=2)], None),  # sync on: parameters the forward left out
        ([step(0, no_grad=4, sync_off=4)], None),  # sync off, but the optimizer holds other tensors
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


def fully_shard() -> dict:
    return {"kind": "fully_shard", "module": "FSDPModel", "params": 7, "line": 25, "site": None}


def first_forward(nested: int, owners: int) -> dict:
    return {"kind": "first_forward", "module": "FSDPModel", "shard_line": 25, "params": 7, "nested": nested,
            "owners": owners, "changed_since_shard": [], "line": 31, "site": None}  # fmt: skip


@pytest.mark.parametrize(
    "events, evidence",
    [
        ([first_forward(nested=0, owners=4)], True),  # only the root: one group for 4 modules
        ([first_forward(nested=2, owners=2)], False),  # the root's own group after its blocks: normal
        ([first_forward(nested=0, owners=1)], False),  # a one-module model
        ([fully_shard()], False),  # sharded, never run (a top-down script fails before its forward)
    ],
)
def test_single_param_group_is_the_layout_of_the_outermost_group_at_its_first_forward(events, evidence):
    run = synthetic_record({0: [START, *events, EXIT], 1: [START, *events, EXIT]})
    found = observe(run)
    assert [e.kind for e in found] == (["single_param_group"] if evidence else [])
    if evidence:
        assert found[0].lines == (25, 31)


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


HANG = RuntimeSignature("hang", min_ranks=2)


def test_a_collective_that_raises_because_its_partner_never_came_is_an_unmatched_collective():
    reduce = {"kind": "collective", "op": "all_reduce", "line": 9, "site": None}
    reset = exception("Connection reset by peer", types=("RuntimeError", "Exception"), line=9)
    [evidence] = observe(synthetic_record({0: [START, reduce, reset], 1: [START, EXIT]}))
    assert evidence.kind == "unmatched_collective" and evidence.ranks == (0,) and evidence.lines == (9,)
    assert evidence.summary == (
        "all_reduce at line 9 raised RuntimeError on rank 0, which rank 1 never joined there: rank 1 last reached exit"
    )
    assert matches(evidence, HANG)  # the failure FSDP007 declares, in the form that raises


def test_a_collective_every_rank_ran_that_raises_is_an_exception_only():
    reduce = {"kind": "collective", "op": "all_reduce", "line": 9, "site": None}
    mismatch = exception("size mismatch", types=("RuntimeError", "Exception"), line=9)
    [evidence] = observe(synthetic_record({0: [START, reduce, mismatch], 1: [START, reduce, mismatch]}))
    assert evidence.kind == "exception" and not matches(evidence, HANG)


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
    expected = StackSite((42, 57), "barrier (distributed_c10d.py:4800)", "/venv/torch/distributed/distributed_c10d.py")
    assert parse_stack(dump, "/work/train.py") == expected
    assert parse_stack("", "/work/train.py").line is None
    # a later dump of the same threads (the rank went on after an earlier one) is where it is now
    later = dump.replace("line 4800 in barrier", "line 4900 in all_reduce").replace(
        "line 42 in save", "line 43 in save"
    )
    assert parse_stack(dump + later, "/work/train.py").lines == (43, 57)


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


def test_a_failure_that_needs_more_ranks_than_ran_is_not_runnable_unless_it_showed():
    needs_two = RuntimeSignature("exception", ("AttributeError",), r"has no attribute 'no_sync'", min_ranks=2)
    one_rank_raised = synthetic_record({0: [START, exception("'M' has no attribute 'no_sync'")]}, world_size=1)
    one_rank_other = synthetic_record({0: [START, exception("something else")]}, world_size=1)
    one_rank_clean = synthetic_record({0: [START, EXIT]}, world_size=1)
    two_ranks_clean = synthetic_record({0: [START, EXIT], 1: [START, EXIT]})

    assert judge(fixture("bad_x", needs_two), one_rank_raised).verdict is Verdict.CONFIRMED  # it showed anyway
    not_runnable = judge(fixture("bad_x", needs_two), one_rank_other)
    assert (not_runnable.verdict, not_runnable.note) == (Verdict.NOT_RUNNABLE, "its failure needs 2 ranks; 1 ran")
    assert judge(fixture("bad_x", needs_two), one_rank_clean).verdict is Verdict.NOT_RUNNABLE
    assert judge(fixture("bad_x", needs_two), two_ranks_clean).verdict is Verdict.NOT_CONFIRMED
    assert judge(fixture("bad_x"), one_rank_clean).verdict is Verdict.NOT_CONFIRMED  # one rank is enough for it
    assert judge(fixture("good_x", needs_two), one_rank_other).verdict is Verdict.UNEXPECTED  # goods run at any size


# How each verdict counts in a run's summary, kept here rather than read from the code under test.
OUTCOMES = {
    Verdict.CONFIRMED: ("passed", True, False),
    Verdict.CLEAN: ("passed", True, False),
    Verdict.NOT_CONFIRMED: ("failed", False, True),
    Verdict.UNEXPECTED: ("failed", False, True),
    Verdict.NOT_RUNNABLE: ("skipped", False, False),  # like a skipped test: never a pass, never a failure
    Verdict.NOT_REPRODUCIBLE: ("skipped", False, False),
}


def test_each_verdict_counts_as_passed_failed_or_skipped():
    assert set(OUTCOMES) == set(Verdict)
    for verdict, expected in OUTCOMES.items():
        assert (verdict.outcome, verdict.passed, verdict.failed) == expected, verdict


def test_a_verdicts_note_says_why_a_fixture_did_not_pass():
    unfinished = synthetic_record({0: [START, EXIT], 1: [START]})
    probe_error = {"kind": "probe_error", "probe": "step", "message": "no optimizer"}
    with_probe_error = synthetic_record({0: [START, probe_error, EXIT], 1: [START, EXIT]})
    clean = synthetic_record({0: [START, EXIT], 1: [START, EXIT]})
    raised = synthetic_record({0: [START, exception("'M' has no attribute 'no_sync'")], 1: [START, EXIT]})

    assert judge(fixture("bad_x"), clean).note == "ran to completion without the failure"
    assert judge(fixture("bad_x"), raised).note == ""  # confirmed
    failed_otherwise = synthetic_record({0: [START, exception("something else")], 1: [START, EXIT]})
    assert judge(fixture("bad_x"), failed_otherwise).note == ""  # its evidence says how; it did not run through
    assert judge(fixture("good_x"), clean).note == ""
    unexpected = judge(fixture("good_x"), unfinished)
    assert (unexpected.verdict, unexpected.note) == (Verdict.UNEXPECTED, "ranks [1] did not finish")
    assert judge(fixture("good_x"), with_probe_error).note == "probe errors: step: no optimizer"
    assert judge(fixture("bad_x"), with_probe_error).note == (
        "ran to completion without the failure; probe errors: step: no optimizer"
    )


def test_a_failing_verdict_carries_the_stderr_of_the_first_failing_rank(tmp_path):
    for rank in (0, 1):
        (tmp_path / f"stderr-rank{rank}.txt").write_text(f"rank {rank} says\n")

    def record(events: dict) -> RunRecord:
        return RunRecord(RunSpec(Path("/nowhere/train.py"), tmp_path, 10.0), 2, CPU, 2.5, events)

    rank1_raised = record({0: [START, EXIT], 1: [START, exception("boom")]})
    failed = judge(fixture("good_x"), rank1_raised)
    assert (failed.verdict, failed.log_tail, failed.seconds) == (Verdict.UNEXPECTED, "rank 1 says", 2.5)
    both_raised = record({0: [START, exception("boom")], 1: [START, exception("boom")]})
    assert judge(fixture("good_x"), both_raised).log_tail == "rank 0 says"  # the first of them
    saved = record({0: [START, save("/o/c.pt"), EXIT], 1: [START, EXIT]})  # failed with no failing rank
    assert judge(fixture("good_x"), saved).log_tail == "rank 0 says"
    assert judge(fixture("bad_x"), record({0: [START, EXIT], 1: [START, EXIT]})).log_tail == "rank 0 says"
    assert judge(fixture("good_x"), record({0: [START, EXIT], 1: [START, EXIT]})).log_tail == ""  # clean
    assert judge(fixture("bad_x"), rank1_raised).log_tail == "rank 1 says"  # NOT confirmed: it raised otherwise
    confirmed = record({0: [START, EXIT], 1: [START, exception("'M' has no attribute 'no_sync'")]})
    assert judge(fixture("bad_x"), confirmed).log_tail == ""
    assert not_runnable(fixture("bad_x"), "needs 2 GPUs").log_tail == ""


def test_a_fixture_not_run_has_its_reason_no_evidence_and_no_time():
    for result, verdict in (
        (not_runnable(fixture("bad_x"), "needs 2 GPUs; running on CPU"), Verdict.NOT_RUNNABLE),
        (not_reproducible(fixture("bad_x"), "needs 2 GPUs; running on CPU"), Verdict.NOT_REPRODUCIBLE),
    ):
        assert (result.verdict, result.note, result.evidence, result.seconds) == (
            verdict,
            "needs 2 GPUs; running on CPU",
            (),
            0.0,
        )


def test_what_a_fixture_is_expected_to_show_and_which_evidence_matches_it():
    raised = synthetic_record({0: [START, exception("'M' has no attribute 'no_sync'")], 1: [START, EXIT]})
    bad, good = judge(fixture("bad_x"), raised), judge(fixture("good_x"), raised)
    assert bad.expected == describe_expected(NO_SYNC) != "trains cleanly"
    assert good.expected == "trains cleanly"
    assert bad.evidence == good.evidence and len(bad.evidence) == 1
    assert bad.matching(bad.evidence[0]) is True
    assert good.matching(good.evidence[0]) is False  # a good fixture's evidence is never what it expects


LOADED = [[128, 5, 50], [128, 7, 70]]  # fingerprints of the two chunks of one loaded parameter
OWN = [128, 9, 90]  # a chunk that is not the loaded one


def shard_values(index: int, local: list, chunks: list | None = None, call: int = 1) -> dict:
    value = {"name": "weight", "index": index, "local": local}
    if chunks is not None:
        value.update(loaded_line=12, chunks=chunks)
    return {"kind": "fully_shard", "module": "FSDPModel", "params": 1, "call": call, "values": [value], "line": 20,
            "site": None}  # fmt: skip


@pytest.mark.parametrize(
    "rank0, rank1, evidence",
    [
        (shard_values(0, LOADED[0], LOADED), shard_values(1, OWN), True),  # rank 1 kept its own chunk
        (shard_values(0, LOADED[0], LOADED), shard_values(1, LOADED[1]), False),  # broadcast before sharding
        (shard_values(0, LOADED[0], LOADED), shard_values(1, OWN, [OWN, OWN]), False),  # rank 1 loaded too
        (shard_values(0, OWN, LOADED), shard_values(1, OWN), False),  # loader's own shard unexplained: no claim
        (shard_values(0, LOADED[0]), shard_values(1, OWN), False),  # nobody loaded
        (shard_values(0, LOADED[0], LOADED), shard_values(1, OWN, call=2), False),  # different fully_shard calls
    ],
)
def test_not_loaded_compares_each_ranks_shard_with_its_chunk_of_the_loaded_values(rank0, rank1, evidence):
    run = synthetic_record({0: [START, rank0, EXIT], 1: [START, rank1, EXIT]})
    found = observe(run)
    assert [e.kind for e in found] == (["not_loaded"] if evidence else [])
    if evidence:
        assert found[0].ranks == (1,) and found[0].lines == (12, 20)
        assert "rank 0 loaded 1 parameters at line 12" in found[0].summary


@pytest.mark.parametrize("rewritten, evidence", [([], True), ([[1, "weight"]], False), ([[2, "weight"]], True)])
def test_not_loaded_needs_the_shard_unwritten_until_the_first_forward(rewritten, evidence):
    forward = {**first_forward(nested=1, owners=1), "changed_since_shard": []}
    rank1_forward = {**forward, "changed_since_shard": rewritten}  # e.g. a broadcast from rank 0 after sharding
    run = synthetic_record(
        {
            0: [START, shard_values(0, LOADED[0], LOADED), forward, EXIT],
            1: [START, shard_values(1, OWN), rank1_forward, EXIT],
        }
    )
    assert [e.kind for e in observe(run)] == (["not_loaded"] if evidence else [])


def grad_norm(value: float, local_sq: float, global_sq: float | None = None, occurrence: int = 1, **given) -> dict:
    return {"kind": "grad_norm", "function": given.pop("function", "torch.sqrt"), "occurrence": occurrence,
            "value": value, "local_sq": local_sq, "global_sq": local_sq if global_sq is None else global_sq,
            **given, "line": 44, "site": None}  # fmt: skip


STALE = dict(function="torch.nn.utils.clip_grad_norm_", given=4, given_model=0, given_grads=0, given_replaced=4)


@pytest.mark.parametrize(
    "rank0, rank1, summary",
    [
        # each rank's norm of its own shards (0.3 and 0.4) instead of the global 0.5
        (grad_norm(0.3, 0.09), grad_norm(0.4, 0.16), "returned 0.3 on rank 0, 0.4 on rank 1"),
        (grad_norm(0.5, 0.09), grad_norm(0.5, 0.16), None),  # the all-reduced, global norm
        (grad_norm(0.05, 0.09), grad_norm(0.07, 0.16), None),  # some other norm (a single parameter's)
        (grad_norm(0.3, 0.09, 0.045), grad_norm(0.3, 0.09, 0.045), None),  # replicated shards: local is global
        (grad_norm(0.0, 0.09, **STALE), grad_norm(0.0, 0.16, **STALE), "returned 0 over 4 tensors"),
        (grad_norm(0.0, 0.09, **{**STALE, "given_model": 4}), grad_norm(0.0, 0.16, **{**STALE, "given_model": 4}),
         None),  # the model's own parameters without gradients (frozen): 0 is right
        (grad_norm(0.0, 0.09, **{**STALE, "given_replaced": 0}),
         grad_norm(0.0, 0.16, **{**STALE, "given_replaced": 0}), None),  # another model's tensors
        (grad_norm(0.0, 0.0, **STALE), grad_norm(0.0, 0.0, **STALE), None),  # no gradient anywhere: 0 is right
        (grad_norm(0.3, 0.09), grad_norm(0.4, 0.16, occurrence=2), None),  # not the same call on both ranks
    ],
)  # fmt: skip
def test_wrong_grad_norm_compares_with_the_global_norm_summed_over_ranks(rank0, rank1, summary):
    run = synthetic_record({0: [START, rank0, EXIT], 1: [START, rank1, EXIT]})
    found = observe(run)
    assert [e.kind for e in found] == (["wrong_grad_norm"] if summary else [])
    if summary:
        assert summary in found[0].summary and "global" in found[0].summary
        assert found[0].lines == (44,) and matches(found[0], RuntimeSignature("wrong_grad_norm"))


STATE_DICT_TYPE = RuntimeSignature("state_dict_type_ignored", ("KeyError",), r"None")


def state_dict(requested: str = "FULL_STATE_DICT", dtensors: int = 7) -> dict:
    return {"kind": "state_dict", "module": "FSDPModel", "requested": requested, "config_line": 47,
            "tensors": 7, "dtensors": dtensors, "line": 60, "site": None}  # fmt: skip


def test_state_dict_type_ignored_is_dtensors_after_full_state_dict_or_the_context_exit_error():
    [ignored] = observe(synthetic_record({0: [START, state_dict(), EXIT], 1: [START, state_dict(), EXIT]}))
    assert ignored.kind == "state_dict_type_ignored" and ignored.lines == (47, 60) and ignored.ranks == (0, 1)
    assert matches(ignored, STATE_DICT_TYPE)
    for quiet in (state_dict("SHARDED_STATE_DICT"), state_dict(dtensors=0)):
        assert observe(synthetic_record({0: [START, quiet, EXIT], 1: [START, EXIT]})) == []
    key_error = exception("None", types=("KeyError", "LookupError", "Exception"))
    [error] = observe(synthetic_record({0: [START, key_error], 1: [START, key_error]}))
    assert matches(error, STATE_DICT_TYPE)
    assert not matches(error, RuntimeSignature("state_dict_type_ignored"))


def summon(sharded: int) -> dict:
    return {"kind": "summon", "module": "FSDPModel", "params": 4, "sharded": sharded, "line": 52, "site": None}


def test_still_sharded_needs_sharded_parameters_inside_summon_full_params():
    [evidence] = observe(synthetic_record({0: [START, summon(4), EXIT], 1: [START, summon(4), EXIT]}))
    assert evidence.kind == "still_sharded" and evidence.lines == (52,) and evidence.ranks == (0, 1)
    assert "4 of 4 parameters are still sharded" in evidence.summary
    assert observe(synthetic_record({0: [START, summon(0), EXIT], 1: [START, summon(0), EXIT]})) == []


MIXED = RuntimeSignature("fsdp1_params_resharded", ("RuntimeError",), r"mixed torch\.Tensor and DTensor")
POLICY = RuntimeSignature("offload_policy_ignored", ("AttributeError",), r"output_dtype")


def shard_call(**fields) -> dict:
    return {**fully_shard(), "fsdp1_params": 0, "offload_policy": "OffloadPolicy",
            "foreign_offload": False, "group_params": 2, "offloaded": 0, **fields}  # fmt: skip


@pytest.mark.parametrize(
    "event, kind",
    [
        (shard_call(fsdp1_params=2), "fsdp1_params_resharded"),
        (shard_call(offload_policy="CPUOffload", foreign_offload=True), "offload_policy_ignored"),
        (shard_call(offload_policy="CPUOffloadPolicy", offloaded=2), None),  # FSDP2's policy, honoured
        (shard_call(offload_policy="Custom", foreign_offload=True, offloaded=2), None),  # offloaded anyway
        (shard_call(), None),
    ],
)
def test_fully_shard_evidence_for_fsdp1_parameters_and_foreign_offload_policies(event, kind):
    run = synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]})
    found = observe(run)
    assert [e.kind for e in found] == ([kind] if kind else [])
    if kind:
        assert found[0].lines == (25,) and matches(found[0], MIXED if kind.startswith("fsdp1") else POLICY)


def test_silent_kinds_accept_the_exception_their_signature_declares():
    mixed = exception("aten.cat.default got mixed torch.Tensor and DTensor", types=("RuntimeError", "Exception"))
    [error] = observe(synthetic_record({0: [START, mixed], 1: [START, mixed]}))
    assert matches(error, MIXED) and not matches(error, POLICY)
    assert not matches(error, RuntimeSignature("fsdp1_params_resharded"))
    output_dtype = exception("'MixedPrecision' object has no attribute 'output_dtype'")
    [error] = observe(synthetic_record({0: [START, output_dtype], 1: [START, output_dtype]}))
    assert matches(error, POLICY) and not matches(error, MIXED)


def master_weights(noop: int) -> dict:
    return {"kind": "master_weights", "optimizer": "AdamW", "params": 4, "dtypes": ["bfloat16"],
            "low_precision": 4, "policy_noop": noop, "policy_dtype": "bfloat16" if noop else "",
            "line": 33, "site": None}  # fmt: skip


def test_low_precision_master_weights_needs_parameters_the_policy_left_uncast():
    [evidence] = observe(synthetic_record({0: [START, master_weights(4), EXIT], 1: [START, master_weights(4), EXIT]}))
    assert evidence.kind == "low_precision_master_weights" and evidence.lines == (33,) and evidence.ranks == (0, 1)
    assert "MixedPrecisionPolicy(param_dtype=bfloat16) found them already bfloat16" in evidence.summary
    # bf16 parameters with no policy of that dtype (pure bf16 training) are no evidence
    assert observe(synthetic_record({0: [START, master_weights(0), EXIT], 1: [START, master_weights(0), EXIT]})) == []


def buffers(untouched: int, compared: int = 2) -> dict:
    return {"kind": "buffers_after_to_empty", "to_empty_line": 30, "compared": compared,
            "untouched": ["Rotary.inv_freq"][:untouched], "untouched_count": untouched, "line": 40}  # fmt: skip


def test_buffer_not_recomputed_needs_a_buffer_still_as_to_empty_left_it():
    [left] = observe(synthetic_record({0: [START, buffers(1), EXIT], 1: [START, buffers(1), EXIT]}))
    assert left.kind == "buffer_not_recomputed" and left.lines == (30, 40) and left.ranks == (0, 1)
    assert "(Rotary.inv_freq)" in left.summary and matches(left, RuntimeSignature("buffer_not_recomputed"))
    assert observe(synthetic_record({0: [START, buffers(0), EXIT], 1: [START, buffers(0), EXIT]})) == []


def ties(broken: list[list[str]]) -> dict:
    return {"kind": "ties_after_to_empty", "to_empty_line": 30, "module": "LM", "ties": 1, "broken": broken,
            "broken_count": len(broken), "line": 40}  # fmt: skip


def test_tie_broken_needs_tied_names_that_hold_distinct_tensors():
    broken = ties([["emb.weight", "head.weight"]])
    [evidence] = observe(synthetic_record({0: [START, broken, EXIT], 1: [START, broken, EXIT]}))
    assert evidence.kind == "tie_broken" and evidence.lines == (30, 40) and evidence.ranks == (0, 1)
    assert "LM.to_empty() at line 30 broke 1 of 1 ties (emb.weight = head.weight)" in evidence.summary
    signature = RuntimeSignature("tie_broken", exception=("ValueError",), message="shared with a parameter")
    assert matches(evidence, signature)
    shared = {"kind": "exception", "types": ["ValueError"], "message": "Parameter 'emb.weight' is shared with a "
              "parameter already managed by another FSDP group", "line": 50}  # fmt: skip
    [raised] = observe(synthetic_record({0: [START, shared], 1: [START, shared]}))
    assert matches(raised, signature) and not matches(raised, RuntimeSignature("tie_broken"))
    assert observe(synthetic_record({0: [START, ties([]), EXIT], 1: [START, ties([]), EXIT]})) == []


def stale_unsharded(stale: int, names: tuple[str, ...] = ("layers.0.weight", "layers.0.bias")) -> dict:
    return {"kind": "stale_unsharded", "line": 26, "module": "FSDPLinear", "params": 2, "stale": stale,
            "names": list(names)}  # fmt: skip


def test_stale_unsharded_params_needs_a_copy_that_differs_from_the_shards():
    assert "stale_unsharded_params" in EVIDENCE_KINDS
    event = stale_unsharded(2)
    [evidence] = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert evidence.kind == "stale_unsharded_params" and evidence.lines == (26,) and evidence.ranks == (0, 1)
    assert "2 of 2 differ from the shards the optimizer step updated (layers.0.weight, layers.0.bias)" in (
        evidence.summary
    )
    assert matches(evidence, RuntimeSignature("stale_unsharded_params"))
    other = stale_unsharded(2, ("head.weight", "head.bias"))
    assert len(observe(synthetic_record({0: [START, event, other, EXIT], 1: [START, EXIT]}))) == 2
    quiet = stale_unsharded(0)
    assert observe(synthetic_record({0: [START, quiet, EXIT], 1: [START, quiet, EXIT]})) == []


def _pass(phase: str, forwards: int, backwards: int, line: int) -> dict:
    return {"kind": "pass", "phase": phase, "forwards": forwards, "backwards": backwards, "line": line, "site": None}


@pytest.mark.parametrize(
    ("rank1_last", "timed_out", "found"),
    [
        (_pass("forward", 3, 1, 44), (0, 1), True),  # rank 1 skipped a backward, then hung in its next forward
        (_pass("backward", 2, 2, 52), (0, 1), False),  # same counts: a hang of another cause
        (_pass("forward", 3, 1, 44), (), False),  # different counts, but no hang
    ],
)
def test_divergent_forward_count_needs_a_hang_and_different_pass_counts(rank1_last, timed_out, found):
    rank0 = [START, _pass("forward", 1, 0, 44), _pass("backward", 1, 1, 52), _pass("forward", 2, 1, 44)]
    rank0.append(_pass("backward", 2, 2, 52))
    rank1 = [START, _pass("forward", 1, 0, 44), _pass("backward", 1, 1, 52), rank1_last]
    run = synthetic_record({0: rank0, 1: rank1}, timed_out=timed_out)
    evidence = [e for e in observe(run) if e.kind == "divergent_forward_count"]
    assert bool(evidence) is found
    if found:
        assert evidence[0].ranks == (0, 1) and evidence[0].lines == (52, 44)
        assert "rank 0 2 forward(s), 2 backward(s)" in evidence[0].summary
        assert "rank 1 3 forward(s), 1 backward(s) (last: forward at line 44)" in evidence[0].summary
        assert matches(evidence[0], RuntimeSignature("divergent_forward_count", min_ranks=2))


@pytest.mark.parametrize(("rank1_forwards", "found"), [(4, True), (5, False)])
def test_divergent_forward_count_sees_a_forward_only_loop_one_rank_left_early(rank1_forwards, found):
    """A decode loop under no_grad: no backward at all, and a rank that met its EOS first ran fewer forwards."""
    rank0 = [START, *(_pass("forward", n, 0, 35) for n in range(1, 6))]
    rank1 = [START, *(_pass("forward", n, 0, 35) for n in range(1, rank1_forwards + 1))]
    run = synthetic_record({0: rank0, 1: rank1}, timed_out=(0, 1))
    evidence = [e for e in observe(run) if e.kind == "divergent_forward_count"]
    assert bool(evidence) is found
    if found:
        assert "rank 0 5 forward(s), 0 backward(s)" in evidence[0].summary
        assert "rank 1 4 forward(s), 0 backward(s)" in evidence[0].summary


def _group(module: str, count: int, forwards: int, line: int) -> dict:
    return {"kind": "group_forward", "module": module, "count": count, "forwards": forwards, "line": line, "site": None}


def _groups_pass(forwards: int, modules: list[str]) -> list[dict]:
    return [_pass("forward", forwards, forwards - 1, 54)] + [
        _group(module, forwards, forwards, 29 if module == "vision" else 31) for module in modules
    ]


@pytest.mark.parametrize(
    ("rank1_second", "timed_out", "found"),
    [
        (["layers.0", "layers.1"], (0, 1), True),  # rank 1 skipped the vision group: a hang
        (["layers.0"], (), True),  # the same skip, and a rank aborted in the mismatched all-gather
        (["vision"], (0, 1), False),  # rank 1 is only behind rank 0 in the same sequence
        (["vision", "layers.0", "layers.1"], (0, 1), False),  # the same groups: a hang of another cause
    ],
)
def test_divergent_forward_count_sees_a_sharded_group_one_rank_skipped(rank1_second, timed_out, found):
    first = _groups_pass(1, ["vision", "layers.0", "layers.1"]) + [_pass("backward", 1, 1, 55)]
    rank0 = [START, *first, *_groups_pass(2, ["vision", "layers.0", "layers.1"])]
    rank1 = [START, *first, *_groups_pass(2, rank1_second)]
    run = synthetic_record({0: rank0, 1: rank1}, timed_out=timed_out)  # no exit event: the run failed
    evidence = [e for e in observe(run) if e.kind == "divergent_forward_count"]
    assert bool(evidence) is found
    if found:
        assert evidence[0].ranks == (0, 1) and evidence[0].lines == (29, 31)
        assert "in forward #2 of the sharded model" in evidence[0].summary
        assert "rank 0 ran vision, layers.0, layers.1; rank 1 ran layers.0" in evidence[0].summary
        assert matches(evidence[0], RuntimeSignature("divergent_forward_count", min_ranks=2))


def test_divergent_group_sequences_of_a_run_that_completed_are_no_evidence():
    rank0 = [START, *_groups_pass(1, ["vision", "layers.0"]), EXIT]
    rank1 = [START, *_groups_pass(1, ["layers.0"]), EXIT]
    assert [e for e in observe(synthetic_record({0: rank0, 1: rank1})) if e.kind == "divergent_forward_count"] == []


# sync_per_microbatch (FSDP033) -------------------------------------------------------------------


def reduce_scatters(backwards: int, groups: int, total: int, most: int) -> dict:
    return {"kind": "reduce_scatters", "line": 47, "backwards": backwards, "groups": groups,
            "reduce_scatters": total, "most_per_group": most}  # fmt: skip


@pytest.mark.parametrize(
    "event, found",
    [
        (reduce_scatters(2, 3, 6, 2), True),  # bad_module_level: 2 micro-batches, each group reduced twice
        (reduce_scatters(2, 3, 3, 1), False),  # good_is_last_microbatch: sync off but on the last micro-batch
        (reduce_scatters(1, 3, 3, 1), False),  # good_no_accumulation: one backward per step
    ],
)
def test_sync_per_microbatch_needs_several_reduce_scatters_of_one_group_per_step(event, found):
    evidence = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert [e.kind for e in evidence] == (["sync_per_microbatch"] if found else [])
    if found:
        assert evidence[0].summary.startswith("2 backward passes before the optimizer step at line 47: 6 gradient")
        assert matches(evidence[0], RuntimeSignature("sync_per_microbatch"))


def group_dtypes(dtypes: dict[str, int], names: dict[str, list[str]]) -> dict:
    return {"kind": "group_dtypes", "line": 31, "module": "FSDPModel", "dtypes": dtypes, "names": names,
            "frozen_dtypes": []}  # fmt: skip


def test_nonuniform_group_dtype_needs_trainable_parameters_of_two_dtypes():
    assert "nonuniform_group_dtype" in EVIDENCE_KINDS
    event = group_dtypes({"bfloat16": 3, "float32": 2}, {"bfloat16": ["emb.weight"], "float32": ["norm.weight"]})
    [evidence] = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert evidence.kind == "nonuniform_group_dtype" and evidence.lines == (31,) and evidence.ranks == (0, 1)
    assert "trainable parameters of 2 dtypes at its first forward at line 31: bfloat16 (3: emb.weight); float32" in (
        evidence.summary
    )
    assert matches(evidence, RuntimeSignature("nonuniform_group_dtype"))
    uniform = group_dtypes({"bfloat16": 5}, {"bfloat16": ["emb.weight"]})
    assert observe(synthetic_record({0: [START, uniform, EXIT], 1: [START, uniform, EXIT]})) == []


def view_write(writes: int, resharded: bool = True) -> dict:
    return {"kind": "inplace_view_output", "line": 31, "module": "FSDPBlock", "shape": [4, 8],
            "resharded": resharded, "writes": writes}  # fmt: skip


def test_inplace_on_view_output_needs_a_write_on_a_resharded_module_output():
    assert "inplace_on_view_output" in EVIDENCE_KINDS
    event = view_write(1)
    [evidence] = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert evidence.kind == "inplace_on_view_output" and evidence.lines == (31,) and evidence.ranks == (0, 1)
    assert "the output of FSDPBlock at line 31 (a view, shape [4, 8]) was modified in place 1 time(s)" in (
        evidence.summary
    )
    assert matches(evidence, RuntimeSignature("inplace_on_view_output"))
    for quiet in (view_write(0), view_write(1, resharded=False)):
        assert observe(synthetic_record({0: [START, quiet, EXIT], 1: [START, quiet, EXIT]})) == []


# wrong_mesh (FSDP040) ----------------------------------------------------------------------------


def shard_mesh(names, shape=(2, 2), placements=("Replicate()", "Shard(dim=0)")) -> dict:
    return {"kind": "shard_mesh", "line": 40, "site": None, "module": "FSDPModel", "params": 3,
            "ndim": len(shape), "dim_names": list(names) if names else None, "shape": list(shape),
            "placements": list(placements)}  # fmt: skip


@pytest.mark.parametrize(
    "event, wrong",
    [
        (shard_mesh(("dp", "tp")), "sharded over 'tp'"),  # bad_module_level_dp_tp: the (dp, tp) world mesh whole
        (shard_mesh(("dp_shard", "dp_replicate")), "replicated over 'dp_shard'; sharded over 'dp_replicate'"),
        (shard_mesh(("pp", "dp")), "replicated over 'pp'"),  # a model-parallel dim replicated over
        (shard_mesh(("dp_replicate", "dp_shard")), None),  # good_hsdp_replicate_shard: HSDP in the order FSDP reads
        (shard_mesh(("dp",), (4,), ("Shard(dim=0)",)), None),  # good_dp_slice: the 1-D dp slice
        (shard_mesh(None), None),  # an unnamed 2-D mesh: its names say nothing
        (shard_mesh(("dp", "x")), None),  # names of no known role
    ],
)
def test_wrong_mesh_needs_a_placement_its_dims_names_contradict(event, wrong):
    evidence = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert [e.kind for e in evidence] == (["wrong_mesh"] if wrong else [])
    if wrong:
        assert evidence[0].lines == (40,) and evidence[0].ranks == (0, 1)
        assert evidence[0].summary.startswith("fully_shard at line 40 put 3 parameters of FSDPModel on the 2-D mesh")
        assert f"(wrong: {wrong})" in evidence[0].summary
        assert matches(evidence[0], RuntimeSignature("wrong_mesh", min_ranks=2))


# reentrant_checkpoint_of_sharded (FSDP036) -------------------------------------------------------


def test_reentrant_checkpoint_of_sharded_needs_two_runs_before_the_recompute():
    assert "reentrant_checkpoint_of_sharded" in EVIDENCE_KINDS
    event = {"kind": "reentrant_checkpoint", "line": 38, "module": "FSDPBlock (layers.0)", "forwards": 2}
    [evidence] = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert evidence.kind == "reentrant_checkpoint_of_sharded" and evidence.lines == (38,)
    assert evidence.ranks == (0, 1)
    assert "ran the sharded FSDPBlock (layers.0) 2 times before one backward recomputed it" in evidence.summary
    assert matches(evidence, RuntimeSignature("reentrant_checkpoint_of_sharded"))
    once = dict(event, forwards=1)
    assert observe(synthetic_record({0: [START, once, EXIT], 1: [START, once, EXIT]})) == []


# sharded_param_outside_forward (FSDP019) ----------------------------------------------------------


def sharded_operand(sharded: int = 1, in_forward: int = 0, params: int = 1) -> dict:
    return {"kind": "sharded_operand", "line": 31, "op": "aten.embedding.default", "names": ["emb.weight"][:params],
            "params": params, "module": "FSDPModel", "sharded": sharded, "in_forward": in_forward}  # fmt: skip


@pytest.mark.parametrize(
    "event, found",
    [
        (sharded_operand(), True),  # bad_module_level: an unregistered generate read the root's embedding
        (sharded_operand(sharded=0), False),  # the group was unsharded (the root's forward had gathered it)
        (sharded_operand(in_forward=1), False),  # inside the group's own forward: not a use outside the hooks
        (sharded_operand(params=0), False),  # a DTensor of the code's own, no FSDP parameter among the operands
    ],
)
def test_sharded_param_outside_forward_needs_a_sharded_fsdp_parameter_among_the_operands(event, found):
    evidence = observe(synthetic_record({0: [START, event, EXIT], 1: [START, event, EXIT]}))
    assert [e.kind for e in evidence] == (["sharded_param_outside_forward"] if found else [])
    if found:
        assert evidence[0].ranks == (0, 1) and evidence[0].lines == (31,)
        assert (
            "aten.embedding.default at line 31 got emb.weight of FSDPModel as a sharded DTensor" in evidence[0].summary
        )
        assert matches(evidence[0], RuntimeSignature("sharded_param_outside_forward"))
