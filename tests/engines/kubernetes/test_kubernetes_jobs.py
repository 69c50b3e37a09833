"""Kubernetes jobs end to end, against an in-memory API emulator and a test kubelet.

No Kubernetes API server can run here: `tests/support/clusters/k8s_emulator.py` is a mock of one (kmock's
KubernetesEmulator, with test-side Job/JobSet controllers and a kubelet that runs each pod's
command as a local process). distrun itself is real: it submits with the official `kubernetes`
client (`distrun run` and `job create`, or where the submission is not the subject, the call
those make, in the test process), each pod runs distrun's pod agent, which runs the ranks (real torch/gloo
DDP and real MPI where the test is about them, plain Python ranks where only failing or sleeping
matters), and the client reads status, logs and outcomes back through the API.

The two forms a job takes (a JobSet, or Indexed Jobs and a headless Service) are both run where
they take different roads end to end: the objects submitted, the hostnames ranks find each other
by (DDP, MPI), and how a job is deleted (cancel, gang stop). The rest runs on the JobSet form
(the `cluster` fixture's default); restarts are JobSet's alone. Their rendering, offline, is
checked in tests/unit/test_kubernetes_manifests.py.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.clusters.k8s_emulator import EmulatedCluster
from support.jobs import wait_for

pytestmark = pytest.mark.slow
WAIT_S = 240
# How often a test reads a job's record while it waits; each read asks the cluster (as `job show` does).
READ_EVERY_S = 0.2

BOTH_FORMS = pytest.mark.parametrize("cluster", [True, False], ids=["jobset", "indexed-jobs"], indirect=True)
INDEXED_JOBS = pytest.mark.parametrize("cluster", [False], ids=["indexed-jobs"], indirect=True)


def write_job(folder: Path, script: str, job: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "main.py").write_text(textwrap.dedent(script))
    path = folder / "job.yml"
    path.write_text(textwrap.dedent(job))
    return path


def submit(home: Path, job: Path, name: str) -> None:
    """`distrun job create --file JOB --compute k8s --name NAME` in this process (what the command
    calls), for tests about what the cluster then does; the cancel tests run the command itself."""
    from distrun.loading.loader import load_job_file
    from distrun.runner.jobs import submit_job
    from distrun.store.layout import Layout

    submit_job(load_job_file(job), Layout(home), "k8s", name)


def shown(home: Path, name: str) -> dict[str, Any]:
    """The job's record as `distrun job show NAME -o json` prints it (less the metrics), read in
    this process: a live job is brought up to date from the cluster on the way, as the command does."""
    from distrun.runner.jobs import get_job
    from distrun.store.layout import Layout

    return get_job(Layout(home), name).to_dict()


def wait_for_record(home: Path, name: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Read the job's record (`shown`) until `done` says yes; returns that record."""
    last: list[dict[str, Any]] = [{}]

    def check() -> bool:
        last[0] = shown(home, name)
        return done(last[0])

    try:
        wait_for(check, WAIT_S, READ_EVERY_S)
    except AssertionError:
        raise AssertionError(f"gave up waiting; last record: {last[0]}") from None
    return last[0]


