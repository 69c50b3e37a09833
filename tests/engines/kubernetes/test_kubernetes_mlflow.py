"""A Kubernetes job's MLflow run, against the API emulator: what its pods get, and the route that works.

Pods run elsewhere than `distrun`, so the URI local ranks get (distrun's server on 127.0.0.1)
is not given to them: the submission says so and the run stays empty. With DISTRUN_MLFLOW_HOST
the server listens where pods reach it and they log into the job's run. The emulator's pods are
local processes that share this machine's network, so "reach" here is an address of this
machine that is not loopback; what is Kubernetes' own is that the variables travel in the job's
objects to the pod agent and from it to every rank. Ranks call the server's REST API (what
every MLflow client calls) rather than import mlflow.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from distrun.metrics import tracking_server
from support.clusters.k8s_emulator import EmulatedCluster
from support.jobs import wait_for
from support.mlflow_store import outbound_address, run_status, tracking_of

pytestmark = pytest.mark.slow  # the first job of a DISTRUN_HOME makes its MLflow store with mlflow
WAIT_S = 240
IDLE = 1  # seconds the server outlives its last user here (DISTRUN_MLFLOW_SERVER_IDLE; 20 for users)

RANK = """
    import json, os, time, urllib.request
    uri, run = os.environ.get("MLFLOW_TRACKING_URI"), os.environ.get("MLFLOW_RUN_ID")
    print("uri", uri or "-", "run", run or "-", flush=True)
    if run:
        point = {"run_id": run, "key": "loss", "value": 0.25, "step": 3, "timestamp": int(time.time() * 1000)}
        request = urllib.request.Request(uri + "/api/2.0/mlflow/runs/log-metric", data=json.dumps(point).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"]})
        print("logged", urllib.request.urlopen(request, timeout=180).status, flush=True)
"""
JOB = """
    command: python main.py
    code: ./src
    environment: {image: reg/distrun:test}
    resources: {instance_count: 1}
"""


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test
    monkeypatch.setenv("DISTRUN_MLFLOW_SERVER_IDLE", str(IDLE))
    for name in ("MLFLOW_TRACKING_URI", "DISTRUN_MLFLOW_HOST", "DISTRUN_MLFLOW_ADVERTISE"):
        monkeypatch.delenv(name, raising=False)


def logged_points(home: Path, run_id: str) -> list[tuple[str, float, int]]:
    with sqlite3.connect(home / "mlflow.db") as conn:
        return conn.execute("SELECT key, value, step FROM metrics WHERE run_uuid = ?", (run_id,)).fetchall()


def test_pods_get_the_run_only_on_a_route_they_reach(
    k8s: EmulatedCluster, run_cli, write_job, distrun_home: Path
) -> None:
    job = write_job(JOB, {"main.py": textwrap.dedent(RANK)})

    # Default: distrun's server on 127.0.0.1 of this machine, which in a pod means the pod.
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "loopback", timeout=WAIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "uri - run -" in done.stdout  # no MLFLOW_* variable reached the rank
    said = "the pods get no MLFLOW_* variables"
    assert said in done.stderr and "DISTRUN_MLFLOW_HOST=" in done.stderr
    assert said in (distrun_home / "jobs" / "loopback" / "system_logs" / "metrics.txt").read_text()
    loopback = tracking_of(distrun_home, "loopback")
    assert loopback["rank_tracking_uri"].startswith("http://127.0.0.1:")
    assert run_status(distrun_home, loopback["run_id"]) == "FINISHED"  # closed, and empty
    assert logged_points(distrun_home, loopback["run_id"]) == []

    # The address is chosen when a server starts: wait until the first job's has ended.
    wait_for(lambda: tracking_server.verified_state(distrun_home) is None, 60, 0.2)
    # An interface of this machine the pods reach (by address: the cluster's DNS, here the
    # emulator's /etc/hosts, does not know this machine's name).
    env = {"DISTRUN_MLFLOW_HOST": outbound_address()}
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "routed", env=env, timeout=WAIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    routed = tracking_of(distrun_home, "routed")
    uri = routed["rank_tracking_uri"]
    assert not uri.startswith(("http://0.0.0.0", "http://127.")), uri
    assert f"uri {uri} run {routed['run_id']}" in done.stdout and "logged 200" in done.stdout
    assert "MLFLOW_" not in done.stderr
    assert logged_points(distrun_home, routed["run_id"]) == [("loss", 0.25, 3)]
    assert run_status(distrun_home, routed["run_id"]) == "FINISHED"
    plan = json.loads((distrun_home / "jobs" / "routed" / "plan.json").read_text())
    assert plan["nodes"][0]["processes"][0]["env"]["MLFLOW_TRACKING_URI"] == uri
