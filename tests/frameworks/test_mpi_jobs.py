"""Real `type: mpi` jobs on the local backend: Open MPI, mpi4py, torch/gloo and Horovod ranks
under mpirun, the command's own mpirun/horovodrun with AZUREML_MPI_HOSTFILE, failures,
cancel, timeout, a killed distrun, and a machine without mpirun."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distrun.loading.loader import load_job_file
from distrun.store.index import JobIndex
from support.cli import REPO, cli_env
from support.jobs import mpi_job, only_job, processes_of_job, record, wait_for
from support.seed_jobs import SEED_001

EXAMPLES = REPO / "examples"
SEED_002_HELPER = """
import os
def set_environment_variables_for_nccl_backend(single_node=False, master_port=6105):
    os.environ['RANK'] = os.environ['OMPI_COMM_WORLD_RANK']
    os.environ['WORLD_SIZE'] = os.environ['OMPI_COMM_WORLD_SIZE']

    if not single_node:
        master_node_params = os.environ['AZ_BATCH_MASTER_NODE'].split(':')
        os.environ['MASTER_ADDR'] = master_node_params[0]

        # Do not overwrite master port with that defined in AZ_BATCH_MASTER_NODE
        if 'MASTER_PORT' not in os.environ:
            os.environ['MASTER_PORT'] = str(master_port)
    else:
        os.environ['MASTER_ADDR'] = os.environ['AZ_BATCHAI_MPI_MASTER_NODE']
        os.environ['MASTER_PORT'] = '54965'
    print('NCCL_SOCKET_IFNAME original value = {}'.format(os.environ['NCCL_SOCKET_IFNAME']))
    # TODO make this parameterizable
    os.environ['NCCL_SOCKET_IFNAME'] = '^docker0,lo'

    print('RANK = {}'.format(os.environ['RANK']))
    print('WORLD_SIZE = {}'.format(os.environ['WORLD_SIZE']))
    print('MASTER_ADDR = {}'.format(os.environ['MASTER_ADDR']))
    print('MASTER_PORT = {}'.format(os.environ['MASTER_PORT']))
    print('NCCL_SOCKET_IFNAME new value = {}'.format(os.environ['NCCL_SOCKET_IFNAME']))

def get_local_rank():
    return int(os.environ['OMPI_COMM_WORLD_LOCAL_RANK'])
"""
ALLREDUCE = """
import os
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(
    f"rank {comm.Get_rank()} of {comm.Get_size()} sum {total}"
    f" local {os.environ['OMPI_COMM_WORLD_LOCAL_RANK']} magic {os.environ.get('MAGIC')}"
    f" extra {os.environ.get('EXTRA_FLAG')} master {os.environ['AZ_BATCH_MASTER_NODE']}"
    f" mpi-master {os.environ['AZ_BATCHAI_MPI_MASTER_NODE']}"
)
"""
HOROVOD_ALLREDUCE = """
import horovod.torch as hvd
import torch

