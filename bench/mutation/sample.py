"""Keep a reproducible sample of a cosmic-ray session's mutants: every pending mutant whose
(module, operator, occurrence) hashes into the first 1/STEP of the range stays pending; the others
are marked skipped, so `cosmic-ray exec` runs the sample only. The same code gives the same sample.

    python bench/mutation/sample.py SESSION.sqlite STEP
"""

from __future__ import annotations

import hashlib
import sys

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def sampled(item, step: int) -> bool:
    key = "|".join(f"{m.module_path}:{m.operator_name}:{m.occurrence}" for m in item.mutations)
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % step == 0


def main(session: str, step: int) -> None:
    with use_db(session, WorkDB.Mode.open) as db:
        pending = list(db.pending_work_items)
        left_out = [item.job_id for item in pending if not sampled(item, step)]
        for job_id in left_out:
            db.set_result(job_id, WorkResult(output="not sampled", worker_outcome=WorkerOutcome.SKIPPED))
    print(f"{len(pending) - len(left_out)} of {len(pending)} mutants sampled (1 in {step})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
