"""The MLflow run of a job on the real Slurm test cluster: every rank is pointed at it, and a reader closes it.

`mlflow.log_metric` in a rank logs into whatever run MLFLOW_TRACKING_URI and MLFLOW_RUN_ID name;
that it lands in the job's run, and how `job show` and `distrun metrics` show it, is checked on
local compute (tests/surfaces/test_metrics_mlflow.py). What is Slurm's own here is that the
ranks on the cluster's nodes get those variables, that DISTRUN_HOME's MLflow server outlives
the submitter of a detached job while its ranks run, and that the job's run is closed. The
ranks print the variables and call the server's REST API rather than import mlflow, which
takes seconds of CPU per process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrun.core import procfs
from support.env_dump import show_env, shown_env
from support.jobs import record, wait_for
from support.mlflow_store import run_status, tracking_of

pytestmark = pytest.mark.slow  # `job create` makes the MLflow store, which imports mlflow

MLFLOW_KEYS = ["MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"]


IDLE = 2  # seconds DISTRUN_HOME's MLflow server outlives its last user here (20 for users)


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test
    monkeypatch.setenv("DISTRUN_MLFLOW_SERVER_IDLE", str(IDLE))


# Rank 0 logs a metric through the server's REST API (what every MLflow client calls) once the
# submitter has long exited and the server's idle grace has passed.
LOG_LATE = f"""
import json, os, time, urllib.request
if os.environ["RANK"] == "0":
    time.sleep({IDLE + 3})
    point = {{"run_id": os.environ["MLFLOW_RUN_ID"], "key": "loss", "value": 0.5, "step": 0,
              "timestamp": int(time.time() * 1000)}}
    request = urllib.request.Request(os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-metric",
                                     data=json.dumps(point).encode(), headers={{"Content-Type": "application/json",
                                     "Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"]}})
    print("logged", urllib.request.urlopen(request, timeout=120).status, flush=True)
"""


def test_slurm_job_ranks_log_through_the_server_after_the_submitter_exits_and_the_reader_closes_the_run(
    run_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path, slurm_cluster: object
) -> None:
    created = run_cli(
        "compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partition=debug",
        "--set", f"slurm_conf={slurm_cluster.conf_path}",  # type: ignore[attr-defined]
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    job = write_job(
        "command: python show_env.py\ncode: src\nexperiment_name: on-slurm\nresources:\n  instance_count: 2\n",
        {"show_env.py": show_env(MLFLOW_KEYS) + LOG_LATE},
    )
    started = run_cli("job", "create", "--file", str(job), "--compute", "hpc", "--name", "slurm_tracked")
    assert started.returncode == 0, started.stdout + started.stderr
    tracking = tracking_of(distrun_home, "slurm_tracked")  # `job create` has exited: its use of the server is gone
    # Nobody supervises a detached Slurm job here: the first reader that sees its end (here the
    # test's own look at the record, as `job show` would) closes the run.
    ended = ("Completed", "Failed", "Canceled")
    wait_for(lambda: record(distrun_home, "slurm_tracked")["status"] in ended, timeout=300)
    assert record(distrun_home, "slurm_tracked")["status"] == "Completed"
    assert run_status(distrun_home, tracking["run_id"]) == "FINISHED"
    assert tracking["experiment_name"] == "on-slurm"
    assert tracking["tracking_uri"] == f"sqlite:///{distrun_home / 'mlflow.db'}"
    logs = distrun_home / "jobs" / "slurm_tracked" / "user_logs"
    assert "logged 200" in (logs / "std_log_process_00.txt").read_text()
    assert metric_values(distrun_home, tracking["run_id"]) == [0.5]
    for rank in (0, 1):
        assert shown_env((logs / f"std_log_process_0{rank}.txt").read_text()) == {
            "MLFLOW_TRACKING_URI": tracking["rank_tracking_uri"],
            "MLFLOW_RUN_ID": tracking["run_id"],
            "MLFLOW_EXPERIMENT_ID": tracking["experiment_id"],
            "MLFLOW_EXPERIMENT_NAME": "on-slurm",
        }, rank
    # With the job over (its run closed), neither its node agents nor its submission's lease
    # keep the server: it ends after its grace.
    assert not (distrun_home / "mlflow-server" / "leases" / "slurm_tracked").exists()
    wait_for(lambda: not procfs.is_alive(int(tracking["server_pid"])), timeout=IDLE + 30)


def metric_values(home: Path, run_id: str) -> list[float]:
    import sqlite3

    with sqlite3.connect(home / "mlflow.db") as conn:
        return [row[0] for row in conn.execute("SELECT value FROM metrics WHERE run_uuid = ?", (run_id,))]
