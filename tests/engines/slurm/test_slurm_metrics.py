"""MLflow metrics of a job on the real Slurm test cluster: logged into its run, which a reader closes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from support.jobs import wait_for
from support.mlflow_store import run_status, tracking_of

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test


SLURM_TRAIN = """
    import os
    import mlflow
    print("rank", os.environ["RANK"], "run", os.environ.get("MLFLOW_RUN_ID"), flush=True)
    if os.environ["RANK"] == "0":
        for step in range(3):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
"""


def test_slurm_job_logs_into_its_run_and_the_reader_closes_it(
    run_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path, slurm_cluster: object
) -> None:
    created = run_cli(
        "compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partition=debug",
        "--set", f"slurm_conf={slurm_cluster.conf_path}",  # type: ignore[attr-defined]
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    job = write_job(
        "command: python train.py\ncode: src\nexperiment_name: on-slurm\nresources:\n  instance_count: 2\n",
        {"train.py": SLURM_TRAIN},
    )
    started = run_cli("job", "create", "--file", str(job), "--compute", "hpc", "--name", "slurm_tracked")
    assert started.returncode == 0, started.stdout + started.stderr
    tracking = tracking_of(distrun_home, "slurm_tracked")
    # Nobody supervises a detached Slurm job here: the first reader that sees its end closes the run.
    wait_for(
        lambda: json.loads(run_cli("job", "show", "slurm_tracked", "-o", "json").stdout)["status"] == "Completed",
        timeout=300,
    )
    assert run_status(distrun_home, tracking["run_id"]) == "FINISHED"
    logs = distrun_home / "jobs" / "slurm_tracked" / "user_logs"
    for rank in (0, 1):
        assert f"rank {rank} run {tracking['run_id']}" in (logs / f"std_log_process_0{rank}.txt").read_text()
    assert json.loads(run_cli("job", "show", "slurm_tracked", "-o", "json").stdout)["metrics"] == {
        "loss": pytest.approx(1 / 3)
    }