DDP = """
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    node, master = os.environ["NODE_RANK"], os.environ["MASTER_ADDR"]
    print(f"rank {rank}/{world} node {node} master {master} sum {total.item():g}", flush=True)
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


# Real DDP over gloo in each form (the ranks find rank 0 by its pod's name, which the forms spell
# differently); two ranks per pod in one, one in the other (each torch import costs seconds of CPU).
@pytest.mark.parametrize(
    ("cluster", "per_pod"), [(True, 2), (False, 1)], ids=["jobset-2x2", "indexed-jobs-2x1"], indirect=["cluster"]
)
def test_ddp_over_gloo_runs_its_ranks_in_two_pods(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path, per_pod: int
) -> None:
    job = write_job(
        tmp_path / "job",
        DDP,
        DDP_JOB.replace("process_count_per_instance: 2", f"process_count_per_instance: {per_pod}"),
    )
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "ddp-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    name, world = "ddp-k8s", 2 * per_pod
    host0 = f"{name}-worker-0-0.{name}" if k8s.jobset_crd else f"{name}-worker-0.{name}"
    total = sum(range(world))
    for rank in range(world):
        node = rank // per_pod
        assert f"[{node}/{rank}] rank {rank}/{world} node {node} master {host0} sum {total}" in done.stdout
    record = shown(distrun_home, name)
    assert record["status"] == "Completed"
    assert sorted(p["name"] for p in record["processes"]) == [f"rank_{r}" for r in range(world)]
    logs = Path(record["folder"]) / "user_logs"
    for rank in range(world):
        node = rank // per_pod
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        # The pod's stream prefix is taken off again: the file holds the rank's own bytes.
        assert f"rank {rank}/{world} node {node}" in text and f"[{node}/{rank}] " not in text
    # Each pod's agent ran from the zip its job's ConfigMap carries: the image's Python has no distrun.
    agent_logs = [
        (folder / "log").read_text() for folder in sorted(k8s.pod_root.iterdir()) if (folder / "log").is_file()
    ]
    assert len(agent_logs) == 2, agent_logs
    origin = f"distrun from {k8s.work_dir}/files/distrun.zip"
    assert all(origin in text for text in agent_logs), [text[:400] for text in agent_logs]
    # Both pods ran distrun's pod agent and were created by the objects distrun submitted.
    kinds = {r.url.path.split("/")[-1] for r in k8s.emulator.requests() if str(r.method).upper().endswith("POST")}
    assert ("jobsets" in kinds) == k8s.jobset_crd and ("services" in kinds) != k8s.jobset_crd


# Rank 2 fails once its peers had a moment to start; the others sleep until the gang is stopped.
FAILING = """
    import os, time
    rank = int(os.environ["RANK"])
    print(f"rank {rank} up on node {os.environ['NODE_RANK']}", flush=True)
    if rank == 2:
        time.sleep(1)
        raise ValueError(f"bad batch on rank {rank}")
    time.sleep(600)
