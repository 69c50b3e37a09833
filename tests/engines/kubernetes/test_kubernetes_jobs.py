"""Kubernetes jobs end to end, against an in-memory API emulator and a test kubelet.

No Kubernetes API server can run here: `tests/support/clusters/k8s_emulator.py` is a mock of one (kmock's
KubernetesEmulator, with test-side Job/JobSet controllers and a kubelet that runs each pod's
command as a local process). distrun itself is real: the CLI submits with the official
`kubernetes` client, each pod runs distrun's pod agent, which runs real torch/gloo ranks and
real TensorFlow tasks, and the client reads status, logs and outcomes back through the API.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.cli import SRC
from support.clusters.k8s_emulator import EmulatedCluster

pytestmark = pytest.mark.slow
WAIT_S = 240


def free_port_base(count: int = 16) -> int:
    """A base port with `count` free ports after it (pods of one test share this machine's ports)."""
    for base in range(31000, 60000, 97):
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range")


@pytest.fixture(params=[True, False], ids=["jobset", "indexed-jobs"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmulatedCluster]:
    emulated = EmulatedCluster(tmp_path / "cluster", jobset_crd=request.param).start()
    emulated.kubelet.base_env["PYTHONPATH"] = str(SRC)  # "the image has distrun installed"
    try:
        yield emulated
    finally:
        left = emulated.stop()
        assert not left, f"pods still running at the end: {left}"
        assert not emulated.errors, emulated.errors[:3]


@pytest.fixture
def k8s(cluster: EmulatedCluster, run_cli: Callable[..., subprocess.CompletedProcess[str]]) -> EmulatedCluster:
    settings = cluster.settings(python=sys.executable, port_base=free_port_base(), image="reg/distrun:test")
    args = ["compute", "create", "--name", "k8s", "--type", "kubernetes"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    made = run_cli(*args)
    assert made.returncode == 0, made.stderr
    return cluster


def write_job(folder: Path, script: str, job: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "main.py").write_text(textwrap.dedent(script))
    path = folder / "job.yml"
    path.write_text(textwrap.dedent(job))
    return path


DDP = """
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    node, master = os.environ["NODE_RANK"], os.environ["MASTER_ADDR"]
    print(f"rank {rank}/{world} node {node} master {master} sum {total.item():g}", flush=True)
    if rank == int(os.environ.get("FAIL_RANK", "-1")):
        raise ValueError(f"bad batch on rank {rank}")
    if os.environ.get("FAIL_RANK"):
        import time; time.sleep(600)
    dist.destroy_process_group()
"""

DDP_JOB = """
    command: python main.py
    code: ./src
    environment: {image: reg/distrun:test}
    resources: {instance_count: 2}
    distribution: {type: pytorch, process_count_per_instance: 2}
    limits: {grace_period: 3}
"""


def show(run_cli: Callable[..., subprocess.CompletedProcess[str]], name: str) -> dict:
    shown = run_cli("job", "show", name, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def wait_for(run_cli: Callable[..., subprocess.CompletedProcess[str]], name: str, done: Callable[[dict], bool]) -> dict:
    give_up = time.monotonic() + WAIT_S
    record = show(run_cli, name)
    while not done(record):
        assert time.monotonic() < give_up, f"gave up waiting; last record: {record}"
        time.sleep(1)
        record = show(run_cli, name)
    return record


def test_ddp_2x2_over_gloo_runs_in_four_processes_on_two_pods(k8s: EmulatedCluster, run_cli, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", DDP, DDP_JOB)
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "ddp-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    name = "ddp-k8s"
    host0 = f"{name}-worker-0-0.{name}" if k8s.jobset_crd else f"{name}-worker-0.{name}"
    for rank in range(4):
        assert f"[{rank // 2}/{rank}] rank {rank}/4 node {rank // 2} master {host0} sum 6" in done.stdout
    record = show(run_cli, name)
    assert record["status"] == "Completed"
    assert sorted(p["name"] for p in record["processes"]) == [f"rank_{r}" for r in range(4)]
    logs = Path(record["folder"]) / "user_logs"
    for rank in range(4):
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        # The pod's stream prefix is taken off again: the file holds the rank's own bytes.
        assert f"rank {rank}/4 node {rank // 2}" in text and f"[{rank // 2}/{rank}] " not in text
    # Both pods ran distrun's pod agent and were created by the objects distrun submitted.
    kinds = {r.url.path.split("/")[-1] for r in k8s.emulator.requests() if str(r.method).upper().endswith("POST")}
    assert ("jobsets" in kinds) == k8s.jobset_crd and ("services" in kinds) != k8s.jobset_crd


def test_a_failing_rank_fails_the_gang_with_its_pod_node_and_traceback(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", DDP, DDP_JOB + "    environment_variables: {FAIL_RANK: '2'}\n")
    started = time.monotonic()
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "fail-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < WAIT_S  # the others (sleeping 600 s) were stopped
    record = show(run_cli, "fail-k8s")
    assert record["status"] == "Failed"
    root = record["root_cause"]
    assert root["name"] == "rank_2" and root["node_rank"] == 1
    assert root["pod"].startswith("fail-k8s-worker-") and root["host"] == "test-node-0"
    assert "ValueError: bad batch on rank 2" in root["traceback"]
    assert "rank_2" in done.stdout and "ValueError: bad batch on rank 2" in done.stdout
    # The gang is stopped: no pod of the job is left running.
    live = k8s.live_pods()
    assert not live, live


SLEEPER_JOB = """
    command: python main.py
    code: ./src
    environment: {image: reg/distrun:test}
    resources: {instance_count: 2}
    distribution: {type: pytorch}
    limits: {grace_period: 2}
"""


def test_cancel_deletes_the_job_with_foreground_propagation(k8s: EmulatedCluster, run_cli, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "import time\nprint('started', flush=True)\ntime.sleep(600)\n", SLEEPER_JOB)
    made = run_cli("job", "create", "--file", str(job), "--compute", "k8s", "--name", "cancel-k8s")
    assert made.returncode == 0, made.stderr
    wait_for(run_cli, "cancel-k8s", lambda r: r["status"] == "Running")
    canceled = run_cli("job", "cancel", "cancel-k8s", timeout=WAIT_S)
    assert canceled.returncode == 0, canceled.stderr
    record = wait_for(run_cli, "cancel-k8s", lambda r: r["status"] == "Canceled")
    assert record["reason"] == "canceled by the user"
    deletes = [r for r in k8s.emulator.requests() if str(r.method).upper().endswith("DELETE")]
    top = "jobsets" if k8s.jobset_crd else "jobs"
    assert any(
        f"/{top}/cancel-k8s" in r.url.path and (r.data or {}).get("propagationPolicy") == "Foreground" for r in deletes
    )
    assert not k8s.live_pods()


def test_an_unschedulable_job_is_queued_with_the_schedulers_reason(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(
        tmp_path / "job",
        "print('never')\n",
        SLEEPER_JOB + "    properties: {worker_resource_limits: {gpu: 8}}\n",
    )
    made = run_cli("job", "create", "--file", str(job), "--compute", "k8s", "--name", "gpu-k8s")
    assert made.returncode == 0, made.stderr
    record = wait_for(run_cli, "gpu-k8s", lambda r: "Insufficient" in (r.get("reason") or ""))
    assert record["status"] == "Queued"
    assert "cannot be scheduled" in record["reason"] and "Insufficient nvidia.com/gpu" in record["reason"]
    canceled = run_cli("job", "cancel", "gpu-k8s", timeout=WAIT_S)
    assert canceled.returncode == 0 and "Canceled" in canceled.stdout, canceled.stdout + canceled.stderr


TF_PS = """
    import json, os, sys
    import tensorflow as tf
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    cluster = tf.train.ClusterSpec(config["cluster"])
    if task["type"] == "ps":
        print(f"ps {task['index']} serving", flush=True)
        tf.distribute.Server(cluster, job_name="ps", task_index=task["index"], protocol="grpc").join()
    else:
        import socket, time
        print(f"worker {task['index']} sees {sorted(config['cluster'])}", flush=True)
        host, port = config["cluster"]["ps"][0].rsplit(":", 1)
        deadline = time.time() + 180
        while True:  # the parameter server's gRPC port, by its pod's stable name
            try:
                socket.create_connection((host, int(port)), 2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        print(f"worker {task['index']} reached ps 0 at {host}", flush=True)
"""


@pytest.mark.parametrize("cluster", [False], ids=["indexed-jobs"], indirect=True)
def test_tensorflow_parameter_server_is_stopped_when_the_workers_are_done(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(
        tmp_path / "job",
        TF_PS,
        """
        command: python main.py
        code: ./src
        environment: {image: reg/distrun:test}
        distribution: {type: tensorflow, worker_count: 2, parameter_server_count: 1}
        limits: {grace_period: 3}
        """,
    )
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "tf-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[worker 0] worker 0 sees ['ps', 'worker']" in done.stdout
    assert "[worker 1] worker 1 reached ps 0 at tf-k8s-ps-0.tf-k8s" in done.stdout
    record = show(run_cli, "tf-k8s")
    assert record["status"] == "Completed"
    procs = {p["name"]: p for p in record["processes"]}
    assert procs["worker_0"]["exit_code"] == 0 and procs["worker_1"]["exit_code"] == 0
    assert procs["ps_0"]["stopped_by_distrun"] is True
    logs = Path(record["folder"]) / "user_logs"
    assert "ps 0 serving" in (logs / "std_log_node_02_ps.txt").read_text()


MPI_RANK = """
    import os, socket, time
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    total = comm.allreduce(rank + 1)
    # Each pod has a hostname of its own: the rank tells which pod it runs in.
    print(f"rank {rank} of {comm.Get_size()} sum {total} in pod {socket.gethostname()}", flush=True)
    if rank == int(os.environ.get("FAIL_RANK", "-1")):
        time.sleep(1)
        raise ValueError(f"bad batch on rank {rank}")
    if os.environ.get("FAIL_RANK"):
        time.sleep(600)  # stopped when the gang fails
"""

# The test cluster is one machine: Open MPI must use loopback (it leaves it out by default) and
# TCP between its ranks, as a user of one machine sets it.
MPI_JOB = """
    command: python -m mpi4py main.py
    code: ./src
    environment: {image: reg/distrun:test}
    resources: {instance_count: 2}
    distribution: {type: mpi, process_count_per_instance: 2}
    limits: {grace_period: 3}
    environment_variables:
      OMPI_MCA_btl: self,tcp
      OMPI_MCA_btl_tcp_if_include: lo
      OMPI_MCA_oob_tcp_if_include: lo
"""


def test_mpi_ranks_start_in_the_worker_pods_through_their_agents_without_ssh(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", MPI_RANK, MPI_JOB)
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "mpi-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = show(run_cli, "mpi-k8s")
    assert record["status"] == "Completed"
    workers = "mpi-k8s-worker-0" if k8s.jobset_crd else "mpi-k8s-worker"
    logs = Path(record["folder"]) / "user_logs"
    for rank in range(4):
        # mpirun in the launcher pod started ranks 0-1 in worker pod 0 and 2-3 in worker pod 1.
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} of 4 sum 10 in pod {workers}-{rank // 2}\n" in text, text
    secrets = [r for r in k8s.emulator.requests() if str(r.url.path).endswith("/secrets")]
    assert secrets, "the remote-start token was not submitted as a Secret"
    # Cleaned up with the job: the Secret is gone once it is over.
    wait_until_gone = time.monotonic() + 30
    while k8s.api.list("secrets") and time.monotonic() < wait_until_gone:
        time.sleep(0.5)
    assert not k8s.api.list("secrets")


@pytest.mark.parametrize("cluster", [True], ids=["jobset"], indirect=True)
def test_an_mpi_rank_failing_in_a_worker_pod_fails_the_job_with_its_traceback(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", MPI_RANK, MPI_JOB + "      FAIL_RANK: '3'\n")
    started = time.monotonic()
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "mpi-fail", timeout=WAIT_S + 60)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < WAIT_S  # the other ranks (sleeping 600 s) were stopped
    record = show(run_cli, "mpi-fail")
    assert record["status"] == "Failed"
    root = record["root_cause"]
    assert root["name"] == "rank_3", root
    assert "ValueError: bad batch on rank 3" in root["traceback"]
    live = k8s.live_pods()
    assert not live, live


RESTARTING = """
    import os, sys, time
    attempt, rank = os.environ["DISTRUN_RESTART_COUNT"], os.environ["RANK"]
    print(f"rank {rank} attempt {attempt} torchelastic {os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
    failing = attempt == "0" or os.environ.get("ALWAYS")
    if failing and rank == "1":
        if os.environ.get("FINAL_CODE"):
            sys.exit(int(os.environ["FINAL_CODE"]))
        raise RuntimeError(f"lost a GPU on attempt {attempt}")
    if failing or os.environ.get("FINAL_CODE"):
        time.sleep(600)  # stopped when the gang fails
"""

RESTART_JOB = SLEEPER_JOB.replace("{grace_period: 2}", "{grace_period: 2, max_restarts: 2, no_restart_exit_codes: [3]}")


@pytest.mark.parametrize("cluster", [True], ids=["jobset"], indirect=True)
def test_a_rank_that_fails_on_attempt_0_is_restarted_by_jobset_and_completes(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB)
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "restart-k8s", timeout=2 * WAIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rank in range(2):  # the second attempt's lines are streamed too
        assert f"rank {rank} attempt 1 torchelastic 1" in done.stdout, done.stdout
    record = show(run_cli, "restart-k8s")
    assert record["status"] == "Completed"
    first, second = record["attempts"]
    assert first["attempt"] == 0 and first["status"] == "Failed" and first["restarted"] is True
    assert first["root_cause"]["name"] == "rank_1" and "lost a GPU on attempt 0" in first["root_cause"]["traceback"]
    assert first["logs"] == "user_logs/attempt_0"
    assert second["attempt"] == 1 and second["status"] == "Completed"
    assert sorted(p["name"] for p in record["processes"]) == ["rank_0", "rank_1"]
    assert all(p["exit_code"] == 0 for p in record["processes"])  # the last attempt's processes
    logs = Path(record["folder"]) / "user_logs"
    old = (logs / "attempt_0" / "std_log_process_01.txt").read_text()
    assert "rank 1 attempt 0 torchelastic 0" in old and "RuntimeError: lost a GPU on attempt 0" in old
    assert "rank 0 attempt 0" in (logs / "attempt_0" / "std_log_process_00.txt").read_text()
    new = (logs / "std_log_process_01.txt").read_text()
    assert "rank 1 attempt 1 torchelastic 1" in new and "attempt 0" not in new
    # JobSet counted one restart; the summary lists both attempts.
    patches = [r for r in k8s.emulator.requests() if str(r.method).upper().endswith("PATCH")]
    assert any(
        "/jobsets/restart-k8s" in r.url.path and (r.data or {}).get("status", {}).get("restarts") == 1 for r in patches
    )
    assert "Attempts: 2\n  attempt 0: Failed, rank 1 on node 1 exited with code 1" in done.stdout


@pytest.mark.parametrize("cluster", [True], ids=["jobset"], indirect=True)
def test_a_no_restart_exit_code_fails_the_jobset_at_once(k8s: EmulatedCluster, run_cli, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB + "    environment_variables: {FINAL_CODE: '3'}\n")
    made = run_cli("job", "create", "--file", str(job), "--compute", "k8s", "--name", "final-k8s")
    assert made.returncode == 0, made.stderr
    # Nothing reads the job meanwhile, so this is the cluster's own doing: the pod failure policy
    # failed the Job (reason PodFailurePolicy) and the JobSet's rule failed the set, no restart.
    give_up = time.monotonic() + WAIT_S
    while not ((k8s.api.get("jobsets", "final-k8s") or {}).get("status") or {}).get("conditions"):
        assert time.monotonic() < give_up, k8s.api.get("jobsets", "final-k8s")
        time.sleep(0.5)
    status = k8s.api.get("jobsets", "final-k8s")["status"]
    assert [c["reason"] for c in status["conditions"]] == ["FailurePolicyRuleAction"] and not status.get("restarts")
    record = wait_for(run_cli, "final-k8s", lambda r: r["status"] in ("Failed", "Completed", "Canceled"))
    assert record["status"] == "Failed"
    assert "exit code 3 is in limits.no_restart_exit_codes" in record["reason"]
    assert record["root_cause"]["name"] == "rank_1" and record["root_cause"]["exit_code"] == 3
    (only,) = record["attempts"]
    assert only["attempt"] == 0 and only["restarted"] is False
    live = k8s.live_pods()
    assert not live, live


@pytest.mark.parametrize("cluster", [True], ids=["jobset"], indirect=True)
def test_a_job_that_fails_on_every_attempt_ends_failed_when_jobset_used_its_restarts(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB + "    environment_variables: {ALWAYS: '1'}\n")
    done = run_cli(
        "run", str(job), "--compute", "k8s", "--name", "always-k8s", "--max-restarts", "1", timeout=2 * WAIT_S
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    record = show(run_cli, "always-k8s")
    assert record["status"] == "Failed"
    assert "after 2 failed attempts (limits.max_restarts: 1)" in record["reason"]
    assert "lost a GPU on attempt 1" in record["root_cause"]["traceback"]
    assert [(a["attempt"], a["status"], a["restarted"]) for a in record["attempts"]] == [
        (0, "Failed", True),
        (1, "Failed", False),
    ]
    assert "lost a GPU on attempt 0" in record["attempts"][0]["root_cause"]["traceback"]
    logs = Path(record["folder"]) / "user_logs"
    assert "lost a GPU on attempt 0" in (logs / "attempt_0" / "std_log_process_01.txt").read_text()
    assert "lost a GPU on attempt 1" in (logs / "std_log_process_01.txt").read_text()
    status = k8s.api.get("jobsets", "always-k8s")
    assert status is None or status["status"]["restarts"] == 1  # distrun may have deleted it already
    live = k8s.live_pods()
    assert not live, live


PREEMPTED = """
    import os, time
    attempt, rank = os.environ["DISTRUN_RESTART_COUNT"], os.environ["RANK"]
    print(f"rank {rank} attempt {attempt} started", flush=True)
    if attempt == "0":
        time.sleep(600)  # until its pod is evicted (or the gang stopped)
"""


@pytest.mark.parametrize("cluster", [True], ids=["jobset"], indirect=True)
def test_an_evicted_pod_is_a_preemption_that_does_not_use_up_max_restarts(
    k8s: EmulatedCluster, run_cli, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", PREEMPTED, RESTART_JOB.replace("max_restarts: 2", "max_restarts: 1"))
    made = run_cli("job", "create", "--file", str(job), "--compute", "k8s", "--name", "evict-k8s")
    assert made.returncode == 0, made.stderr
    logs = Path(show(run_cli, "evict-k8s")["folder"]) / "user_logs"
    wait_for(run_cli, "evict-k8s", lambda r: (logs / "std_log_process_01.txt").exists() and r["status"] == "Running")
    # What the eviction API does: the DisruptionTarget condition, then the pod's deletion.
    (victim,) = [p for p in k8s.pods() if p["metadata"]["name"].startswith("evict-k8s-worker-0-1")]
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    k8s.api.patch("pods", victim["metadata"]["name"], {"status": {"conditions": [condition]}})
    k8s.api.delete("pods", victim["metadata"]["name"])
    record = wait_for(run_cli, "evict-k8s", lambda r: r["status"] in ("Completed", "Failed", "Canceled"))
    assert record["status"] == "Completed", record
    first, second = record["attempts"]
    # From its pods' reports, or (when they went before distrun read them) from JobSet's counts.
    assert first["status"] == "Preempted" and first["reason"].startswith("preempted: ") and first["restarted"], first
    assert second["status"] == "Completed"
    assert "rank 1 attempt 1 started" in (logs / "std_log_process_01.txt").read_text()
    assert "rank 1 attempt 0 started" in (logs / "attempt_0" / "std_log_process_01.txt").read_text()
    # JobSet restarted the set without counting it against maxRestarts (1 is still left).
    status = k8s.api.get("jobsets", "evict-k8s")["status"]
    assert status["restarts"] == 1 and not status.get("restartsCountTowardsMax")
