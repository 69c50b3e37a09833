"""MLflow metrics wired as Azure ML wires them, with real mlflow in real ranks."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from distrun.metrics.tracking import STARTING_NOTE
from support.jobs import only_job, record, wait_for
from support.mlflow_store import run_status, tracking_of

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # conftest turns it off for every other test


TRAIN = """
    import os, sys, time
    rank = int(os.environ["RANK"])
    print("env", rank, *(os.environ.get(k, "-") for k in
          ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME")), flush=True)
    if rank == 0:
        import mlflow
        for step in range(3):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
        os.makedirs("outputs/sub", exist_ok=True)
        open("outputs/sub/model.txt", "w").write("weights")
        print("rank 0 done", flush=True)  # and exits: MLflow ends its active run at exit
    else:
        from distrun.v1 import Run
        run = Run.get_context()
        run.log("accuracy", 0.5)
        run.log("accuracy", 0.75)
        run.log_list("lr", [0.1, 0.01, 0.001])
        print("rank 1 logged", flush=True)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.1)
        if sys.argv[2] == "fail":
            sys.exit("rank 1 gives up")
"""

JOB = """
    command: python train.py {release} {mode}
    code: src
    experiment_name: mnist-exp
    resources:
      instance_count: 1
    distribution:
      type: pytorch
      process_count_per_instance: 2
"""


def start_tracked_job(
    start_cli: Callable[..., object], write_job: Callable[..., Path], home: Path, tmp_path: Path, mode: str, name: str
) -> tuple[Path, dict[str, str]]:
    release = tmp_path / f"release-{name}"
    job = write_job(JOB.format(release=release, mode=mode), {"train.py": TRAIN})
    start_cli("run", str(job), "--name", name)
    wait_for(lambda: (home / "jobs" / name / "user_logs" / "std_log_process_01.txt").exists(), timeout=120)
    log1 = home / "jobs" / name / "user_logs" / "std_log_process_01.txt"
    log0 = home / "jobs" / name / "user_logs" / "std_log_process_00.txt"
    wait_for(lambda: "rank 1 logged" in log1.read_text() and "rank 0 done" in log0.read_text(), timeout=240)
    return release, tracking_of(home, name)


def test_ranks_log_into_the_jobs_run_which_distrun_closes(
    start_cli: Callable[..., object],
    run_cli: Callable[..., object],
    write_job: Callable[..., Path],
    distrun_home: Path,
    tmp_path: Path,
) -> None:
    release, tracking = start_tracked_job(start_cli, write_job, distrun_home, tmp_path, "ok", "tracked_ok")
    run_id = tracking["run_id"]
    assert tracking["experiment_name"] == "mnist-exp"
    assert tracking["tracking_uri"] == f"sqlite:///{distrun_home / 'mlflow.db'}"
    for rank in (0, 1):
        log = (distrun_home / "jobs" / "tracked_ok" / "user_logs" / f"std_log_process_0{rank}.txt").read_text()
        uri, run, experiment_id, experiment = log.splitlines()[0].split()[2:]
        # Every MLflow client speaks HTTP: the ranks log through DISTRUN_HOME's own server.
        assert uri == tracking["rank_tracking_uri"] and uri.startswith("http://127.0.0.1:")
        assert (run, experiment_id, experiment) == (
            run_id,
            tracking["experiment_id"],
            "mnist-exp",
        )
    # Rank 0 has exited (and MLflow tried to end the run); rank 1 still runs: the run stays open.
    wait_for(lambda: record(distrun_home, "tracked_ok")["status"] == "Running", timeout=30)
    time.sleep(1)
    assert run_status(distrun_home, run_id) == "RUNNING"
    release.touch()
    wait_for(lambda: record(distrun_home, "tracked_ok")["status"] == "Completed", timeout=120)
    wait_for(lambda: run_status(distrun_home, run_id) == "FINISHED", timeout=60)
    artifact = next((distrun_home / "mlartifacts").rglob("outputs/sub/model.txt"))
    assert run_id in str(artifact) and artifact.read_text() == "weights"

    shown = json.loads(run_cli("job", "show", "tracked_ok", "-o", "json").stdout)
    assert shown["metrics"] == {"loss": pytest.approx(1 / 3), "accuracy": 0.75, "lr": 0.001}
    printed = run_cli("metrics", "tracked_ok").stdout
    assert "loss  step 2  0.333333" in printed and "accuracy  step 1  0.75" in printed
    assert "lr  step 2  0.001" in printed

    # mlflow's own client (what `mlflow ui --backend-store-uri` reads) sees the same run.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking["tracking_uri"])
    # As on Azure ML, the job's name is its run id: `get_run(job_name)` finds it, metrics and all.
    assert run_id == "tracked_ok"
    run = client.get_run("tracked_ok")
    assert run.info.run_name == "tracked_ok" and run.info.status == "FINISHED"
    assert run.data.metrics == {"loss": pytest.approx(1 / 3), "accuracy": 0.75, "lr": 0.001}
    assert [m.value for m in client.get_metric_history(run_id, "loss")] == [1.0, 0.5, pytest.approx(1 / 3)]


def test_failed_job_leaves_its_run_failed(
    start_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path, tmp_path: Path
) -> None:
    release, tracking = start_tracked_job(start_cli, write_job, distrun_home, tmp_path, "fail", "tracked_fail")
    release.touch()
    wait_for(lambda: record(distrun_home, "tracked_fail")["status"] == "Failed", timeout=120)
    wait_for(lambda: run_status(distrun_home, tracking["run_id"]) == "FAILED", timeout=60)


def test_without_mlflow_jobs_run_as_before(
    run_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path
) -> None:
    job = write_job(
        "command: python -c \"import os; print('uri', os.environ.get('MLFLOW_TRACKING_URI', '-'))\"\ncode: src\n"
    )
    done = run_cli("run", str(job), env={"DISTRUN_MLFLOW": "0"})
    assert done.returncode == 0 and "uri -" in done.stdout
    name = only_job(distrun_home)
    assert not (distrun_home / "jobs" / name / "tracking.json").exists()
    assert not (distrun_home / "mlflow.db").exists()
    assert "metrics" not in json.loads(run_cli("job", "show", name, "-o", "json").stdout)
    missing = run_cli("metrics", name)
    assert missing.returncode != 0 and 'pip install "distrun[mlflow]"' in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_store_mlflow_created_gets_each_run_from_distruns_own_writer(tmp_path: Path) -> None:
    """The steady state (the store exists): distrun writes the run itself, in one connection,
    and mlflow's own client reads it as one of its runs."""
    from mlflow.tracking import MlflowClient

    from distrun.metrics import sqlite_store, tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments()  # mlflow creates its schema
    made = tracking._fast_create(uri, "exp", "job_a", {"distrun.job_name": "job_a"}, tmp_path / "mlartifacts")
    assert made is not None and made.experiment_name == "exp"
    run = client.get_run(made.run_id)
    assert run.info.run_name == "job_a" and run.info.status == "RUNNING"
    assert run.data.tags["distrun.job_name"] == "job_a"
    assert client.get_experiment(made.experiment_id).name == "exp"
    # Held open: a rank's MLflow ending the run at its exit does not end the job's run.
    client.set_terminated(made.run_id, status="FINISHED")
    assert client.get_run(made.run_id).info.status == "RUNNING"
    sqlite_store.close_run(tmp_path / "mlflow.db", made.run_id, "FINISHED")
    assert client.get_run(made.run_id).info.status == "FINISHED"
    # A second run goes into the same experiment.
    again = tracking._fast_create(uri, "exp", "job_b", {}, tmp_path / "mlartifacts")
    assert again is not None and again.experiment_id == made.experiment_id
    # A job's name is its run id where MLflow takes it as one and no run has it yet; otherwise
    # (a step's `PIPELINE.STEP`, a deleted job's name used again) the run gets a generated id.
    assert (made.run_id, again.run_id) == ("job_a", "job_b")
    for name in ("pipe.step", "job_a"):
        other_run = tracking._fast_create(uri, "exp", name, {}, tmp_path / "mlartifacts")
        assert other_run is not None and re.fullmatch(r"[0-9a-f]{32}", other_run.run_id)
        assert client.get_run(other_run.run_id).info.run_name == name

    # Not a store of mlflow's (another program's database, a file that is no database, none
    # at all): left to mlflow's own client.
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE runs (x)")
    (tmp_path / "text.db").write_text("not a database at all, but long enough to be read as one" * 20)
    for path in (other, tmp_path / "text.db", tmp_path / "missing.db"):
        assert tracking._fast_create(f"sqlite:///{path}", "exp", "job_c", {}, tmp_path) is None
    with sqlite3.connect(other) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} == {"runs"}


