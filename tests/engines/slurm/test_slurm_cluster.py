"""The Slurm test cluster itself: two nodes that run one batch job across both, and a clean stop."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from support.clusters.slurm_cluster import SlurmCluster

BATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output={out}/batch.txt
srun --kill-on-bad-exit=1 bash -c 'echo "$SLURM_NODEID $SLURMD_NODENAME" > {out}/node-$SLURM_NODEID.txt'
"""


def wait_until_gone(cluster: SlurmCluster, job_id: str, timeout: float = 60) -> str:
    """The job's final state, read from scontrol (no accounting here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cluster.run(["scontrol", "show", "job", "-o", job_id]).stdout
        state = out.split("JobState=", 1)[1].split()[0]
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still running after {timeout} s")


def test_both_nodes_idle(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.node_states() == {"n1": "idle", "n2": "idle"}


def test_batch_job_spans_two_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(BATCH.format(out=tmp_path))
    job_id = slurm_cluster.run(["sbatch", "--parsable", str(script)]).stdout.strip()
    assert wait_until_gone(slurm_cluster, job_id) == "COMPLETED"
    seen = {(tmp_path / f"node-{i}.txt").read_text().strip() for i in (0, 1)}
    assert seen == {"0 n1", "1 n2"}


def test_stop_leaves_no_process() -> None:
    root = Path(tempfile.mkdtemp(prefix="distrun-slurm-stop-"))
    cluster = SlurmCluster(root, node_count=1, cpus_per_node=1)
    cluster.start()
    job = cluster.run(["sbatch", "--parsable", f"--output={root}/sleep.out", "--wrap", "sleep 300"]).stdout.strip()
    deadline = time.monotonic() + 30
    while "RUNNING" not in cluster.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    assert cluster.leftover_processes(), "a running cluster and job must be found"
    cluster.stop()  # raises if anything is left
    assert cluster.leftover_processes() == []
    shutil.rmtree(root)
