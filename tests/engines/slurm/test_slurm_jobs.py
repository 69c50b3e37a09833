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

from distrun.jobs import list_jobs
from distrun.plan.model import tf_config
from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from support.cli import REPO, cli_env
from support.clusters.slurm_cluster import SlurmCluster
from support.jobs import (
    TORCHRUN_PER_NODE_JOB,
    only_job,
    processes_of_job,
    python_ranks,
    record,
    torchrun_check,
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


@pytest.mark.slow
def test_per_node_torchrun_form(run_cli, write_job, hpc):
    job = write_job(TORCHRUN_PER_NODE_JOB, torchrun_check('" on " + os.environ["SLURMD_NODENAME"]'))
    result = run_cli("run", str(job), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(4):
        assert f"rank {rank} of 4 sum 6 on n{rank // 2 + 1}" in result.stdout


@pytest.mark.slow
def test_tensorflow_multiworker_on_two_nodes(run_cli, hpc, distrun_home):
    example = REPO / "examples" / "tensorflow-multiworker" / "job.yml"
    result = run_cli("run", str(example), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    digests = {line.split()[-1] for line in result.stdout.splitlines() if "final weights digest" in line}
    assert len(digests) == 1  # both workers trained the same model, in sync
    plan = json.loads((distrun_home / "jobs" / name / "plan.json").read_text())
    configs = [
        json.loads(tf_config(plan["tf_cluster"], *proc["tf_task"]))
        for node in plan["nodes"]
        for proc in node["processes"]
    ]
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 2 and all(w.startswith("127.0.0.1:") for w in workers)
    assert [node_outcome(distrun_home, name, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]


@pytest.mark.slow
def test_tensorflow_parameter_servers_on_two_nodes_are_stopped_when_the_chief_is_done(run_cli, hpc, distrun_home):
    # chief, 2 workers, 1 ps over 2 nodes: node 1 runs only servers (worker 0 and ps 0), which
    # its agent stops once the chief on node 0 has completed.
    example = REPO / "examples" / "tensorflow-ps" / "job.yml"
    result = run_cli("run", str(example), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    node1 = node_outcome(distrun_home, name, 1)
    assert node1["status"] == "Completed" and node1["processes"]
    assert all(p["stopped_by_distrun"] for p in node1["processes"])
    assert processes_of_job(name) == []


def test_job_stream_follows_a_detached_job_to_its_end(run_cli, write_job, hpc, distrun_home):
    job = write_job(python_ranks("[print('tick', i, flush=True) or time.sleep(0.3) for i in range(5)]"))
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


def test_cancel_while_running(run_cli, write_job, hpc, distrun_home, slurm_cluster):
    job = write_job(python_ranks("time.sleep(120)"))
    assert run_cli("run", "-d", str(job), "--compute", hpc, "-o", "json").returncode == 0
    name = _running_job(distrun_home)
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
    result = run_cli("run", str(job), "--compute", hpc, "--set", "limits.timeout=3")
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 3 s"
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- MPI: mpirun on node 0, ranks on both nodes

# Both Slurm nodes are this one host. Open MPI names its shared-memory segments after the
# host, so the ranks under the two nodes' daemons would share (and corrupt) them: the test
# target keeps MPI on TCP, and all of Open MPI's traffic on loopback.
ONE_HOST_OPEN_MPI = "export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"

WHERE = """
    import json, os
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.rank + 1)
    keys = ["SLURMD_NODENAME", "AZ_BATCH_MASTER_NODE", "MASTER_PORT", "AZUREML_MPI_HOSTFILE"]
    keys += ["OMPI_COMM_WORLD_LOCAL_RANK"]
    facts = {"rank": comm.rank, "size": comm.size, "sum": total, **{k: os.environ.get(k) for k in keys}}
    print("FACTS", json.dumps(facts), flush=True)
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
def mpi_hpc(run_cli, slurm_cluster: SlurmCluster) -> str:
    settings = ["partition=debug", f"slurm_conf={slurm_cluster.conf_path}", f"setup={ONE_HOST_OPEN_MPI}"]
    result = run_cli(
        "compute", "create", "--name", "hpc", "--type", "slurm", *[a for s in settings for a in ("--set", s)]
    )
    assert result.returncode == 0, result.stderr
    return "hpc"


def rank_log(home: Path, name: str, rank: int) -> str:
    return (home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()


@pytest.mark.parametrize(
    "command",
    [
        "python -m mpi4py where.py",  # distrun builds the mpirun command
        "mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python -m mpi4py where.py",  # the command's own mpirun
    ],
    ids=["distrun-mpirun", "own-mpirun"],
)
def test_mpi4py_allreduce_over_two_nodes_of_two_ranks(command, run_cli, write_job, mpi_hpc, distrun_home):
    result = run_cli("run", str(mpi_job(write_job, command, {"where.py": WHERE})), "--compute", mpi_hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    assert (folder / "mpi" / "hostfile").read_text() == "n1 slots=2\nn2 slots=2\n"  # Slurm's node names
    for rank in range(4):
        facts = json.loads(rank_log(distrun_home, name, rank).split("FACTS ", 1)[1])
        assert (facts["rank"], facts["size"], facts["sum"]) == (rank, 4, 10)
        # mpirun on n1 started ranks 2 and 3 on the second node, through Slurm.
        assert facts["SLURMD_NODENAME"] == f"n{rank // 2 + 1}"
        assert facts["OMPI_COMM_WORLD_LOCAL_RANK"] == str(rank % 2)
        assert facts["AZ_BATCH_MASTER_NODE"] == f"127.0.0.1:{facts['MASTER_PORT']}"
        assert facts["AZUREML_MPI_HOSTFILE"] == str(folder / "mpi" / "hostfile")
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
    before = slurm_cluster.run(["squeue", "--noheader", "--format=%i"]).stdout
    result = run_cli("run", str(write_job(python_ranks("pass"))), "--compute", "nowhere")
    assert result.returncode == 2
    assert "Slurm partition 'gpu-a100' does not exist (partitions of this cluster: debug)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []
    assert slurm_cluster.run(["squeue", "--noheader", "--format=%i"]).stdout == before


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
    """The same cluster's config, but a controller port nobody serves."""
    conf = tmp_path / "slurm.conf"
    lines = slurm_cluster.conf_path.read_text().splitlines()
    conf.write_text("\n".join("SlurmctldPort=1" if x.startswith("SlurmctldPort=") else x for x in lines) + "\n")
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
    from distrun.backends.targets import add_target
    from distrun.errors import DistrunError

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