UNTRACKED = """
    import os, time
    print("run id", os.environ.get("MLFLOW_RUN_ID", "-"), flush=True)
    import mlflow
    began = time.monotonic()
    try:
        mlflow.log_metric("loss", 1.0)
    except Exception as exc:
        print("refused after", round(time.monotonic() - began), "s:", type(exc).__name__, flush=True)
"""


def test_a_server_that_cannot_start_leaves_the_job_untracked_saying_why(
    run_cli: Callable[..., object], write_job: Callable[..., Path], distrun_home: Path
) -> None:
    # The server's log cannot be opened (a folder is in its place): its keeper cannot start.
    (distrun_home / "mlflow-server" / "server.log").mkdir(parents=True, mode=0o700)
    job = write_job("command: python train.py\ncode: src\n", {"train.py": UNTRACKED})
    done = run_cli("run", str(job), "--name", "untracked")
    assert done.returncode == 0, done.stderr
    assert "metrics of untracked are not recorded: the MLflow server could not start" in done.stderr
    assert "its keeper did not start: error: [Errno 21] Is a directory" in done.stderr  # the cause, at once
    assert "Traceback" not in done.stderr
    run_id = tracking_of(distrun_home, "untracked")["run_id"]
    assert f"run id {run_id}" in done.stdout
    refused = next(line for line in done.stdout.splitlines() if "refused after" in line)
    assert int(refused.split("refused after")[1].split()[0]) < 10  # at once, not after minutes of retries
    said = (distrun_home / "jobs" / "untracked" / "system_logs" / "metrics.txt").read_text()
    assert "the MLflow server could not start" in said