hvd.init()
total = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum)
print(f"horovod rank {hvd.rank()} of {hvd.size()} sum {total.item():g}")
hvd.shutdown()
"""
SLEEPERS = mpi_job(
    "python -c \"import time; print('up', flush=True); time.sleep(120)\"", extra="limits: {grace_period: 3}"
)


def user_logs(home: Path, name: str) -> Path:
    return home / "jobs" / name / "user_logs"


def log_names(home: Path, name: str) -> list[str]:
    return sorted(p.name for p in user_logs(home, name).iterdir())


def rank_log(home: Path, name: str, rank: int) -> str:
    return (user_logs(home, name) / f"std_log_process_{rank:02d}.txt").read_text()


def ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- distrun builds mpirun


def test_mpi4py_allreduce_over_4_ranks(run_cli, write_job, distrun_home):
    extra = 'environment_variables: {MAGIC: "42"}'
    job = write_job(mpi_job("python -m mpi4py allreduce.py", extra=extra), {"allreduce.py": ALLREDUCE})
    result = run_cli("run", str(job))
    ok(result)
    name = only_job(distrun_home)
    assert log_names(distrun_home, name) == ["mpi_log.txt"] + [f"std_log_process_{r:02d}.txt" for r in range(4)]
    port = None
    for rank in range(4):
        text = rank_log(distrun_home, name, rank)
        assert f"rank {rank} of 4 sum 10 local {rank} magic 42" in text  # one simulated machine
        found = re.search(r"master 127\.0\.0\.1:(\d+) mpi-master 127\.0\.0\.1", text)
        assert found and found.group(1) == (port or found.group(1))
        port = found.group(1)
        assert f"[{rank // 2}/{rank}] rank {rank} of 4 sum 10" in result.stdout
    folder = distrun_home / "jobs" / name
    assert (folder / "mpi" / "hostfile").read_text() == "localhost slots=4\n"
    launcher = json.loads((folder / "plan.json").read_text())["nodes"][0]["processes"][0]
    assert launcher["argv"][:3] == ["mpirun", "-np", "4"]
    assert record(distrun_home, name)["status"] == "Completed"
    assert processes_of_job(name) == []


def test_mpirun_args_reach_mpirun(run_cli, write_job, distrun_home):
    text = """
        command: python -m mpi4py allreduce.py
        code: src
        resources:
          instance_count: 2
        distribution:
          type: mpi
          mpirun_args: [-x, EXTRA_FLAG=from-mpirun-args]
    """
    result = run_cli("run", str(write_job(text, {"allreduce.py": ALLREDUCE})))
    ok(result)
    name = only_job(distrun_home)
    for rank in range(2):
        assert "extra from-mpirun-args" in rank_log(distrun_home, name, rank)


@pytest.mark.slow
def test_torch_gloo_group_from_ompi_variables_with_the_seed_002_helper(run_cli, write_job, distrun_home):
    script = """
        import torch
        import torch.distributed as dist
        from aml_env import get_local_rank, set_environment_variables_for_nccl_backend

        set_environment_variables_for_nccl_backend(single_node=False)
        dist.init_process_group("gloo")
        value = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(value)
        print(f"torch rank {dist.get_rank()}/{dist.get_world_size()} local {get_local_rank()} sum {value.item():g}")
        dist.destroy_process_group()
    """
    # Azure ML images set NCCL_SOCKET_IFNAME; the helper prints it, so the job sets it too.
    extra = "environment_variables: {NCCL_SOCKET_IFNAME: lo}"
    job = write_job(mpi_job("python train.py", extra=extra), {"train.py": script, "aml_env.py": SEED_002_HELPER})
    result = run_cli("run", str(job))
    ok(result)
    name = only_job(distrun_home)
    for rank in range(4):
        text = rank_log(distrun_home, name, rank)
        assert f"torch rank {rank}/4 local {rank} sum 10" in text
        assert f"RANK = {rank}" in text and "MASTER_ADDR = 127.0.0.1" in text
        # The job's port (AZ_BATCH_MASTER_NODE's), not the helper's fixed 6105 fallback.
        assert "MASTER_PORT = 6105" not in text
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- the command runs its own launcher


def test_user_mpirun_with_the_generated_hostfile(run_cli, write_job, distrun_home):
    command = "mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE -x MAGIC python -m mpi4py allreduce.py"
    extra = "environment_variables: {MAGIC: seven}"
    result = run_cli("run", str(write_job(mpi_job(command, extra=extra), {"allreduce.py": ALLREDUCE})))
    ok(result)
    name = only_job(distrun_home)
    folder = distrun_home / "jobs" / name
    launcher = json.loads((folder / "plan.json").read_text())["nodes"][0]["processes"][0]
    assert launcher["argv"] == ["bash", "-c", command]  # run once, not wrapped in a second mpirun
    for rank in range(4):
        assert f"rank {rank} of 4 sum 10 local {rank} magic seven" in rank_log(distrun_home, name, rank)
        assert f"[{rank // 2}/{rank}] rank {rank} of 4" in result.stdout
    assert processes_of_job(name) == []


# Seed 001's four examples as written, with code: ./src holding a train.py. Scaled down to two
# ranks for a 2-core machine with: --set distributed.mpi.worker.count=2
# --set distributed.mpi.worker.slots_per=1 --set command=<the command with -np 2 for -np 16>;
# the k8s one also with --compute local.
SEED_001_RUNS = {
    "horovodrun": (HOROVOD_ALLREDUCE, "horovod rank {rank} of 2 sum 3"),
    "mpirun": (ALLREDUCE, "rank {rank} of 2 sum 3"),
    "launcher-is-worker": (ALLREDUCE, "rank {rank} of 2 sum 3"),
    "k8s": (ALLREDUCE, "rank {rank} of 2 sum 3"),
}


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(SEED_001_RUNS))
def test_seed_001_examples_validate_and_run(example, run_cli, write_job, distrun_home):
    script, expected = SEED_001_RUNS[example]
    job = write_job(SEED_001[example], {"train.py": script})
    ok(run_cli("job", "validate", "--file", str(job), "--compute", "local"))  # as it runs: k8s names an AKS cluster
    command = load_job_file(job).spec.command.replace("-np 16", "-np 2")
    scale = ["--set", "distributed.mpi.worker.count=2", "--set", "distributed.mpi.worker.slots_per=1"]
    # The seed jobs name docker.io/pytorch, which cannot be pulled here: MPI is what they test.
    args = ["run", str(job), *scale, "--set", f"command={command}", "--compute", "local", "--no-container"]
    result = run_cli(*args)
    ok(result)
    name = only_job(distrun_home)
    assert (distrun_home / "jobs" / name / "mpi" / "hostfile").read_text() == "localhost slots=2\n"
    for rank in range(2):
        assert expected.format(rank=rank) in rank_log(distrun_home, name, rank)
    # The command's own mpirun (or horovodrun, with the generated hostfile): its output, and each rank's.
    assert log_names(distrun_home, name) == ["mpi_log.txt", "std_log_process_00.txt", "std_log_process_01.txt"]
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- the examples, as they are


def test_example_mpi_hostfile(run_cli, distrun_home):
    result = run_cli("run", str(EXAMPLES / "mpi-hostfile" / "job.yml"))
    ok(result)
    name = only_job(distrun_home)
    assert re.search(r"\[0/0\] pi = 3\.14159265\d+ \(error \S+\) from 4 ranks", result.stdout)
    for rank in range(4):
        assert f"rank {rank}/4 on " in rank_log(distrun_home, name, rank)
    assert processes_of_job(name) == []


@pytest.mark.slow
def test_example_mpi_horovod_ranks_end_with_the_same_weights(run_cli, distrun_home):
    result = run_cli("run", str(EXAMPLES / "mpi-horovod" / "job.yml"))
    ok(result)
    name = only_job(distrun_home)
    digests = set()
    for rank in range(4):
        found = re.search(rf"rank {rank} weights ([0-9a-f]{{16}})", rank_log(distrun_home, name, rank))
        assert found, rank_log(distrun_home, name, rank)
        digests.add(found.group(1))
    assert len(digests) == 1  # different starting weights, identical after training
    assert "epoch 3/3 loss" in rank_log(distrun_home, name, 0)
    assert (distrun_home / "jobs" / name / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- failures


FAILING = {
    # A plain script: mpirun reports the first process that exited non-zero.
    "exit": (
        "python fail.py",
        """
        import os, time
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        time.sleep(0.5)
        if rank == 2:
            raise ValueError("bad batch on rank 2")
        time.sleep(120)
        """,
    ),
    # mpi4py run as `python -m mpi4py`: the exception becomes MPI_Abort, which stops every rank.
    "mpi_abort": (
        "python -m mpi4py fail.py",
        """
        import time
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        time.sleep(0.5)
        if comm.Get_rank() == 2:
            raise ValueError("bad batch on rank 2")
        comm.Barrier()
        """,
    ),
}


@pytest.mark.parametrize("kind", sorted(FAILING))
def test_failing_rank_is_the_root_cause_with_its_traceback(kind, run_cli, write_job, distrun_home):
    command, script = FAILING[kind]
    job = write_job(mpi_job(command, extra="limits: {grace_period: 3}"), {"fail.py": script})
    started = time.monotonic()
    result = run_cli("run", str(job))
    assert time.monotonic() - started < 60  # the other ranks did not sleep their 120 s
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    cause = rec["root_cause"]
    assert (cause["name"], cause["rank"], cause["node_rank"], cause["exit_code"]) == ("rank_2", 2, 1, 1)
    assert cause["log"].endswith("std_log_process_02.txt")
    assert "ValueError: bad batch on rank 2" in cause["traceback"]
    assert 'fail.py", line' in cause["traceback"]
    assert "Reason: rank 2 on node 1" in result.stdout
    assert "Failed first: rank_2 on node 1" in result.stdout
    assert processes_of_job(name) == []


def test_killed_rank_is_named_with_its_signal(run_cli, write_job, distrun_home):
    script = """
        import os, signal, time
        time.sleep(0.5)
        if os.environ["OMPI_COMM_WORLD_RANK"] == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(120)
    """
    result = run_cli("run", str(write_job(mpi_job("python die.py"), {"die.py": script})))
    assert result.returncode == 1
    name = only_job(distrun_home)
    cause = record(distrun_home, name)["root_cause"]
    assert (cause["rank"], cause["signal"]) == (1, "SIGKILL")
    assert "rank 1 on node 0 was killed by SIGKILL" in cause["reason"]
    assert processes_of_job(name) == []


def test_mpirun_error_of_its_own_is_shown(run_cli, write_job, distrun_home):
    # More ranks than the hostfile has slots: mpirun refuses before any rank starts.
    command = "mpirun -np 8 --hostfile $AZUREML_MPI_HOSTFILE python -c pass"
    result = run_cli("run", str(write_job(mpi_job(command))))
    assert result.returncode == 1
    cause = record(distrun_home, only_job(distrun_home))["root_cause"]
    assert cause["name"] == "mpi_launcher" and cause["rank"] is None
    assert "not enough slots" in cause["traceback"]


# ---------------------------------------------------------------- gang: timeout, cancel, a killed distrun


def _running_job(home: Path) -> str:
    def running() -> str | None:
        if not (home / "jobs.db").exists():
            return None
        jobs = JobIndex(home / "jobs.db").list()
        return jobs[0].name if jobs and jobs[0].status == "Running" else None

    return str(wait_for(running))


def test_timeout_stops_mpirun_and_every_rank(run_cli, write_job, distrun_home):
    result = run_cli("run", str(write_job(SLEEPERS)), "--set", "limits.timeout=3")
    assert result.returncode == 1
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 3 s"
    assert processes_of_job(name) == []


def test_ctrl_c_cancels_every_rank(start_cli, write_job, distrun_home):
    proc = start_cli("run", str(write_job(SLEEPERS)))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 5)  # mpirun and 4 ranks
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert record(distrun_home, name)["status"] == "Canceled"
    assert processes_of_job(name) == []


def test_cancel_from_another_shell(start_cli, run_cli, write_job, distrun_home):
    proc = start_cli("run", str(write_job(SLEEPERS)))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 5)
    ok(run_cli("job", "cancel", name))
    assert proc.wait(timeout=30) == 130
    assert processes_of_job(name) == []


def test_sigkill_of_distrun_leaves_no_rank(start_cli, run_cli, write_job, distrun_home):
    # mpirun puts each rank in a process group of its own; they must still all go.
    proc = start_cli("run", str(write_job(SLEEPERS)))
    name = _running_job(distrun_home)
    wait_for(lambda: len(processes_of_job(name)) >= 5)
    proc.kill()
    proc.wait()
    wait_for(lambda: processes_of_job(name) == [], timeout=15)
    data = json.loads(run_cli("job", "show", name, "-o", "json").stdout)
    assert data["status"] == "Failed" and data["reason"].startswith("launcher lost")


# ---------------------------------------------------------------- no mpirun


def test_no_mpirun_on_path_is_a_clear_error_before_anything_starts(write_job, distrun_home, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    job = write_job(mpi_job("python -c pass"))
    result = subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(job)],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(distrun_home, {"PATH": str(empty)}),
    )
    assert result.returncode == 1
    assert "mpirun was not found on PATH" in result.stderr
    assert "apt-get install openmpi-bin" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    # It stops before anything is recorded or streamed.
    assert "Streaming" not in result.stdout and "RunId" not in result.stdout
    assert not (distrun_home / "jobs").exists() or not list((distrun_home / "jobs").iterdir())
    assert not (distrun_home / "jobs.db").exists() or not JobIndex(distrun_home / "jobs.db").names()


def test_plan_shows_the_mpirun_command_and_hostfile(run_cli, write_job, distrun_home):
    result = run_cli("plan", str(write_job(mpi_job("python train.py"))), "--output", "json")
    ok(result)
    plan = json.loads(result.stdout)["plan"]
    assert plan["distribution"] == "mpi" and plan["world_size"] == 4
    node0 = plan["nodes"][0]
    assert node0["files"] == {"mpi/hostfile": "localhost slots=4\n"}
    assert node0["processes"][0]["argv"][:3] == ["mpirun", "-np", "4"]
    assert [len(node["processes"]) for node in plan["nodes"]] == [1, 0]
    assert not (distrun_home / "jobs").exists() or not any((distrun_home / "jobs").iterdir())


def test_job_stream_labels_mpi_ranks_by_node_and_rank(run_cli, write_job, distrun_home):
    # A second reader follows the per-rank files the agent split out of mpirun's output; it
    # labels them as the live stream does, not by file name.
    job = write_job(
        """
        name: streamed_mpi
        command: python -c "import os; print('hi from', os.environ['OMPI_COMM_WORLD_RANK'])"
        resources:
          instance_count: 2
        distribution:
          type: mpi
          process_count_per_instance: 2
        """
    )
    assert run_cli("job", "create", "--file", str(job)).returncode == 0
    streamed = run_cli("job", "stream", "streamed_mpi")
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    for label, rank in (("0/0", 0), ("0/1", 1), ("1/2", 2), ("1/3", 3)):
        assert f"[{label}] hi from {rank}\n" in streamed.stdout
