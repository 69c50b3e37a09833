"""Real TensorFlow jobs on the local backend: the examples as they are, and failing tasks.

Each test runs `python -m distrun run` on a job under examples/, with real TensorFlow
processes talking gRPC on 127.0.0.1 ports distrun picked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distrun.plan.model import tf_config
from support.cli import REPO
from support.jobs import processes_of_job, record

MULTIWORKER = REPO / "examples" / "tensorflow-multiworker" / "job.yml"
PARAMETER_SERVER = REPO / "examples" / "tensorflow-ps" / "job.yml"

pytestmark = pytest.mark.slow


def by_name(rec: dict) -> dict[str, dict]:
    return {p["name"]: p for p in rec["processes"]}


def user_logs(home: Path, name: str) -> Path:
    return home / "jobs" / name / "user_logs"


def tf_configs(home: Path, name: str) -> dict[str, dict]:
    plan = json.loads((home / "jobs" / name / "plan.json").read_text())
    return {
        p["name"]: json.loads(tf_config(plan["tf_cluster"], *p["tf_task"]))
        for node in plan["nodes"]
        for p in node["processes"]
    }


def test_multiworker_mirrored_example_trains_the_same_weights_on_both_workers_beside_a_second_job(
    start_cli, distrun_home
):
    """The example as it is, while a second job of it runs at the same time: each job's workers
    get ports of their own. The second job's workers only wait (the ports are leased to the job
    for its life, whatever it runs); a second TensorFlow is tens of seconds of CPU."""
    name, twin = "tf-mwms-ok", "tf-twin"
    procs = [
        start_cli("run", str(MULTIWORKER), "--name", name),
        start_cli("run", str(MULTIWORKER), "--name", twin, "--set", "command=sleep 20"),
    ]
    stdout, twin_out = (proc.communicate(timeout=300)[0] for proc in procs)
    assert procs[0].returncode == 0, stdout
    assert procs[1].returncode == 0, twin_out
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"

    logs = user_logs(distrun_home, name)
    assert sorted(p.name for p in logs.iterdir()) == ["std_log_node_00_worker.txt", "std_log_node_01_worker.txt"]
    digests = []
    for node, index in ((0, 0), (1, 1)):
        text = (logs / f"std_log_node_{node:02d}_worker.txt").read_text()
        assert f"worker {index}: 2 replicas in sync" in text
        digests += re.findall(rf"worker {index}: final weights digest ([0-9a-f]+)", text)
    assert len(digests) == 2 and digests[0] == digests[1]
    assert (distrun_home / "jobs" / name / "named-outputs" / "model" / "weights.npz").stat().st_size > 0

    # the live stream shows role and index
    assert "[worker 0] worker 0: final weights digest" in stdout
    assert "[worker 1] worker 1: final weights digest" in stdout

    configs = tf_configs(distrun_home, name)
    cluster = configs["worker_0"]["cluster"]
    assert list(cluster) == ["worker"]  # no empty "ps": [] (TensorFlow 2.13+ rejects it)
    assert len(set(cluster["worker"])) == 2 and all(a.startswith("127.0.0.1:") for a in cluster["worker"])
    assert configs["worker_1"]["task"] == {"type": "worker", "index": 1}
    assert processes_of_job(name) == []
    # The two jobs at once: each its own ports, both completed, nothing left.
    twins = {a for config in tf_configs(distrun_home, twin).values() for a in config["cluster"]["worker"]}
    assert len(twins) == 2 and not twins & set(cluster["worker"])
    assert record(distrun_home, twin)["status"] == "Completed"
    assert processes_of_job(twin) == []


def test_parameter_server_example_completes_and_stops_its_servers(run_cli, distrun_home):
    name = "tf-ps-ok"
    result = run_cli("run", str(PARAMETER_SERVER), "--name", name)
    assert result.returncode == 0, result.stdout + result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed", rec["reason"]
    assert processes_of_job(name) == []

    logs = user_logs(distrun_home, name)
    assert sorted(p.name for p in logs.iterdir()) == [
        "std_log_node_00_chief.txt",
        "std_log_node_00_worker.txt",
        "std_log_node_01_ps.txt",
        "std_log_node_01_worker.txt",
    ]
    chief = (logs / "std_log_node_00_chief.txt").read_text()
    placements = re.findall(r"chief: variable (\S+) on (\S+)", chief)
    assert len(placements) == 4  # two Dense layers: kernel and bias each
    assert all(device.startswith("/job:ps/replica:0/task:0/") for _, device in placements)
    assert "chief: 40 steps done" in chief

    procs = by_name(rec)
    assert procs["chief_0"]["exit_code"] == 0 and not procs["chief_0"]["stopped_by_distrun"]
    for server in ("worker_0", "worker_1", "ps_0"):
        # serving until stopped: distrun's signal ended them, and that is not a failure
        assert procs[server]["stopped_by_distrun"], procs[server]
        assert procs[server]["exit_code"] in (None, 0)
    assert "[ps 0] ps 0: serving at grpc://127.0.0.1:" in result.stdout

    cluster = tf_configs(distrun_home, name)["ps_0"]["cluster"]
    assert {role: len(addresses) for role, addresses in cluster.items()} == {"chief": 1, "worker": 2, "ps": 1}


# A worker raising mid-training: the first failure is the root cause and the other ranks get
# SIGTERM at once, proved for every kind of rank by tests/reliability/test_rank_faults.py and the
# torch, MPI and DeepSpeed failing-rank tests; a TensorFlow role as the root cause, below.


def test_parameter_server_dying_fails_the_job_with_ps_as_root_cause(run_cli, distrun_home):
    name = "tf-ps-crash"
    result = run_cli(
        "run",
        str(PARAMETER_SERVER),
        "--name",
        name,
        "--set",
        "command=python train.py --steps 1000000 --crash-ps-after 3",
        "--set",
        "limits.grace_period=30",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    cause = rec["root_cause"]
    assert (cause["role"], cause["index"], cause["node_rank"]) == ("ps", 0, 1)
    assert "RuntimeError: ps 0 failed after 3 s (injected)" in cause["traceback"]
    assert "Reason: ps 0 on node 1 exited with code 1" in result.stdout
    for other in ("chief_0", "worker_0", "worker_1"):
        assert by_name(rec)[other]["stopped_by_distrun"], by_name(rec)[other]
    assert processes_of_job(name) == []
