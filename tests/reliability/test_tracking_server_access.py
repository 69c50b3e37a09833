"""Only a job's own ranks (and DISTRUN_HOME's owner) reach distrun's MLflow server.

The keeper listens on 127.0.0.1, which every local user reaches. Here a real job's rank logs with
mlflow (its MLFLOW_TRACKING_TOKEN is sent by the client on every request) while another local
user (`nobody`, with the system's Python) tries the same server: reading the run's params,
writing a metric into the run (which would rank a sweep's trial or count as progress), with no
token and with a guessed one, and reaching the server behind the keeper, or its token, directly.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.jobs import record, wait_for
from support.mlflow_store import tracking_of
from support.reliability import job_file

pytestmark = pytest.mark.slow  # the first job of a DISTRUN_HOME makes its MLflow store with mlflow

SECRET = "hunter2-as-a-param"
RANK = f"""
    import os, pathlib, time
    import mlflow
    mlflow.log_param("api_key", "{SECRET}")
    mlflow.log_metric("loss", 0.5, step=0)
    print("logged", flush=True)
    release = pathlib.Path(os.environ["RELEASE"])
    for _ in range(1200):
        if release.exists():
            break
        time.sleep(0.1)
    mlflow.log_metric("loss", 0.25, step=1)
"""
JOB = """
    command: python rank.py
    code: src
    environment_variables:
      RELEASE: {release}
"""
# Run as `nobody` by the system's Python (isolated: no site folder, no variables of ours).
OTHER_USER = """
import json, socket, sys, urllib.error, urllib.request
uri, run_id, folder = sys.argv[1:4]
def call(path, data=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(uri + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as refused:
        return [refused.code, refused.read().decode()]
found = {"read": call("/api/2.0/mlflow/runs/get?run_id=" + run_id)}
point = json.dumps({"run_id": run_id, "key": "loss", "value": -1e9, "timestamp": 0, "step": 9}).encode()
found["write"] = call("/api/2.0/mlflow/runs/log-metric", point)
found["guessed"] = call("/api/2.0/mlflow/runs/log-metric", point, token="guessed-token")
try:
    open(folder + "/token").close()
    found["token"] = "read"
except OSError as exc:
    found["token"] = type(exc).__name__
# Every file of the job's folder this user can read, and the record: none may hold the token.
import os
readable = {}
paths = [arg for arg in sys.argv[4:] if os.path.isfile(arg)]
paths += [os.path.join(at, name) for top in sys.argv[4:] for at, _, names in os.walk(top) for name in names]
for path in paths:
    try:
        with open(path, "rb") as file:
            readable[path] = file.read().decode("utf-8", "replace")
    except OSError:
        pass
found["readable"] = readable
inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    inner.connect(folder + "/server.sock")
    found["server"] = "connected"
except OSError as exc:
    found["server"] = type(exc).__name__
print(json.dumps(found))
"""


@pytest.fixture
def open_home() -> Iterator[Path]:
    """A DISTRUN_HOME whose parents every user may pass through (pytest's own folder is root's
    alone, which would keep `nobody` out of everything and prove nothing)."""
    parent = Path(tempfile.mkdtemp(prefix="distrun-access-"))
    parent.chmod(0o755)
    try:
        yield parent / "home"
    finally:
        (parent / "release").touch()  # the rank waits for it: a failed test leaves it no reason to stay
        time.sleep(0.5)
        shutil.rmtree(parent, ignore_errors=True)


def test_another_local_user_can_neither_read_nor_write_a_running_jobs_run(open_home: Path) -> None:
    home = open_home
    release = home.parent / "release"
    job = job_file(home.parent / "job", JOB.format(release=release), {"rank.py": RANK})
    env = {"DISTRUN_MLFLOW": "1", "DISTRUN_MLFLOW_SERVER_IDLE": "1"}
    created = distrun_cli(home, "job", "create", "--file", str(job), "--name", "private", env=env, timeout=300)
    assert created.returncode == 0, created.stdout + created.stderr
    log = home / "jobs" / "private" / "user_logs" / "std_log_process_00.txt"
    wait_for(lambda: log.exists() and "logged" in log.read_text(), timeout=240)
    tracking = tracking_of(home, "private")
    assert "MLFLOW_TRACKING_TOKEN" not in json.dumps(tracking)  # never in the job's folder's tracking file

    probe = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-I", "-c"]
        + [OTHER_USER, tracking["rank_tracking_uri"], tracking["run_id"], str(home / "mlflow-server")]
        + [str(home / "jobs" / "private"), str(home / "jobs.db")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"]},
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found["read"][0] == 401 and SECRET not in found["read"][1], found["read"]
    assert "MLFLOW_TRACKING_TOKEN" in found["read"][1]  # the refusal says what is missing
    assert found["write"][0] == 401, found["write"]
    assert found["guessed"][0] == 403, found["guessed"]
    assert found["token"] == "PermissionError" and found["server"] == "PermissionError", found
    token = (home / "mlflow-server" / "token").read_text().strip()
    readable = found["readable"]
    # The umask lets `nobody` read the job's folder and its record: the token is in none of them.
    assert {str(home / "jobs" / "private" / "plan.json"), str(home / "jobs.db")} <= set(readable), sorted(readable)
    assert [path for path, text in readable.items() if token in text] == []

    release.touch()
    wait_for(lambda: record(home, "private")["status"] == "Completed", timeout=120)
    with sqlite3.connect(home / "mlflow.db") as conn:
        points = conn.execute(
            "SELECT step, value FROM metrics WHERE run_uuid = ? ORDER BY step", (tracking["run_id"],)
        ).fetchall()
    assert points == [(0, 0.5), (1, 0.25)]  # the rank's own, before and after; none of the other user's
