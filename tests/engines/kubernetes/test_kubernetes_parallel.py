"""Parallel steps on Kubernetes (the API emulator, pods as local processes): the pods share no
file system, so the gang's processes take their mini-batches from process 0 over TCP and the
rows come back with process 0's pod; they are what one process appends over the same input.

Each process runs distrun's worker (`python -m distrun.agent.parallel_run`), so a pod's Python
needs distrun, as an image for parallel steps has it; the emulated pods run this machine's
Python, given this checkout's distrun on PYTHONPATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import REPO
from support.clusters.k8s_emulator import EmulatedCluster
from support.jobs import record
from support.parallel_jobs import appended, entry_stdout, one_process_rows, pipeline

pytestmark = pytest.mark.slow
WAIT_S = 300


def test_parallel_steps_on_kubernetes_append_what_one_process_does(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    extra = f"environment_variables: {{PYTHONPATH: {REPO / 'src'}}}\n"
    result = run_cli("run", str(pipeline(tmp_path, "k8s", extra)), "--name", "scored", timeout=WAIT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    expected = one_process_rows(tmp_path)
    for step in ("files", "table"):
        assert sorted(appended(distrun_home, f"scored.{step}")) == sorted(expected[step]), step
        child = record(distrun_home, f"scored.{step}")
        assert len({p["pod"] for p in child["processes"]}) == 2
    # Each node's per-process logs came back with its ./logs, every process's init() in its own.
    assert [entry_stdout(distrun_home, "scored.files", r).count(f"init on rank {r}") for r in range(4)] == [1] * 4
