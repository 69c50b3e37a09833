"""Parallel steps on the real 2-node Ray test cluster: each node has its own copy of the job
folder, so the gang's processes take their mini-batches from process 0 over TCP; the rows they
append are what one process appends over the same input (order aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jobs import record
from support.parallel_jobs import appended, entry_stdout, one_process_rows, pipeline

pytestmark = pytest.mark.slow
TIMEOUT = 900  # a loaded machine starts Ray workers slowly


def test_parallel_steps_on_ray_append_what_one_process_does(
    ray_cli, ray_target, distrun_home: Path, tmp_path: Path
) -> None:
    proc = ray_cli("run", str(pipeline(tmp_path, compute=ray_target)), "--name", "scored")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    expected = one_process_rows(tmp_path)
    for step in ("files", "table"):
        assert sorted(appended(distrun_home, f"scored.{step}")) == sorted(expected[step]), step
        child = record(distrun_home, f"scored.{step}")
        assert {p["rank"]: p["node_rank"] for p in child["processes"]} == {0: 0, 1: 0, 2: 1, 3: 1}
    # Each node's per-process logs came back with its ./logs, every process's init() in its own.
    assert [entry_stdout(distrun_home, "scored.files", r).count(f"init on rank {r}") for r in range(4)] == [1] * 4
