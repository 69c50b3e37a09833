"""A rank's first metrics do not wait for `mlflow server` to start: the server's keeper writes
them into distrun's store itself while the server starts (metrics/early_answers.py), with the
real MLflow client, and every reader sees them as it sees the server's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.jobs import record
from support.reliability import job_file

pytestmark = pytest.mark.slow  # the first job of a DISTRUN_HOME makes its MLflow store with mlflow

RANK = """
    import json, math, os, sys
    import mlflow

    def serving():
        with open(os.environ["KEEPER_STATE"]) as handle:
            return json.load(handle)["ready_after"] is not None

    assert not serving(), "the server already serves: this run proves nothing"
    mlflow.log_metric("loss", 0.5, step=0)
    mlflow.log_metrics({"acc": 0.25, "gap": float("nan")}, step=1)
    early = mlflow.get_run(mlflow.active_run().info.run_id).data.metrics
    print("early", json.dumps({"serving": serving(), "metrics": early}), flush=True)
    mlflow.log_param("lr", "0.1")  # the server's to answer: waits for it
    mlflow.log_metric("loss", 0.25, step=1)
    late = mlflow.get_run(mlflow.active_run().info.run_id).data
    print("late", json.dumps({"serving": serving(), "metrics": late.metrics, "params": late.params}), flush=True)
"""


def said(out: str, word: str) -> dict[str, object]:
    mark = word + " {"  # streamed lines carry the rank's prefix
    line = next(line for line in out.splitlines() if mark in line)
    return json.loads(line[line.index(mark) + len(word) :])


def test_the_first_metrics_are_written_before_the_server_serves(tmp_path: Path) -> None:
    home = tmp_path / "home"
    state = home / "mlflow-server" / "state.json"
    job = job_file(
        tmp_path / "job",
        f"""
        command: python rank.py
        code: src
        environment_variables:
          KEEPER_STATE: {state}
        """,
        {"rank.py": RANK},
    )
    env = {"DISTRUN_MLFLOW": "1", "DISTRUN_MLFLOW_SERVER_IDLE": "1"}
    done = distrun_cli(home, "run", str(job), "--name", "early", env=env, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    early, late = said(done.stdout, "early"), said(done.stdout, "late")
    # Answered by the keeper from the store, the server still starting.
    assert early["serving"] is False, out
    assert early["metrics"] == {"loss": 0.5, "acc": 0.25, "gap": pytest.approx(float("nan"), nan_ok=True)}, out
    # The server, once up, reads the keeper's rows with its own.
    assert late["serving"] is True, out
    assert late["metrics"] == {"loss": 0.25, "acc": 0.25, "gap": pytest.approx(float("nan"), nan_ok=True)}, out
    assert late["params"] == {"lr": "0.1"}, out
    assert record(home, "early")["status"] == "Completed"
    shown = distrun_cli(home, "metrics", "early").stdout
    for point in ("loss  step 0  0.5", "loss  step 1  0.25", "acc  step 1  0.25", "gap  step 1  nan"):
        assert point in shown, shown
