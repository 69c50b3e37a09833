"""A rank's first metrics, params and tags do not wait for `mlflow server` to start: the server's
keeper writes them into distrun's store itself while the server starts (metrics/early_answers.py), with the
real MLflow client, and every reader sees them as it sees the server's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.jobs import record
from support.reliability import job_file

pytestmark = pytest.mark.slow  # the first job of a DISTRUN_HOME makes its MLflow store with mlflow

RANK = """
    import json, math, os, sys, time

    rank = int(os.environ["RANK"])
    flag = os.environ["RANK0_EARLY"]
    while rank != 0 and not os.path.exists(flag):  # rank 0's early writes first, not slowed by the others' imports
        time.sleep(0.05)
    import mlflow

    def serving():
        with open(os.environ["KEEPER_STATE"]) as handle:
            return json.load(handle)["ready_after"] is not None

    if rank == 0:
        assert not serving(), "the server already serves: this run proves nothing"
        mlflow.start_run(run_name="named_early")  # distrun's run (MLFLOW_RUN_ID), renamed
        started_as = mlflow.get_run(mlflow.active_run().info.run_id).info.run_name
        mlflow.set_tag("mlflow.runName", "tagged_early")  # renamed again, as a tag
        mlflow.log_metric("loss", 0.5, step=0)
        mlflow.log_metrics({"acc": 0.25, "gap": float("nan")}, step=1)
    else:
        mlflow.log_metric(f"loss_{rank}", 0.5, step=0)
    mlflow.log_param("lr", "0.1")  # every rank the same value, as ranks log their arguments
    mlflow.log_params({"epochs": "3", f"seed_{rank}": str(rank)})
    mlflow.set_tag(f"rank_{rank}", "up")
    early_run = mlflow.get_run(mlflow.active_run().info.run_id)
    early = early_run.data
    if rank != 0:
        sys.exit(0)
    seen = {"serving": serving(), "metrics": early.metrics, "params": early.params, "tags": early.tags}
    seen["name"], seen["started_as"] = early_run.info.run_name, started_as
    print("early", json.dumps(seen), flush=True)
    open(flag, "w").close()  # the other ranks now write while the server comes up
    mlflow.get_experiment(mlflow.active_run().info.experiment_id)  # the server's to answer: waits for it
    mlflow.log_metric("loss", 0.25, step=1)
    late = mlflow.get_run(mlflow.active_run().info.run_id).data
    print("late", json.dumps({"serving": serving(), "metrics": late.metrics, "params": late.params}), flush=True)
"""
RANKS = 3


def said(out: str, word: str) -> dict[str, object]:
    mark = word + " {"  # streamed lines carry the rank's prefix
    line = next(line for line in out.splitlines() if mark in line)
    return json.loads(line[line.index(mark) + len(word) :])


def test_the_first_metrics_params_and_tags_of_every_rank_are_written_before_the_server_serves(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    state = home / "mlflow-server" / "state.json"
    job = job_file(
        tmp_path / "job",
        f"""
        command: python rank.py
        code: src
        distribution:
          type: pytorch
          process_count_per_instance: {RANKS}
        environment_variables:
          KEEPER_STATE: {state}
          RANK0_EARLY: {tmp_path / "rank0-early"}
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
    mine = {key: early["metrics"][key] for key in ("loss", "acc", "gap")}  # type: ignore[index]
    assert mine == {"loss": 0.5, "acc": 0.25, "gap": pytest.approx(float("nan"), nan_ok=True)}, out
    assert {"lr": "0.1", "epochs": "3", "seed_0": "0"}.items() <= early["params"].items(), out  # type: ignore[attr-defined]
    assert early["tags"]["rank_0"] == "up", out  # type: ignore[index]
    assert early["started_as"] == "named_early", out
    assert early["name"] == early["tags"]["mlflow.runName"] == "tagged_early", out  # type: ignore[index]
    # The server, once up, reads the keeper's rows with its own.
    assert late["serving"] is True, out
    nan = pytest.approx(float("nan"), nan_ok=True)
    assert {"loss": 0.25, "acc": 0.25, "gap": nan}.items() <= late["metrics"].items(), out  # type: ignore[attr-defined]
    # Every rank wrote at the store's first start (the keeper's writes beside the server's
    # start), none refused for a locked database: each one's metric, params and tag are there.
    run = json.loads((home / "jobs" / "early" / "tracking.json").read_text())
    with sqlite3.connect(home / "mlflow.db") as conn:
        params = dict(conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run["run_id"],)))
        tags = dict(conn.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run["run_id"],)))
        metrics = {row[0] for row in conn.execute("SELECT key FROM metrics WHERE run_uuid = ?", (run["run_id"],))}
    for rank in range(RANKS):
        assert params[f"seed_{rank}"] == str(rank) and tags[f"rank_{rank}"] == "up", (params, tags)
        assert ("loss" if rank == 0 else f"loss_{rank}") in metrics, metrics
    assert params["lr"] == "0.1" and params["epochs"] == "3", params
    assert record(home, "early")["status"] == "Completed"
    shown = distrun_cli(home, "metrics", "early").stdout
    for point in ("loss  step 0  0.5", "loss  step 1  0.25", "acc  step 1  0.25", "gap  step 1  nan"):
        assert point in shown, shown