"""

FAILING_JOB = DDP_JOB.replace("grace_period: 3", "grace_period: 2")


def test_a_failing_rank_fails_the_gang_with_its_pod_node_and_traceback(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", FAILING, FAILING_JOB)
    started = time.monotonic()
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "fail-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < WAIT_S  # the others (sleeping 600 s) were stopped
    record = shown(distrun_home, "fail-k8s")
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


@BOTH_FORMS
def test_cancel_deletes_the_job_with_foreground_propagation(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", "import time\nprint('started', flush=True)\ntime.sleep(600)\n", SLEEPER_JOB)
    made = run_cli("job", "create", "--file", str(job), "--compute", "k8s", "--name", "cancel-k8s")
    assert made.returncode == 0, made.stderr
    wait_for_record(distrun_home, "cancel-k8s", lambda r: r["status"] == "Running")
    canceled = run_cli("job", "cancel", "cancel-k8s", timeout=WAIT_S)
    assert canceled.returncode == 0, canceled.stderr
    record = wait_for_record(distrun_home, "cancel-k8s", lambda r: r["status"] == "Canceled")
    assert record["reason"] == "canceled by the user"
    deletes = [r for r in k8s.emulator.requests() if str(r.method).upper().endswith("DELETE")]
    top = "jobsets" if k8s.jobset_crd else "jobs"
    assert any(
        f"/{top}/cancel-k8s" in r.url.path and (r.data or {}).get("propagationPolicy") == "Foreground" for r in deletes
    )
    assert not k8s.live_pods()


def test_an_unschedulable_job_is_queued_with_the_schedulers_reason(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(
        tmp_path / "job",
        "print('never')\n",
        SLEEPER_JOB + "    properties: {worker_resource_limits: {gpu: 8}}\n",
    )
    submit(distrun_home, job, "gpu-k8s")

    def unschedulable() -> bool:
        conditions = [c for p in k8s.pods() for c in (p.get("status") or {}).get("conditions") or []]
        return any(c.get("reason") == "Unschedulable" for c in conditions)

    # Nothing reads the job meanwhile: `job show` itself must bring the record up to date from the
    # cluster (the one test that reads a Kubernetes job through the command).
    wait_for(unschedulable, WAIT_S, 0.1)
    show = run_cli("job", "show", "gpu-k8s", "-o", "json")
    assert show.returncode == 0, show.stderr
    record = json.loads(show.stdout)
    assert record["status"] == "Queued"
    assert "cannot be scheduled" in record["reason"] and "Insufficient nvidia.com/gpu" in record["reason"]
    canceled = run_cli("job", "cancel", "gpu-k8s", timeout=WAIT_S)
    assert canceled.returncode == 0 and "Canceled" in canceled.stdout, canceled.stdout + canceled.stderr
    # Its pods never ran: the record still names every planned rank, as never started.
    record = wait_for_record(distrun_home, "gpu-k8s", lambda r: r["status"] == "Canceled")
    assert [(p["name"], p.get("never_started"), p.get("pid")) for p in record["processes"]] == [
        ("rank_0", True, None),
        ("rank_1", True, None),
    ], record["processes"]
    assert not k8s.pods()  # distrun's report finalizer was taken off: the pods are gone


# TF_CONFIG as TensorFlow reads it, and a parameter server that serves until it is stopped: a
# plain socket server on its TF_CONFIG port stands in for tf.distribute.Server (what Kubernetes
# adds is the pods' DNS names in TF_CONFIG and the stop; real TensorFlow parameter servers run
# from the same TF_CONFIG in tests/frameworks/test_tensorflow_jobs.py).
TF_PS = """
    import json, os, socket, time
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    if task["type"] == "ps":
        port = int(config["cluster"]["ps"][task["index"]].rsplit(":", 1)[1])
        server = socket.create_server(("", port))
        print(f"ps {task['index']} serving", flush=True)
        while True:
            server.accept()[0].close()
    else:
        print(f"worker {task['index']} sees {sorted(config['cluster'])}", flush=True)
        host, port = config["cluster"]["ps"][0].rsplit(":", 1)
        deadline = time.time() + 180
        while True:  # the parameter server's port, by its pod's stable name
            try:
                socket.create_connection((host, int(port)), 2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        print(f"worker {task['index']} reached ps 0 at {host}", flush=True)
"""


# Indexed Jobs: no JobSet successPolicy ends the parameter server, distrun's client does.
@INDEXED_JOBS
def test_tensorflow_parameter_server_is_stopped_when_the_workers_are_done(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
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
    record = shown(distrun_home, "tf-k8s")
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


@BOTH_FORMS
def test_mpi_ranks_start_in_the_worker_pods_through_their_agents_without_ssh(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", MPI_RANK, MPI_JOB)
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "mpi-k8s", timeout=WAIT_S + 60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = shown(distrun_home, "mpi-k8s")
    assert record["status"] == "Completed"
    workers = "mpi-k8s-worker-0" if k8s.jobset_crd else "mpi-k8s-worker"
    logs = Path(record["folder"]) / "user_logs"
    for rank in range(4):
        # mpirun in the launcher pod started ranks 0-1 in worker pod 0 and 2-3 in worker pod 1.
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} of 4 sum 10 in pod {workers}-{rank // 2}\n" in text, text
    posted = [r for r in k8s.emulator.requests() if str(r.method).upper().endswith("POST")]
    secrets = [r for r in posted if str(r.url.path).endswith("/secrets")]
    assert secrets, "the remote-start token was not submitted as a Secret"
    # Cleaned up with the job: the Secret is gone once it is over.
    wait_for(lambda: not k8s.api.list("secrets"), 30, 0.1)


# Indexed Jobs: the launcher's Job fails, and only distrun deletes the workers' Job (a JobSet's
# gang stop is test_a_failing_rank_fails_the_gang_with_its_pod_node_and_traceback's).
@INDEXED_JOBS
def test_an_mpi_rank_failing_in_a_worker_pod_fails_the_job_with_its_traceback(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", MPI_RANK, MPI_JOB + "      FAIL_RANK: '3'\n")
    started = time.monotonic()
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "mpi-fail", timeout=WAIT_S + 60)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < WAIT_S  # the other ranks (sleeping 600 s) were stopped
    record = shown(distrun_home, "mpi-fail")
    assert record["status"] == "Failed"
    root = record["root_cause"]
    assert root["name"] == "rank_3", root
    assert "ValueError: bad batch on rank 3" in root["traceback"]
    deleted = {r.url.path.split("/")[-1] for r in k8s.emulator.requests() if str(r.method).upper().endswith("DELETE")}
    assert "mpi-fail-worker" in deleted, deleted
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

# Restarts are JobSet's (Indexed Jobs refuse limits.max_restarts): these tests run on the
# `cluster` fixture's default, the JobSet form.
RESTART_JOB = SLEEPER_JOB.replace("{grace_period: 2}", "{grace_period: 2, max_restarts: 2, no_restart_exit_codes: [3]}")


def test_a_rank_that_fails_on_attempt_0_is_restarted_by_jobset_and_completes(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB)
    done = run_cli("run", str(job), "--compute", "k8s", "--name", "restart-k8s", timeout=2 * WAIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rank in range(2):  # the second attempt's lines are streamed too
        assert f"rank {rank} attempt 1 torchelastic 1" in done.stdout, done.stdout
    record = shown(distrun_home, "restart-k8s")
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


REPORT_FINALIZER = "distrun.io/report"


def test_a_failed_attempts_pods_wait_for_distrun_to_read_their_reports(
    k8s: EmulatedCluster, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB)
    submit(distrun_home, job, "held-k8s")

    # Nothing reads the job meanwhile: JobSet restarts the failed attempt and deletes its pods,
    # which stay (ended, deleting) while distrun's finalizer holds them, so no attempt 1 starts.
    def held() -> list[dict[str, Any]]:
        pods = k8s.pods()
        ended = [p for p in pods if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
        deleting = [p for p in ended if p["metadata"].get("deletionTimestamp")]
        return deleting if len(deleting) == 2 and len(pods) == 2 else []

    wait_for(held, WAIT_S, 0.2)
    time.sleep(1.0)  # a few more rounds of the controllers: still held, attempt 1 not created
    pods = held()
    assert [REPORT_FINALIZER] == sorted({f for p in pods for f in p["metadata"]["finalizers"]})
    assert all(p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0" for p in pods)

    record = wait_for_record(distrun_home, "held-k8s", lambda r: r["status"] in ("Failed", "Completed", "Canceled"))
    assert record["status"] == "Completed", record["reason"]
    first, second = record["attempts"]
    assert first["status"] == "Failed" and first["root_cause"]["name"] == "rank_1"
    assert "lost a GPU on attempt 0" in first["root_cause"]["traceback"]
    assert second["status"] == "Completed"
    held_now = [p["metadata"]["name"] for p in k8s.pods() if REPORT_FINALIZER in p["metadata"].get("finalizers", [])]
    assert not held_now, held_now  # the ended job's pods are let go


def test_a_no_restart_exit_code_fails_the_jobset_at_once(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB + "    environment_variables: {FINAL_CODE: '3'}\n")
    submit(distrun_home, job, "final-k8s")
    # Nothing reads the job meanwhile, so this is the cluster's own doing: the pod failure policy
    # failed the Job (reason PodFailurePolicy) and the JobSet's rule failed the set, no restart.
    wait_for(lambda: ((k8s.api.get("jobsets", "final-k8s") or {}).get("status") or {}).get("conditions"), WAIT_S, 0.1)
    status = k8s.api.get("jobsets", "final-k8s")["status"]
    assert [c["reason"] for c in status["conditions"]] == ["FailurePolicyRuleAction"] and not status.get("restarts")
    record = wait_for_record(distrun_home, "final-k8s", lambda r: r["status"] in ("Failed", "Completed", "Canceled"))
    assert record["status"] == "Failed"
    assert "exit code 3 is in limits.no_restart_exit_codes" in record["reason"]
    assert record["root_cause"]["name"] == "rank_1" and record["root_cause"]["exit_code"] == 3
    (only,) = record["attempts"]
    assert only["attempt"] == 0 and only["restarted"] is False
    live = k8s.live_pods()
    assert not live, live


def test_a_job_that_fails_on_every_attempt_ends_failed_when_jobset_used_its_restarts(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", RESTARTING, RESTART_JOB + "    environment_variables: {ALWAYS: '1'}\n")
    done = run_cli(
        "run", str(job), "--compute", "k8s", "--name", "always-k8s", "--max-restarts", "1", timeout=2 * WAIT_S
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    record = shown(distrun_home, "always-k8s")
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


def test_an_evicted_pod_is_a_preemption_that_does_not_use_up_max_restarts(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job", PREEMPTED, RESTART_JOB.replace("max_restarts: 2", "max_restarts: 1"))
    submit(distrun_home, job, "evict-k8s")
    logs = Path(shown(distrun_home, "evict-k8s")["folder"]) / "user_logs"
    wait_for_record(
        distrun_home, "evict-k8s", lambda r: (logs / "std_log_process_01.txt").exists() and r["status"] == "Running"
    )
    # What the eviction API does: the DisruptionTarget condition, then the pod's deletion.
    (victim,) = [p for p in k8s.pods() if p["metadata"]["name"].startswith("evict-k8s-worker-0-1")]
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    k8s.api.patch("pods", victim["metadata"]["name"], {"status": {"conditions": [condition]}})
    k8s.api.delete("pods", victim["metadata"]["name"])
    record = wait_for_record(distrun_home, "evict-k8s", lambda r: r["status"] in ("Completed", "Failed", "Canceled"))
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
