"""A sweep on the real Slurm cluster of 2 nodes (n1, n2): each trial a 2 x 2 PyTorch job of its
own Slurm job, its score read from its MLflow run while it runs (support/engine_sweeps.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.clusters.slurm_cluster import SlurmCluster
from support.engine_sweeps import checked_trials, write_sweep
from support.jobs import wait_for

pytestmark = pytest.mark.slow


def test_a_sweep_runs_its_trials_as_slurm_jobs_reads_their_scores_live_and_names_the_best(
    run_cli, hpc: str, distrun_home: Path, tmp_path: Path, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test
    sweep = write_sweep(tmp_path / "sweep")
    lookups, started = slurm_cluster.job_lookups(), time.monotonic()
    result = run_cli("run", str(sweep), "--compute", hpc, "--name", "tune", timeout=400)
    took, lookups = time.monotonic() - started, slurm_cluster.job_lookups() - lookups
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    # Each running trial's Slurm job is asked about every 0.5 s (as a pipeline's steps are), not
    # at each turn of the sweep's loop; its MLflow run is read every 0.25 s, which asks Slurm nothing.
    assert lookups <= 2 * 2.5 * took + 10, (lookups, took)
    trials = checked_trials(distrun_home, "tune", hpc, result.stdout)
    ids = [trial["backend_id"] for trial in trials.values()]
    assert all(ids) and len(set(ids)) == 3, ids  # each trial its own Slurm job
    # The trial the policy stopped (it would log for 3 minutes) was canceled in Slurm: none is left
    # once Slurm has finished ending it (a canceled job stays COMPLETING for up to KillWait, 5 s).
    wait_for(lambda: not set(slurm_cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()) & set(ids), timeout=30)
    assert {p["rank"]: p["host"] for p in trials["trial_0"]["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
