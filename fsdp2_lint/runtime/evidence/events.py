"""The run directory layout and the per-rank event log (JSON lines).

Each rank appends one JSON object per event to ``events-rank<R>.jsonl`` and flushes it at once, so
the last event a rank reached survives the rank being killed. Torch-free: the harness reads these
files, the rank processes write them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

START = "start"  # rank, world_size, pid, script, device, backend
# line, module, params; call (ordinal on this rank), values
# (per parameter: name, index of this rank's shard, local fingerprint, and where this rank had loaded
# it: loaded_line, chunks = every rank's chunk fingerprint); fsdp1_params (FSDP1-managed parameters
# this call sharded again); offload_policy, foreign_offload, group_params, offloaded
FULLY_SHARD = "fully_shard"
# line, module, shard_line, params, nested (groups inside it), owners (modules owning parameters of its
# own group), changed_since_shard ([call, name] of shards written since their fully_shard): a sharded
# module no other sharded module contains, at its first forward
FIRST_FORWARD = "first_forward"
LOAD = "load"  # line, module, params: load_state_dict into a module not sharded yet
GRAD_NORM = "grad_norm"  # line, function, occurrence, value, local_sq, global_sq (+ given* for clipping)
STATE_DICT = "state_dict"  # line, module, requested, config_line, tensors, dtensors (after set_state_dict_type)
SUMMON = "summon"  # line, module, params, sharded: inside FSDP.summon_full_params
TO_EMPTY = "to_empty"  # line, module, params
MATERIALIZED = "materialized"  # at the first step: to_empty_line, compared, untouched(_count)
# at the first step: to_empty_line, compared (non-persistent buffers), untouched ("Class.name"), untouched_count
BUFFERS_AFTER_TO_EMPTY = "buffers_after_to_empty"
# at the first step: to_empty_line, module, ties (parameters registered under several names just before
# to_empty), broken (their name groups that now hold distinct tensors), broken_count, line
TIES_AFTER_TO_EMPTY = "ties_after_to_empty"
# line, optimizer, params, dtensor_params, replaced_params (tensors fully_shard replaced), unsharded_params
# (plain tensors that were the sharded model's parameters when it was built), optimizer_id
OPTIMIZER = "optimizer"
# optimizer, params, dtypes, low_precision, policy_noop (its parameters fully_shard kept in the
# low-precision param_dtype of their MixedPrecisionPolicy, which cast nothing), policy_dtype, line
MASTER_WEIGHTS = "master_weights"
STEP = "step"  # see Probes._after_step
SAVE = "save"  # line, target, dtensors, tensors
COLLECTIVE = "collective"  # op, line
# line, module, params, stale, names: at a parameter group's pre-forward, the group was still unsharded
# and its unsharded copy no longer matches this rank's shard (updated since it was gathered)
STALE_UNSHARDED = "stale_unsharded"
# phase (forward of a sharded root / backward call), forwards, backwards (counts so far on this rank), line
PASS = "pass"
# module (the group's module name; "<root>" for the root's), count (its forwards so far on this rank),
# forwards (the root forwards so far), line: a sharded group began a forward (FSDP012)
GROUP_FORWARD = "group_forward"
# line (the optimizer step), backwards, groups, reduce_scatters, most_per_group: FSDP2 gradient
# reduce-scatters since the previous optimizer step (FSDP033)
REDUCE_SCATTERS = "reduce_scatters"
# line (the forward that ran the group's lazy init), module, dtypes ({dtype: count} of the parameters that
# require gradients), names ({dtype: first names}), frozen_dtypes: a parameter group whose trainable
# parameters have two or more dtypes, just before FSDP2 checks them (FSDP026)
GROUP_DTYPES = "group_dtypes"


# line (the call of the module), module, shape, resharded (it freed its parameters after forward), writes:
# before a backward, an output of a sharded module that is a view was modified in place after FSDP2 hooked it
INPLACE_VIEW_OUTPUT = "inplace_view_output"


# line, module, params, ndim, dim_names, shape, placements (per mesh dim): the mesh a fully_shard call laid
# its group's parameters out on (FSDP040), one event per distinct layout
SHARD_MESH = "shard_mesh"


# line (the first of the pending checkpointed forwards), module, forwards: a backward recomputed an FSDP2 module
# that a reentrant activation checkpoint had run forward that many times since its last recompute (FSDP036)
REENTRANT_CHECKPOINT = "reentrant_checkpoint"


# line, op, names, params, module, sharded (groups still sharded), in_forward (groups in their forward):
# DTensor refused an operator mixing plain tensors with the local shard of FSDP2 parameters (FSDP019)
SHARDED_OPERAND = "sharded_operand"
EXCEPTION = "exception"  # types (MRO names), message, line, traceback
EXIT = "exit"  # code: the script returned (or called sys.exit) on this rank
HARNESS_ERROR = "harness_error"  # the rank could not run the script at all (message)
PROBE_ERROR = "probe_error"  # a probe itself failed; the script went on (probe, message)


def events_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"events-rank{rank}.jsonl"


def stdout_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"stdout-rank{rank}.txt"


def stderr_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"stderr-rank{rank}.txt"


def stack_path(run_dir: Path, rank: int) -> Path:
    """Where a rank dumps its Python stacks when the harness stops it (faulthandler)."""
    return run_dir / f"stack-rank{rank}.txt"


def lines_path(run_dir: Path, rank: int) -> Path:
    """Line numbers of the user's script in the order each was first executed (one per line)."""
    return run_dir / f"lines-rank{rank}.txt"


def output_dir(run_dir: Path) -> Path:
    """Scratch directory shared by the ranks of one run (``FSDP2_LINT_OUTDIR``)."""
    return run_dir / "out"


class EventLog:
    """Append-only, thread-safe, flushed-per-event writer of one rank's events."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._pid = os.getpid()

    def write(self, kind: str, **fields: Any) -> None:
        if os.getpid() != self._pid:
            return  # a process the script forked (DataLoader worker, ...) inherited the probes
        record = {"kind": kind, "t": round(time.monotonic() - self._start, 4), **fields}
        line = json.dumps(record, default=repr)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def read_events(path: Path) -> list[dict[str, Any]]:
    """All complete events of one rank; a line cut short by a kill is dropped."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [event for event in map(read_line, lines) if event is not None]


def read_line(line: str) -> dict[str, Any] | None:
    """One event; None for a line cut short."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None
