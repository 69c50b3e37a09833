"""DISTRUN_HOME's MLflow server: any MLflow client in a job's own environment logs through it,
jobs running at the same time share it, and it ends after its last user, however that ended."""

from __future__ import annotations

import importlib.metadata
import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from distrun.core import procfs
from support.jobs import record, wait_for
from support.mlflow_clients import client_wheels
from support.mlflow_store import tracking_of
from support.wheelhouse import local_wheel_environment

pytestmark = pytest.mark.slow

IDLE = 2  # seconds the server outlives its last user here (DISTRUN_MLFLOW_SERVER_IDLE; 20 for users)


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # conftest turns it off for every other test
    monkeypatch.setenv("DISTRUN_MLFLOW_SERVER_IDLE", str(IDLE))


CLIENT = """
    import mlflow
    print("client", mlflow.__version__, mlflow.__file__, flush=True)
    mlflow.log_param("batch_size", "32")
    mlflow.log_metric("loss", 0.25, step=1)
    # A model registered from the job lands in distrun's registry (distrun model ...).
    import os
    os.makedirs("model", exist_ok=True)
    open("model/MLmodel", "w").write("flavors: {}\\n")
    mlflow.log_artifacts("model", "model")
    mlflow.register_model(f"runs:/{mlflow.active_run().info.run_id}/model", "from_job")
"""


def params_of(home: Path, run_id: str) -> dict[str, str]:
    with sqlite3.connect(home / "mlflow.db") as conn:
        return dict(conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())


