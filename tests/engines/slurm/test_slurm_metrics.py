"""The MLflow run of a job on the real Slurm test cluster: every rank is pointed at it, and a reader closes it.

`mlflow.log_metric` in a rank logs into whatever run MLFLOW_TRACKING_URI and MLFLOW_RUN_ID name;
that it lands in the job's run, and how `job show` and `distrun metrics` show it, is checked on
local compute (tests/surfaces/test_metrics_mlflow.py). What is Slurm's own here is that the
ranks on the cluster's nodes get those variables, and that a detached job's run is closed.
The ranks print them rather than import mlflow, which takes seconds of CPU per process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.env_dump import show_env, shown_env
from support.jobs import record, wait_for
from support.mlflow_store import run_status, tracking_of

pytestmark = pytest.mark.slow  # `job create` makes the MLflow store, which imports mlflow

MLFLOW_KEYS = ["MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"]


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test


def test_slurm_job_ranks_get_its_run_and_the_reader_closes_it(
    run_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path, slurm_cluster: object
) -> None:
    created = run_cli(
        "compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partition=debug",
        "--set", f"slurm_conf={slurm_cluster.conf_path}",  # type: ignore[attr-defined]
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    job = write_job(
        "command: python show_env.py\ncode: src\nexperiment_name: on-slurm\nresources:\n  instance_count: 2\n",
        {"show_env.py": show_env(MLFLOW_KEYS)},
    )
    started = run_cli("job", "create", "--file", str(job), "--compute", "hpc", "--name", "slurm_tracked")
    assert started.returncode == 0, started.stdout + started.stderr
    tracking = tracking_of(distrun_home, "slurm_tracked")
    # Nobody supervises a detached Slurm job here: the first reader that sees its end (here the
    # test's own look at the record, as `job show` would) closes the run.
    ended = ("Completed", "Failed", "Canceled")
    wait_for(lambda: record(distrun_home, "slurm_tracked")["status"] in ended, timeout=300)
    assert record(distrun_home, "slurm_tracked")["status"] == "Completed"
    assert run_status(distrun_home, tracking["run_id"]) == "FINISHED"
    assert tracking["experiment_name"] == "on-slurm"
    assert tracking["tracking_uri"] == f"sqlite:///{distrun_home / 'mlflow.db'}"
    logs = distrun_home / "jobs" / "slurm_tracked" / "user_logs"
    for rank in (0, 1):
        assert shown_env((logs / f"std_log_process_0{rank}.txt").read_text()) == {
            "MLFLOW_TRACKING_URI": tracking["tracking_uri"],
            "MLFLOW_RUN_ID": tracking["run_id"],
            "MLFLOW_EXPERIMENT_ID": tracking["experiment_id"],
            "MLFLOW_EXPERIMENT_NAME": "on-slurm",
        }, rank
