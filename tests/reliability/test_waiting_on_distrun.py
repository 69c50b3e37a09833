"""Waiting on distrun's own tracking server is never a hang.

A rank's first call that `mlflow server` must answer itself (here an artifact it uploads through
the server, then `mlflow.get_experiment`: its first metrics, params, tags and run name the
server's keeper writes while the server starts) in a DISTRUN_HOME's first job waits while `mlflow
server` starts (seconds of CPU; more than ten on a loaded machine). Under a hang timeout shorter
than that wait, the job used to end as hung with its stack in distrun's server call. Here the
rank says nothing while it waits, so nothing but the wait on distrun's server can keep it alive.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.jobs import record
from support.mlflow_store import tracking_of
from support.reliability import job_file

pytestmark = pytest.mark.slow  # the first job of a DISTRUN_HOME makes its MLflow store with mlflow

HANG_TIMEOUT = 3
# Importing mlflow takes seconds of silence too: a thread speaks until it is done, so the only
# silence the watchdog sees is the wait for the server.
RANK = """
    import threading, time
    imported = threading.Event()
    def speak():
        while not imported.wait(0.3):
            print("importing mlflow", flush=True)
    threading.Thread(target=speak, daemon=True).start()
    import mlflow
    imported.set()
    print("calling mlflow", flush=True)
    began = time.monotonic()
    mlflow.start_run(run_name="named_first")  # distrun's run (MLFLOW_RUN_ID), renamed
    mlflow.log_text("first artifact", "first.txt")  # uploaded through distrun's server
    mlflow.log_metric("loss", 0.5)
    mlflow.get_experiment(mlflow.active_run().info.experiment_id)
    print(f"logged after {time.monotonic() - began:.1f} s", flush=True)
"""
JOB = f"""
    command: python rank.py
    code: src
    limits:
      hang_timeout: {HANG_TIMEOUT}
"""


def test_a_rank_waiting_for_distruns_server_to_start_is_not_hung(tmp_path: Path) -> None:
    home = tmp_path / "home"
    job = job_file(tmp_path / "job", JOB, {"rank.py": RANK})
    env = {"DISTRUN_MLFLOW": "1", "DISTRUN_MLFLOW_SERVER_IDLE": "1"}
    done = distrun_cli(home, "run", str(job), "--name", "first_metric", env=env, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    waited = float(done.stdout.split("logged after ")[1].split()[0])
    assert waited > HANG_TIMEOUT, f"the server started within {waited} s: this run proves nothing"
    assert record(home, "first_metric")["status"] == "Completed"
    shown = distrun_cli(home, "metrics", "first_metric")
    assert "loss  step 0  0.5" in shown.stdout, shown.stdout + shown.stderr
    run_id = tracking_of(home, "first_metric")["run_id"]
    with sqlite3.connect(home / "mlflow.db") as conn:
        name = conn.execute("SELECT name FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()[0]
        tag = conn.execute("SELECT value FROM tags WHERE run_uuid = ? AND key = 'mlflow.runName'", (run_id,)).fetchone()
    assert (name, tag) == ("named_first", ("named_first",))
    uploaded = [path.read_text() for path in home.rglob("first.txt")]
    assert uploaded == ["first artifact"], uploaded
