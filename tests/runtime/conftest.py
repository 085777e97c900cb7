from __future__ import annotations

from collections.abc import Callable

import pytest
from runtime_helpers import script_source

from fsdp2_lint.runtime.evidence.record import RunRecord, RunSpec


@pytest.fixture(scope="session")
def pool(tmp_path_factory):
    """One rank pool (2 ranks, CPU) for every probe test: torch is imported once."""
    from fsdp2_lint.runtime.launch.pool import RankPool

    with RankPool(2, "cpu", jobs=2, log_dir=tmp_path_factory.mktemp("pool")) as started:
        yield started


@pytest.fixture
def run_scripts(pool, tmp_path) -> Callable[..., list[RunRecord]]:
    """Run several script bodies (after PRELUDE) concurrently; records in the order given."""

    def run(*bodies: str, timeout: float = 30.0) -> list[RunRecord]:
        specs = []
        for index, body in enumerate(bodies):
            script = tmp_path / f"script{index}.py"
            script.write_text(script_source(body))
            specs.append(RunSpec(script=script, run_dir=tmp_path / f"run{index}", timeout=timeout))
        records = {record.spec: record for record in pool.run_all(specs)}
        return [records[spec] for spec in specs]

    return run