# The two failures: mlflow-skinny (no SQLite store at all) and a 2.x release (another
# schema revision). Each job's environment has only that client, from a local wheel folder.
@pytest.mark.parametrize(
    "client",
    [f"mlflow-skinny=={importlib.metadata.version('mlflow')}", "mlflow-skinny==2.22.0"],
    ids=["current", "2.x"],
)
def test_an_mlflow_client_in_the_jobs_own_environment_logs_into_the_jobs_run(
    client: str,
    run_cli: Callable[..., subprocess.CompletedProcess[str]],
    write_job: Callable[..., Path],
    distrun_home: Path,
) -> None:
    environment = local_wheel_environment(client_wheels(client), client)
    job = write_job(
        f"command: python train.py\ncode: src\nexperiment_name: clients\n{environment}", {"train.py": CLIENT}
    )
    done = run_cli("run", str(job), "--name", "client", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = next(line for line in done.stdout.splitlines() if "client " in line)
    _, version, module = printed[printed.index("client ") :].split()
    # The job's own mlflow, from its environment (not distrun's: full mlflow, maybe another release).
    assert version == client.split("==")[1] and module.startswith(str(distrun_home / "envs")), printed
    tracking = tracking_of(distrun_home, "client")
    assert tracking["rank_tracking_uri"].startswith("http://127.0.0.1:")
    assert params_of(distrun_home, tracking["run_id"]) == {"batch_size": "32"}
    shown = run_cli("metrics", "client")
    assert shown.returncode == 0 and "loss  step 1  0.25" in shown.stdout, shown.stdout + shown.stderr
    model = run_cli("model", "show", "-n", "azureml:from_job@latest", "-o", "json")
    assert model.returncode == 0, model.stderr
    registered = json.loads(model.stdout)
    assert (registered["version"], registered["type"], registered["job"]) == ("1", "mlflow_model", "client")
    assert (Path(registered["path"]) / "MLmodel").is_file()
    # The job's artifacts, as Azure ML names them, include what its run logged.
    logged = run_cli(
        "model", "create", "-n", "logged", "-p", "azureml://jobs/client/outputs/artifacts/paths/model", "-o", "json"
    )
    assert logged.returncode == 0, logged.stderr
    assert (Path(json.loads(logged.stdout)["path"]) / "MLmodel").is_file()


HOLD = """
    import os, sys, time
    import mlflow
    def wait(path):
        while not os.path.exists(path):
            time.sleep(0.05)
    mlflow.log_metric("phase", 1)
    print("logged 1", flush=True)
    wait(sys.argv[1])
    mlflow.log_metric("phase", 2)
    print("logged 2", flush=True)
    wait(sys.argv[2])
"""


def rank_log(home: Path, name: str) -> str:
    path = home / "jobs" / name / "user_logs" / "std_log_process_00.txt"
    return path.read_text() if path.exists() else ""


def phases(home: Path, run_id: str) -> list[float]:
    with sqlite3.connect(home / "mlflow.db") as conn:
        rows = conn.execute("SELECT value FROM metrics WHERE run_uuid = ? AND key = 'phase' ORDER BY value", (run_id,))
        return [row[0] for row in rows]


def processes_of_home(home: Path) -> list[int]:
    """Live processes started for this DISTRUN_HOME (jobs, the server's keeper, the server, their guards)."""
    needle = f"DISTRUN_HOME={home}".encode()
    return [pid for pid, environ in procfs.environments() if needle in environ and procfs.is_alive(pid)]


def test_concurrent_jobs_share_the_server_which_ends_after_its_last_user_even_a_killed_one(
    run_cli: Callable[..., subprocess.CompletedProcess[str]],
    start_cli: Callable[..., subprocess.Popen[str]],
    write_job: Callable[..., Path],
    distrun_home: Path,
    tmp_path: Path,
) -> None:
    marks = {f"{job}{step}": tmp_path / f"{job}{step}" for job in "ab" for step in (1, 2)}
    specs = {
        job: write_job(f"command: python hold.py {marks[job + '1']} {marks[job + '2']}\ncode: src\n", {"hold.py": HOLD})
        for job in "ab"
    }
    # Side by side: a detached one (its launcher holds the server once `run -d` has returned)
    # starts the server's keeper, an attached one finds it.
    assert run_cli("run", "-d", str(specs["a"]), "--name", "a").returncode == 0
    b = start_cli("run", str(specs["b"]), "--name", "b")
    try:
        shared_then_ended(distrun_home, marks, b)
    finally:
        for mark in marks.values():  # whatever failed, the detached job's rank ends
            mark.touch()


def shared_then_ended(distrun_home: Path, marks: dict[str, Path], b: subprocess.Popen[str]) -> None:
    wait_for(lambda: all("logged 1" in rank_log(distrun_home, job) for job in "ab"), timeout=180)
    uris = {tracking_of(distrun_home, job)["rank_tracking_uri"] for job in "ab"}
    assert len(uris) == 1, uris  # one server, one port
    state_file = distrun_home / "mlflow-server" / "state.json"
    # The first metrics are written by the keeper while the server starts: it serves later.
    wait_for(lambda: json.loads(state_file.read_text())["ready_after"] is not None, timeout=180)
    state = json.loads(state_file.read_text())
    assert not state["failure"]
    assert uris == {f"http://127.0.0.1:{state['port']}"}
    server = procfs.descendants(state["server_pid"])  # `mlflow server` and what it started

    # a ends; b still uses the server, which outlives the idle grace and still serves b.
    marks["a1"].touch()
    marks["a2"].touch()
    wait_for(lambda: record(distrun_home, "a")["status"] == "Completed", timeout=60)
    time.sleep(IDLE + 1)
    marks["b1"].touch()
    wait_for(lambda: "logged 2" in rank_log(distrun_home, "b"), timeout=60)
    assert phases(distrun_home, tracking_of(distrun_home, "b")["run_id"]) == [1.0, 2.0]
    assert phases(distrun_home, tracking_of(distrun_home, "a")["run_id"]) == [1.0, 2.0]

    # b's distrun is killed (no exit handler runs): its ranks, the server and its keeper all end.
    b.send_signal(signal.SIGKILL)
    b.wait()
    wait_for(lambda: not processes_of_home(distrun_home), timeout=IDLE + 30)
    assert not [pid for pid in (state["pid"], *server) if procfs.is_alive(pid)]
    assert not state_file.exists()


WAITS = """
    import time
    import mlflow
    mlflow.log_metric("loss", 1.0)  # the keeper writes it itself while the server starts
    mlflow.log_param("lr", "0.1")  # and this
    began = time.monotonic()
    try:
        mlflow.get_experiment(mlflow.active_run().info.experiment_id)  # the server's to answer
    except Exception as exc:
        print("gave up after", round(time.monotonic() - began), "s:", str(exc).replace(chr(10), " "), flush=True)
"""


def test_a_ranks_first_call_waits_for_the_server_within_a_bound_then_says_why(
    run_cli: Callable[..., subprocess.CompletedProcess[str]], write_job: Callable[..., Path], distrun_home: Path
) -> None:
    # The server is given less time to start than it needs (DISTRUN_MLFLOW_SERVER_READY, 180 s
    # for users): the rank's call, made while it starts, waits for it and then fails saying why.
    job = write_job("command: python waits.py\ncode: src\n", {"waits.py": WAITS})
    done = run_cli("run", str(job), "--name", "waits", env={"DISTRUN_MLFLOW_SERVER_READY": "0.5"})
    assert done.returncode == 0, done.stdout + done.stderr
    said = next(line for line in done.stdout.splitlines() if "gave up after" in line)
    assert "the MLflow server could not start: `mlflow server` did not listen within 0.5 s" in said
    assert int(said.split("gave up after")[1].split()[0]) < 30  # an answer, not the client's retries
    assert "the MLflow server failed: `mlflow server` did not listen within 0.5 s" in done.stderr
    assert "Traceback" not in done.stderr
