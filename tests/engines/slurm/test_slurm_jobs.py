"""Real jobs on a real Slurm cluster of 2 nodes (n1, n2) on this machine, through the CLI.

The cluster comes from the `slurm_cluster` fixture (tests/engines/slurm/conftest.py); each test gets
its own DISTRUN_HOME with a compute target `hpc` pointing at it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.runner.jobs import list_jobs
from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from support.cli import REPO, cli_env
from support.clusters.slurm_cluster import SlurmCluster
from support.env_dump import show_env, shown_env, shown_envs, tf_task
from support.jobs import (
    TORCHRUN_PER_NODE_JOB,
    only_job,
    processes_of_job,
    python_ranks,
    record,
    tensorflow_job,
    wait_for,
)

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"


def node_outcome(home: Path, name: str, node: int) -> dict:
    return json.loads((home / "jobs" / name / "slurm" / f"node_{node:02d}.json").read_text())


def slurm_state(cluster: SlurmCluster, job_id: str) -> str:
    out = cluster.run(["scontrol", "show", "job", "--oneliner", job_id]).stdout
    return out.split("JobState=", 1)[1].split()[0]


# ---------------------------------------------------------------- jobs that complete


@pytest.mark.slow
def test_ddp_two_nodes_two_processes(run_cli, hpc, distrun_home):
    result = run_cli("run", str(EXAMPLE), "--compute", hpc, "--set", "inputs.epochs=2", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed" and rec["backend_id"]
    folder = distrun_home / "jobs" / name
    logs = sorted(p.name for p in (folder / "user_logs").iterdir())
    assert logs == [f"std_log_process_{i:02d}.txt" for i in range(4)]
    for rank in range(4):
        text = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank}/4 on node {rank // 2} (local rank {rank % 2})" in text
    assert (folder / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert "[0/0] epoch 2/2 loss" in result.stdout  # streamed while it ran
    # Slurm placed node rank 0 on n1 and 1 on n2: each node's agent says where it ran.
    assert [node_outcome(distrun_home, name, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]
    assert {p["rank"]: p["host"] for p in rec["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}


def test_each_rank_sees_slurms_node_rank_and_local_compute_environment(run_cli, write_job, hpc, distrun_home):
    keys = ["NODE_RANK", "SLURM_NODEID", "SLURMD_NODENAME", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR"]
    keys += ["MASTER_PORT", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "AZ_BATCH_HOST_LIST"]
    job = write_job(
        """
        command: python show_env.py
        code: src
        resources:
          instance_count: 2
        distribution:
          type: pytorch
          process_count_per_instance: 2
        """,
        {"show_env.py": f"import json, os\nprint('ENV', json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))\n"},
    )
    result = run_cli("run", str(job), "--compute", hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    envs = []
    for rank in range(4):
        log = (distrun_home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        envs.append(json.loads(log.split("ENV ", 1)[1]))
    job_id = record(distrun_home, name)["backend_id"]
    ports = {env["MASTER_PORT"] for env in envs}
    assert len(ports) == 1 and ports.pop().isdigit()
    for rank, env in enumerate(envs):
        node = rank // 2
        assert env["NODE_RANK"] == env["SLURM_NODEID"] == str(node)
        assert env["SLURMD_NODENAME"] == f"n{node + 1}"
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank % 2), "4")
        assert env["MASTER_ADDR"] == "127.0.0.1"  # NodeAddr of n1, the allocation's first node
        assert env["AZ_BATCH_HOST_LIST"] == "127.0.0.1,127.0.0.1"
        assert env["SLURM_JOB_ID"] == job_id
        # The node agent's own task variables would mis-wire a rank that reads them.
        assert env["SLURM_PROCID"] is None and env["SLURM_NTASKS"] is None


# What torchrun hands each rank it starts, and the variables that say where the rank runs.
TORCHRUN_KEYS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"]
TORCHRUN_KEYS += ["NODE_RANK", "SLURMD_NODENAME", "DISTRUN_PORTS"]


@pytest.mark.slow
def test_per_node_torchrun_form(run_cli, write_job, hpc, distrun_home):
    # One torchrun per node, wired by distrun's NODE_RANK, MASTER_ADDR and MASTER_PORT: the two
    # torchruns meet at node 0's address and give out the ranks. Their ranks print what they
    # were given; the collective itself is torch's (DDP over gloo above runs one on Slurm).
    job = write_job(TORCHRUN_PER_NODE_JOB, {"check.py": show_env(TORCHRUN_KEYS)})
    result = run_cli("run", str(job), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    logs = distrun_home / "jobs" / name / "user_logs"
    # The ranks of one node share their torchrun's log.
    envs = {
        int(str(env["RANK"])): (node, env) for node in (0, 1) for env in shown_envs(rank_log(distrun_home, name, node))
    }
    assert sorted(envs) == [0, 1, 2, 3], envs
    (master_port,) = {env["DISTRUN_PORTS"] for _, env in envs.values()}
    for rank, (node, env) in envs.items():
        assert env == {
            "RANK": str(rank),
            "WORLD_SIZE": "4",
            "LOCAL_RANK": str(rank % 2),
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": str(node),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": master_port,
            "NODE_RANK": str(node),
            "SLURMD_NODENAME": f"n{node + 1}",
            "DISTRUN_PORTS": master_port,
        }, rank
        assert node == rank // 2
    assert sorted(p.name for p in logs.iterdir()) == ["std_log_process_00.txt", "std_log_process_01.txt"]


# TensorFlow reads its wiring from TF_CONFIG alone; the others say where the task runs, and
# RANK, WORLD_SIZE and MASTER_* must stay unset (a script that branches on RANK would take a
# parameter server for a rank). The examples train with real TensorFlow in tests/frameworks.
TF_KEYS = ["TF_CONFIG", "SLURMD_NODENAME", "NODE_RANK", "AZUREML_CR_NODE_RANK", "AZUREML_PROCESS_NAME"]
TF_KEYS += ["DISTRUN_TASK_TYPE", "DISTRUN_TASK_INDEX", "TF_USE_LEGACY_KERAS", "RANK", "WORLD_SIZE", "MASTER_ADDR"]
TF_KEYS += ["MASTER_PORT", "DISTRUN_PORTS"]


def tf_job(write_job, trainer: str, **counts: int) -> Path:
    """A TensorFlow job of 2 nodes with `counts` tasks (worker_count=2, ...), each running tf_task.py
    (support.env_dump): tasks of role `trainer` reach every other task at its TF_CONFIG address,
    the others serve until stopped."""
    job = tensorflow_job(f"python tf_task.py {trainer}", **counts)
    return write_job(job, {"tf_task.py": tf_task(TF_KEYS)})


def tf_task_env(home: Path, name: str, log: str) -> dict:
    return shown_env((home / "jobs" / name / "user_logs" / log).read_text())


def expected_tf_env(cluster: dict, role: str, index: int, node: int, ports: str) -> dict:
    return {
        "TF_CONFIG": {"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"},
        "SLURMD_NODENAME": f"n{node + 1}",
        "NODE_RANK": str(node),
        "AZUREML_CR_NODE_RANK": str(node),
        "AZUREML_PROCESS_NAME": f"{role}_{index}",
        "DISTRUN_TASK_TYPE": role,
        "DISTRUN_TASK_INDEX": str(index),
        "TF_USE_LEGACY_KERAS": "1",
        "RANK": None,
        "WORLD_SIZE": None,
        "MASTER_ADDR": None,
        "MASTER_PORT": None,
        "DISTRUN_PORTS": ports,
    }


def task_addresses(env: dict) -> list[str]:
    """The task addresses the batch script found on node 0 (DISTRUN_PORTS: the master port, then
    one per task in TF_CONFIG's cluster order); both nodes are 127.0.0.1 (their NodeAddr)."""
    return [f"127.0.0.1:{port}" for port in str(env["DISTRUN_PORTS"]).split(",")[1:]]


def test_tensorflow_multiworker_on_two_nodes(run_cli, write_job, hpc, distrun_home):
    result = run_cli("run", str(tf_job(write_job, "worker", worker_count=2)), "--compute", hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    envs = {i: tf_task_env(distrun_home, name, f"std_log_node_{i:02d}_worker.txt") for i in (0, 1)}
    addresses = task_addresses(envs[0])
    assert len(set(addresses)) == 2
    cluster = {"worker": addresses}  # no empty "ps": [] (TensorFlow 2.13+ rejects it)
    for index, env in envs.items():
        # Worker i on node i, each with its own TF_CONFIG.
        assert {**env, "TF_CONFIG": json.loads(str(env["TF_CONFIG"]))} == expected_tf_env(
            cluster, "worker", index, index, envs[0]["DISTRUN_PORTS"]
        )
    plan = json.loads((distrun_home / "jobs" / name / "plan.json").read_text())
    assert plan["tf_cluster"] == cluster  # the plan node 0 kept is the one the tasks ran
    # Each worker reached the other at the other's address, from the other node.
    assert f"[worker 0] worker 0: {addresses[1]} is worker 1" in result.stdout
    assert f"[worker 1] worker 1: {addresses[0]} is worker 0" in result.stdout
    assert [node_outcome(distrun_home, name, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]


def test_tensorflow_parameter_servers_on_two_nodes_are_stopped_when_the_chief_is_done(
    run_cli, write_job, hpc, distrun_home
):
    # chief, 2 workers, 1 ps over 2 nodes: node 1 runs only servers (worker 0 and ps 0), which
    # its agent stops once the chief on node 0 has completed.
    job = tf_job(write_job, "chief", chief_count=1, worker_count=2, parameter_server_count=1)
    result = run_cli("run", str(job), "--compute", hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    logs = {"chief_0": "std_log_node_00_chief.txt", "worker_1": "std_log_node_00_worker.txt"}
    logs |= {"worker_0": "std_log_node_01_worker.txt", "ps_0": "std_log_node_01_ps.txt"}
    envs = {task: tf_task_env(distrun_home, name, log) for task, log in logs.items()}
    addresses = task_addresses(envs["chief_0"])
    assert len(set(addresses)) == 4
    cluster = {"chief": addresses[:1], "worker": addresses[1:3], "ps": addresses[3:]}
    # Task k of chief, workers, ps runs on node k % 2.
    for task, node in (("chief_0", 0), ("worker_0", 1), ("worker_1", 0), ("ps_0", 1)):
        role, index = task.split("_")
        env = envs[task]
        assert {**env, "TF_CONFIG": json.loads(str(env["TF_CONFIG"]))} == expected_tf_env(
            cluster, role, int(index), node, envs["chief_0"]["DISTRUN_PORTS"]
        ), task
    # The chief reached every server at its address, and ended.
    for address, task in zip(addresses[1:], ("worker 0", "worker 1", "ps 0"), strict=True):
        assert f"[chief 0] chief 0: {address} is {task}" in result.stdout
    procs = {p["name"]: p for p in rec["processes"]}
    assert procs["chief_0"]["exit_code"] == 0 and not procs["chief_0"]["stopped_by_distrun"]
    assert procs["worker_1"]["stopped_by_distrun"]
    node1 = node_outcome(distrun_home, name, 1)
    assert node1["status"] == "Completed" and {p["name"] for p in node1["processes"]} == {"worker_0", "ps_0"}
    assert all(p["stopped_by_distrun"] for p in node1["processes"])
    assert processes_of_job(name) == []


def test_job_stream_follows_a_detached_job_to_its_end(run_cli, write_job, hpc, distrun_home):
    job = write_job(python_ranks("[print('tick', i, flush=True) or time.sleep(0.1) for i in range(5)]"))
    submitted = run_cli("run", "-d", str(job), "--compute", hpc, "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    name = json.loads(submitted.stdout)["name"]
    streamed = run_cli("job", "stream", name)
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    for label in ("0/0", "0/1", "1/2", "1/3"):
        assert f"[{label}] tick 4" in streamed.stdout
    assert "Status: Completed" in streamed.stdout


# ---------------------------------------------------------------- failures, cancel, timeout


def test_a_rank_failing_on_node_1_stops_node_0_and_is_the_root_cause(run_cli, write_job, hpc, distrun_home):
    job = write_job(
        python_ranks(
            "time.sleep(1); int(os.environ['RANK']) == 3 and sys.exit(__import__('fail').go()); time.sleep(120)"
        ),
        {"fail.py": "def go():\n    raise ValueError('bad batch on rank 3')\n"},
    )
    result = run_cli("run", str(job), "--compute", hpc)
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    assert rec["reason"] == "rank 3 on node 1 exited with code 1"
    cause = rec["root_cause"]
    assert (cause["rank"], cause["node_rank"], cause["host"], cause["exit_code"]) == (3, 1, "n2", 1)
    assert "ValueError: bad batch on rank 3" in cause["traceback"]
    assert 'fail.py", line 2, in go' in cause["traceback"]
    # Node 0's ranks were stopped right after the failure on node 1, not after their 120 s.
    failed_at = node_outcome(distrun_home, name, 1)["failed_at"]
    node0 = node_outcome(distrun_home, name, 0)
    assert node0["ended_at"] - failed_at < 10
    assert all(p["signal"] == "SIGTERM" for p in node0["processes"])
    assert "Failed first: rank_3 on node 1 (n2)" in result.stdout
    assert processes_of_job(name) == []


def _running_job(home: Path, ranks: int = 4) -> str:
    def running() -> str | None:
        if not (home / "jobs.db").exists():
            return None
        jobs = list_jobs(Layout(home))
        return jobs[0].name if jobs and jobs[0].status == "Running" else None

    name = str(wait_for(running, timeout=60))
    wait_for(lambda: len(processes_of_job(name)) >= ranks, timeout=60)
    return name


def test_cancel_while_running_reaches_slurm_after_the_target_is_replaced(
    run_cli, write_job, hpc, distrun_home, slurm_cluster
):
    """A job remembers its engine: the target it was submitted to is replaced in config.yaml by a
    Kubernetes one of the same name while it runs, and `show`, `logs` and `cancel` still go to Slurm."""
    job = write_job(python_ranks("time.sleep(120)"))
    assert run_cli("run", "-d", str(job), "--compute", hpc, "-o", "json").returncode == 0
    name = _running_job(distrun_home)
    replaced = run_cli("compute", "create", "--name", hpc, "--type", "kubernetes", "--set", "namespace=jobs")
    assert replaced.returncode == 0, replaced.stderr
    assert "type: kubernetes" in (distrun_home / "config.yaml").read_text()
    assert record(distrun_home, name)["target"]["type"] == "slurm"
    shown = run_cli("job", "show", name, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "Running"
    logs = run_cli("job", "logs", name)
    assert logs.returncode == 0 and "up 3" in logs.stdout, logs.stdout + logs.stderr
    result = run_cli("job", "cancel", name)
    assert result.returncode == 0, result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled", rec
    wait_for(lambda: slurm_state(slurm_cluster, rec["backend_id"]) == "CANCELLED", timeout=30)
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_ctrl_c_on_run_cancels_the_slurm_job(start_cli, write_job, hpc, distrun_home, slurm_cluster):
    job = write_job(python_ranks("time.sleep(120)"))
    proc = start_cli("run", str(job), "--compute", hpc)
    name = _running_job(distrun_home)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "SIGINT received, canceling the Slurm job (scancel)" in proc.stdout.read()
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled"
    wait_for(lambda: slurm_state(slurm_cluster, rec["backend_id"]) == "CANCELLED", timeout=30)
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_a_queued_job_says_so_and_cancels_at_once(run_cli, write_job, slurm_cluster, distrun_home):
    # Each job asks for every CPU of both nodes, so the second waits for the first.
    created = run_cli(
        "compute",
        "create",
        "--name",
        "whole",
        "--type",
        "slurm",
        "--set",
        f"cpus_per_node={slurm_cluster.cpus_per_node}",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert created.returncode == 0, created.stderr
    job = write_job(python_ranks("time.sleep(120)"))
    first = json.loads(run_cli("run", "-d", str(job), "--compute", "whole", "-o", "json").stdout)["name"]
    wait_for(lambda: record(distrun_home, first)["status"] == "Running", timeout=60)
    second = json.loads(run_cli("run", "-d", str(job), "--compute", "whole", "-o", "json").stdout)["name"]
    assert record(distrun_home, second)["status"] == "Queued"
    wait_for(lambda: record(distrun_home, second)["reason"] == "Resources", timeout=30)  # Slurm's own words
    assert run_cli("job", "cancel", second).returncode == 0
    assert record(distrun_home, second)["status"] == "Canceled"
    assert run_cli("job", "cancel", first).returncode == 0
    assert record(distrun_home, first)["status"] == "Canceled"
    wait_for(lambda: processes_of_job(first) == [], timeout=30)


def test_limits_timeout_fails_the_job(run_cli, write_job, hpc, distrun_home):
    job = write_job(python_ranks("time.sleep(120)"))
    result = run_cli("run", str(job), "--compute", hpc, "--set", "limits.timeout=1")
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 1 s"
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- MPI: mpirun on node 0, ranks on both nodes

# Both Slurm nodes are this one host. Open MPI names its shared-memory segments after the
# host, so the ranks under the two nodes' daemons would share (and corrupt) them: the test
# target keeps MPI on TCP, and all of Open MPI's traffic on loopback.
ONE_HOST_OPEN_MPI = "export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"

# What Open MPI gives each rank, and what scripts written for Azure ML read to find the master.
MPI_KEYS = ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURMD_NODENAME"]
MPI_KEYS += ["AZ_BATCH_MASTER_NODE", "MASTER_PORT", "AZUREML_MPI_HOSTFILE"]

ALLREDUCE = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
print("rank", comm.rank, "of", comm.size, "sum", comm.allreduce(comm.rank + 1), flush=True)
"""

MPI_JOB = """
    command: {command}
    code: src
    resources:
      instance_count: 2
    distribution:
      type: mpi
      process_count_per_instance: 2
    limits:
      grace_period: 3
"""


def mpi_job(write_job, command: str, files: dict[str, str]) -> Path:
    return write_job(MPI_JOB.replace("{command}", command), files)


@pytest.fixture
def mpi_hpc(add_slurm_target) -> str:
    return add_slurm_target("hpc", "partition=debug", f"setup={ONE_HOST_OPEN_MPI}")


def rank_log(home: Path, name: str, rank: int) -> str:
    return (home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()


@pytest.mark.parametrize(
    ("command", "allreduce"),
    [
        ("python -m mpi4py where.py", True),  # distrun builds the mpirun command
        # The command's own mpirun, on the same hostfile. Its ranks only say where they run and
        # what they were given: the MPI traffic between the nodes is the same as above.
        ("mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python show_env.py", False),
    ],
    ids=["distrun-mpirun", "own-mpirun"],
)
def test_mpi4py_allreduce_over_two_nodes_of_two_ranks(command, allreduce, run_cli, write_job, mpi_hpc, distrun_home):
    files = {"where.py": show_env(MPI_KEYS) + ALLREDUCE, "show_env.py": show_env(MPI_KEYS)}
    result = run_cli("run", str(mpi_job(write_job, command, files)), "--compute", mpi_hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    assert (folder / "mpi" / "hostfile").read_text() == "n1 slots=2\nn2 slots=2\n"  # Slurm's node names
    port = shown_env(rank_log(distrun_home, name, 0))["MASTER_PORT"]
    assert str(port).isdigit()
    for rank in range(4):
        log = rank_log(distrun_home, name, rank)
        # mpirun on n1 started ranks 2 and 3 on the second node, through Slurm.
        assert shown_env(log) == {
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % 2),
            "SLURMD_NODENAME": f"n{rank // 2 + 1}",
            "AZ_BATCH_MASTER_NODE": f"127.0.0.1:{port}",
            "MASTER_PORT": port,
            "AZUREML_MPI_HOSTFILE": str(folder / "mpi" / "hostfile"),
        }, rank
        assert (f"rank {rank} of 4 sum 10\n" in log) is allreduce
    # Node 1 ran no process of its own and stayed until the job was over.
    node1 = node_outcome(distrun_home, name, 1)
    assert (node1["status"], node1["processes"]) == ("Completed", [])
    assert node1["ended_at"] >= node_outcome(distrun_home, name, 0)["ended_at"]
    assert processes_of_job(name) == []


FAILING_RANKS = {
    # `python -m mpi4py`: the exception becomes MPI_Abort, which stops every rank.
    "mpi-abort": (
        "python -m mpi4py train.py",
        """
        import time
        from mpi4py import MPI
        from fail import go
        comm = MPI.COMM_WORLD
        print("up", comm.rank, flush=True)
        comm.Barrier()
        if comm.rank == 3:
            time.sleep(1)
            print("failing at", time.time(), flush=True)
            go()
        comm.Barrier()
        """,
    ),
    # A rank that exits non-zero: mpirun stops the others. (An mpi4py script run with plain
    # `python` would instead wait in MPI_Finalize for the others; see docs/mpi.md.)
    "exit-code": (
        "python train.py",
        """
        import os, time
        from fail import go
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        print("up", rank, flush=True)
        if rank == 3:
            time.sleep(1)
            print("failing at", time.time(), flush=True)
            go()
        time.sleep(120)
        """,
    ),
}


@pytest.mark.parametrize("kind", sorted(FAILING_RANKS))
def test_an_mpi_rank_failing_on_node_1_is_the_root_cause_and_stops_every_rank(
    kind, run_cli, write_job, mpi_hpc, distrun_home
):
    command, script = FAILING_RANKS[kind]
    files = {"train.py": script, "fail.py": "def go():\n    raise ValueError('bad batch on rank 3')\n"}
    result = run_cli("run", str(mpi_job(write_job, command, files)), "--compute", mpi_hpc)
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    assert rec["reason"].startswith("rank 3 on node 1 ")
    cause = rec["root_cause"]
    assert (cause["rank"], cause["node_rank"], cause["host"]) == (3, 1, "n2")
    assert "ValueError: bad batch on rank 3" in cause["traceback"]
    assert 'fail.py", line 2, in go' in cause["traceback"]
    assert cause["log"].endswith("std_log_process_03.txt")
    assert "Failed first: rank_3 on node 1 (n2)" in result.stdout
    # Every rank, on both nodes, was stopped soon after rank 3 failed, not after its 120 s.
    failed_at = float(rank_log(distrun_home, name, 3).split("failing at ", 1)[1].split()[0])
    assert node_outcome(distrun_home, name, 0)["ended_at"] - failed_at < 30
    # Node 1's agent, which ran no process of its own, is not blamed.
    assert node_outcome(distrun_home, name, 1)["status"] == "Canceled"
    assert processes_of_job(name) == []


SLEEPING_RANKS = """
    import time
    from mpi4py import MPI
    print("up", MPI.COMM_WORLD.rank, flush=True)
    time.sleep(120)
"""


def _ranks_up(home: Path, name: str) -> bool:
    try:
        return all("up" in rank_log(home, name, rank) for rank in range(4))
    except OSError:
        return False


def test_an_mpi_job_canceled_while_running(run_cli, write_job, mpi_hpc, distrun_home, slurm_cluster):
    job = mpi_job(write_job, "python -m mpi4py train.py", {"train.py": SLEEPING_RANKS})
    submitted = run_cli("run", "-d", str(job), "--compute", mpi_hpc, "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    name = json.loads(submitted.stdout)["name"]
    wait_for(lambda: _ranks_up(distrun_home, name), timeout=90)
    assert run_cli("job", "cancel", name).returncode == 0
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled", rec
    wait_for(lambda: slurm_state(slurm_cluster, rec["backend_id"]) == "CANCELLED", timeout=30)
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_an_mpi_job_past_its_timeout_fails_and_leaves_nothing(run_cli, write_job, mpi_hpc, distrun_home):
    job = mpi_job(write_job, "python -m mpi4py train.py", {"train.py": SLEEPING_RANKS})
    result = run_cli("run", str(job), "--compute", mpi_hpc, "--set", "limits.timeout=5")
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert (rec["status"], rec["reason"]) == ("Failed", "timeout after 5 s")
    assert all("up" in rank_log(distrun_home, name, rank) for rank in range(4))
    assert node_outcome(distrun_home, name, 1)["status"] == "Canceled"
    assert processes_of_job(name) == []


def test_plan_of_an_mpi_job_shows_how_it_runs_in_the_allocation(run_cli, hpc, distrun_home):
    result = run_cli("plan", str(REPO / "examples" / "mpi-hostfile" / "job.yml"), "--compute", hpc)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "<slurm node 0> slots=2\n    <slurm node 1> slots=2" in out  # node names, known when the job starts
    assert "SLURM_OVERLAP=1" in out and "SLURM_TASKS_PER_NODE=2(x2)" in out
    assert "node 1 (<slurm node 1>): 0 processes" in out
    assert not (distrun_home / "jobs").exists()


# ---------------------------------------------------------------- nothing submitted


def test_partition_that_does_not_exist(run_cli, write_job, slurm_cluster, distrun_home):
    created = run_cli(
        "compute",
        "create",
        "--name",
        "nowhere",
        "--type",
        "slurm",
        "--set",
        "partition=gpu-a100",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert created.returncode == 0, created.stderr
    # Every job slurmctld knows of, the ones that ended in the last MinJobAge (300 s) included: a
    # job submitted here and ended at once would still be listed. Earlier tests' jobs may end or
    # age out meanwhile, so the check is that no new one appears.
    known = ["squeue", "--noheader", "--states=all", "--format=%i"]
    before = set(slurm_cluster.run(known).stdout.split())
    result = run_cli("run", str(write_job(python_ranks("pass"))), "--compute", "nowhere")
    assert result.returncode == 2
    assert "Slurm partition 'gpu-a100' does not exist (partitions of this cluster: debug)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []
    assert set(slurm_cluster.run(known).stdout.split()) <= before


def test_compute_create_refuses_a_misspelled_setting(run_cli, distrun_home):
    result = run_cli("compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partiton=debug")
    assert result.returncode == 2
    assert "unknown setting 'partiton' (did you mean 'partition'?)" in result.stderr
    assert not (distrun_home / "config.yaml").exists()


def test_more_nodes_than_the_partition_has(run_cli, write_job, hpc, distrun_home):
    job = write_job(python_ranks("pass"))
    result = run_cli("run", str(job), "--compute", hpc, "--set", "resources.instance_count=3")
    assert result.returncode == 2
    assert "the job asks for 3 nodes (resources.instance_count) but Slurm partition 'debug' has 2" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_slurm_not_installed(write_job, hpc, distrun_home, tmp_path):
    env = cli_env(distrun_home, {"PATH": str(tmp_path / "empty")})
    result = subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(write_job(python_ranks("pass"))), "--compute", hpc],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Slurm is not installed here: no sbatch on PATH" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_a_submission_checks_the_cluster_once(write_job, hpc, distrun_home, tmp_path):
    """The preflight runs once, before the record, as one `scontrol show partition`: each call is a
    round trip to slurmctld on the way to `sbatch`, and the partition's answer shows the controller
    is up (`scontrol ping` is asked only when it does not answer). The real tools run behind a
    wrapper that writes down how they were called."""
    import shutil

    calls = tmp_path / "calls.txt"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for tool in ("scontrol", "sbatch"):
        real = shutil.which(tool)
        assert real is not None, f"{tool} is installed with the test cluster"
        (wrappers / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nexec "{real}" "$@"\n')
        (wrappers / tool).chmod(0o755)
    env = cli_env(distrun_home, {"PATH": f"{wrappers}:{os.environ['PATH']}"})
    job = str(write_job(python_ranks("pass")))
    result = subprocess.run(
        [sys.executable, "-m", "distrun", "run", "-d", job, "--compute", hpc, "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # The batch job inherits PATH, but its own scontrol calls are other subcommands than these.
    made = calls.read_text().splitlines()
    assert sum(line.startswith("sbatch ") for line in made) == 1, made
    assert sum(line == "scontrol ping" for line in made) == 0, made
    assert sum(line.startswith("scontrol show partition") for line in made) == 1, made
    name = json.loads(result.stdout)["name"]
    assert wait_for(lambda: record(distrun_home, name)["status"] in ("Completed", "Failed", "Canceled"))
    assert record(distrun_home, name)["status"] == "Completed"


def down_conf(slurm_cluster: SlurmCluster, tmp_path: Path) -> Path:
    """The same cluster's config, but a controller port nobody serves.

    Slurm's clients keep trying a refused connection for about MessageTimeout - 1 s before they
    give up (9 s by default); at 2 s they still retry, and give up after 1 s.
    """
    conf = tmp_path / "slurm.conf"
    lines = slurm_cluster.conf_path.read_text().splitlines()
    lines = ["SlurmctldPort=1" if x.startswith("SlurmctldPort=") else x for x in lines]
    conf.write_text("\n".join([*lines, "MessageTimeout=2"]) + "\n")
    return conf


def test_controller_down(run_cli, write_job, slurm_cluster, distrun_home, tmp_path):
    conf = down_conf(slurm_cluster, tmp_path)
    created = run_cli("compute", "create", "--name", "down", "--type", "slurm", "--set", f"slurm_conf={conf}")
    assert created.returncode == 0, created.stderr
    result = run_cli("run", str(write_job(python_ranks("pass"))), "--compute", "down")
    assert result.returncode == 2
    assert "the Slurm controller is down or unreachable" in result.stderr
    assert "nothing was submitted" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_the_sdk_checks_the_cluster_before_recording_too(slurm_cluster, distrun_home, tmp_path, monkeypatch):
    from distrun import MLClient, command
    from distrun.core.errors import DistrunError
    from distrun.prepare.compute import add_target

    add_target(distrun_home / "config.yaml", "down", "slurm", {"slurm_conf": str(down_conf(slurm_cluster, tmp_path))})
    monkeypatch.chdir(tmp_path)
    job = command(command="echo hi", compute="down", instance_count=2)
    with pytest.raises(DistrunError, match="the Slurm controller is down or unreachable"):
        MLClient().jobs.create_or_update(job)
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_plan_shows_the_exact_sbatch_script(run_cli, hpc, distrun_home):
    result = run_cli("plan", str(EXAMPLE), "--compute", hpc)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "#SBATCH --nodes=2" in out and "#SBATCH --ntasks-per-node=1" in out
    assert "#SBATCH --partition=debug" in out and "#SBATCH --time=11" in out
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in out
    assert f"{sys.executable} -m distrun.backends.slurm.node_agent --job-dir" in out
    assert "[1/3] rank_3" in out  # and the plan every node builds, placeholders for what Slurm decides
    assert not (distrun_home / "jobs").exists()  # a dry run records nothing


def test_submitted_script_is_what_plan_showed(run_cli, write_job, hpc, distrun_home):
    job = write_job(python_ranks("pass"))
    planned = run_cli("plan", str(job), "--compute", hpc, "--set", "name=planned_job", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    result = run_cli("run", str(job), "--compute", hpc, "--set", "name=planned_job")
    assert result.returncode == 0, result.stdout + result.stderr
    submitted = (distrun_home / "jobs" / "planned_job" / "slurm" / "batch.sh").read_text()
    assert submitted == json.loads(planned.stdout)["script"]
