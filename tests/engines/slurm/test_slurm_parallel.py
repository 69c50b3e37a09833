"""Parallel steps on the real 2-node Slurm cluster: 2 nodes x 2 processes pull the mini-batches of a
folder of files and of an MLTable from process 0's queue, and append what one process appends
over the same input (order aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jobs import record
from support.parallel_jobs import appended, one_process_rows, pipeline

pytestmark = pytest.mark.slow


def test_parallel_steps_on_slurm_append_what_one_process_does(run_cli, hpc, distrun_home, tmp_path: Path) -> None:
    result = run_cli("run", str(pipeline(tmp_path, compute=hpc)), "--name", "scored", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    expected = one_process_rows(tmp_path)
    for step in ("files", "table"):
        assert sorted(appended(distrun_home, f"scored.{step}")) == sorted(expected[step]), step
        child = record(distrun_home, f"scored.{step}")
        assert {p["rank"]: p["host"] for p in child["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