# Prints nothing, but logs a metric every second. It writes the rows MLflow's server writes
# (metrics, latest_metrics) straight into distrun's store, where the hang watchdog looks: through
# distrun's tracking server the first request alone waits for `mlflow server` to start (a minute
# on a loaded 2-core machine), and importing mlflow in the rank is silent for seconds too.
METRICS_ONLY = """
    import os, sqlite3, sys, time
    store = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
    silent_from = time.time()
    columns = "(key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, ?, ?)"
    for step in range(10):
        row = ("loss", 1.0 / (step + 1), int(time.time() * 1000), os.environ["MLFLOW_RUN_ID"], step, False)
        store.execute("INSERT INTO metrics " + columns, row)
        store.execute("INSERT OR REPLACE INTO latest_metrics " + columns, row)
        time.sleep(1)
    open("silent.txt", "w").write(str(time.time() - silent_from))
"""
HANG_TIMEOUT = 3


def test_a_job_that_only_logs_metrics_is_not_hung(run_cli, write_job, distrun_home):
    job = write_job(
        f"command: python train.py {distrun_home / 'mlflow.db'}\ncode: src\nlimits:\n  hang_timeout: {HANG_TIMEOUT}\n",
        {"train.py": METRICS_ONLY},
    )
    done = run_cli("run", str(job), "--name", "quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    # The first job of this DISTRUN_HOME made its metrics store, which it said, once, with how long.
    assert done.stderr.count(STARTING_NOTE) == 1 and re.search(r"MLflow: ready in \d+\.\d s", done.stderr)
    rec = record(distrun_home, "quiet")
    assert rec["status"] == "Completed", rec["reason"]
    # It stayed silent for three times the hang timeout, and was left alone.
    assert float((distrun_home / "jobs" / "quiet" / "code" / "silent.txt").read_text()) > 3 * HANG_TIMEOUT
    assert not (distrun_home / "jobs" / "quiet" / "hang").exists()
    shown = json.loads(run_cli("job", "show", "quiet", "-o", "json").stdout)
    assert shown["metrics"] == {"loss": 0.1}
