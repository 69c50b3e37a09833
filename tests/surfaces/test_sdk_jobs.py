"""Real jobs through both SDK styles: torch/gloo ranks, the per-node launchers, failures, cancel."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

import distrun
from distrun import Input, MLClient, Output, command, load_job
from distrun.core.errors import DistrunError
from distrun.sdk import operations
from distrun.store.layout import Layout
from distrun.v1 import (
    Environment,
    Experiment,
    MpiConfiguration,
    PyTorchConfiguration,
    ScriptRunConfig,
    TensorflowConfiguration,
    Workspace,
)
from support.cli import REPO, SRC, cli_env
from support.jobs import processes_of_job, wait_for
from support.sdk import sdk_env, write


def problems(exc: distrun.ValidationError) -> list[tuple[str, str, str]]:
    return [(p.key_path, p.message, p.hint) for p in exc.problems]


__all__ = ["sdk_env"]  # the fixture, imported for pytest

# Each rank checks the wiring with a real all_reduce, and that `--local_rank $LOCAL_RANK`
# (seed 004's tip) arrived expanded.
CHECK_RANKS = """
    import argparse, os
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--local_rank", type=int, default=None)
    parser.add_argument("--data", default=None)
    parser.add_argument("--model-dir", default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    env = os.environ
    print(f"rank {rank}/{world} node {env['NODE_RANK']} local {env['LOCAL_RANK']} arg {args.local_rank}"
          f" epochs {args.epochs} sum {int(total.item())}")
    if args.data:
        print("data", sorted(os.listdir(args.data)))
    if args.model_dir and rank == 0:
        with open(os.path.join(args.model_dir, "model.txt"), "w") as handle:
            handle.write(f"trained for {args.epochs} epochs")
    os.makedirs("outputs", exist_ok=True)
    with open(f"outputs/rank_{rank}.txt", "w") as handle:
        handle.write(str(rank))
    dist.destroy_process_group()
"""

# Rank 2 (node 1) fails with a traceback; the others would sleep a minute if not stopped.
FAILING = """
    import os, sys, time
    print("up", os.environ["RANK"], flush=True)
    time.sleep(0.5)
    if os.environ["RANK"] == "2":
        import fail
        fail.go()
    time.sleep(60)
"""


def project(root: Path, script: str) -> Path:
    write(root / "src" / "train.py", script)
    write(root / "src" / "fail.py", "def go():\n    raise ValueError('bad batch on rank 2')\n")
    return root


@pytest.mark.slow
def test_v2_example_runs_streams_lists_and_downloads(sdk_env, capsys, tmp_path):
    project(sdk_env, CHECK_RANKS)
    job = command(
        code="./src",
        command="python train.py --epochs ${{inputs.epochs}} --data ${{inputs.data}} --model-dir ${{outputs.model}}",
        inputs={"epochs": 1, "data": Input(type="uri_folder", path="./data")},
        outputs={"model": Output(type="uri_folder")},
        environment="azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest",
        instance_count=2,
        distribution={"type": "PyTorch", "process_count_per_instance": 2},
    )
    client = MLClient()
    with pytest.warns(distrun.sdk.notices.IgnoredArgumentWarning, match="local compute runs in this Python"):
        returned = client.jobs.create_or_update(job)
    assert returned.name and returned.status in ("Starting", "Running")
    assert returned.experiment_name == sdk_env.name == "project"  # Azure ML's default: the folder's name
    assert returned.display_name == returned.name
    client.jobs.stream(returned.name)
    out = capsys.readouterr().out
    assert out.startswith(f"RunId: {returned.name}\nStreaming ")
    for rank in range(4):
        assert f"[{rank // 2}/{rank}] rank {rank}/4 node {rank // 2} local {rank % 2} arg None epochs 1 sum 6" in out
    assert "[0/0] data ['sample.txt']" in out
    assert "Status: Completed" in out

    fetched = client.jobs.get(returned.name)
    assert fetched.status == "Completed" and fetched.distribution.process_count_per_instance == 2
    assert [j.name for j in client.jobs.list()] == [returned.name]
    dest = tmp_path / "download"
    client.jobs.download(returned.name, download_path=dest, all=True)
    assert (dest / "named-outputs" / "model" / "model.txt").read_text() == "trained for 1 epochs"
    assert (dest / "artifacts" / "outputs" / "rank_3.txt").read_text() == "3"
    assert client.jobs.begin_cancel(returned.name).result() is not None  # already ended: nothing to do

    # The CLI sees the same job.
    shown = subprocess.run(
        [sys.executable, "-m", "distrun", "job", "show", returned.name, "-o", "json"],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path / "home"),
    )
    assert '"status": "Completed"' in shown.stdout


@pytest.mark.slow
def test_v1_per_process_launch_from_seed_004(sdk_env, capsys):
    project(sdk_env, CHECK_RANKS)
    ws = Workspace()
    pytorch_env = Environment.get(workspace=ws, name="AzureML-PyTorch-1.6-GPU")
    distr_config = PyTorchConfiguration(process_count=4, node_count=2)
    src = ScriptRunConfig(
        source_directory="./src",
        script="train.py",
        arguments=["--epochs", 25, "--local_rank", "$LOCAL_RANK"],
        compute_target="local",
        environment=pytorch_env,
        distributed_job_config=distr_config,
    )
    with pytest.warns(
        distrun.sdk.notices.IgnoredArgumentWarning, match="AzureML-PyTorch-1.6-GPU@latest is neither a curated"
    ):
        run = Experiment(ws, "experiment_name").submit(src)
    details = run.wait_for_completion(show_output=True)
    out = capsys.readouterr().out
    for rank in range(4):
        local = rank % 2
        assert f"rank {rank}/4 node {rank // 2} local {local} arg {local} epochs 25 sum 6" in out
    assert details["status"] == "Completed" and run.get_status() == "Completed"
    assert sorted(details["logFiles"]) == [f"user_logs/std_log_process_{i:02d}.txt" for i in range(4)]
    assert "outputs/rank_0.txt" in run.get_file_names()
    assert [r.id for r in Experiment(ws, "experiment_name").get_runs()] == [run.id]


@pytest.mark.slow
def test_v1_per_node_torch_distributed_launch_from_seed_004(sdk_env, capsys):
    project(sdk_env, CHECK_RANKS)
    launch_cmd = (
        "python -m torch.distributed.launch --nproc_per_node 2 --nnodes 2 --node_rank $NODE_RANK "
        "--master_addr $MASTER_ADDR --master_port $MASTER_PORT --use_env train.py --epochs 50"
    ).split()
    src = ScriptRunConfig(
        source_directory="./src",
        command=launch_cmd,
        compute_target="local",
        distributed_job_config=PyTorchConfiguration(node_count=2),
    )
    run = Experiment(Workspace(), "experiment_name").submit(src)
    run.wait_for_completion(show_output=True)
    out = capsys.readouterr().out
    for rank in range(4):
        assert f"rank {rank}/4 node {rank // 2} local {rank % 2} arg None epochs 50 sum 6" in out


@pytest.mark.slow
def test_v2_per_node_torchrun(sdk_env, capsys):
    project(sdk_env, CHECK_RANKS)
    job = command(
        code="./src",
        command="torchrun --nnodes 2 --nproc-per-node 2 --node-rank $NODE_RANK --master-addr $MASTER_ADDR "
        "--master-port $MASTER_PORT train.py --epochs 2",
        instance_count=2,
        distribution={"type": "pytorch", "process_count_per_instance": 1},
    )
    client = MLClient()
    client.jobs.stream(client.jobs.create_or_update(job).name)
    out = capsys.readouterr().out
    for rank in range(4):
        assert f"rank {rank}/4 node {rank // 2} local {rank % 2} arg None epochs 2 sum 6" in out


def test_v1_mpi_configuration_runs_ranks_under_mpirun(sdk_env, capsys):
    write(
        sdk_env / "src" / "hello.py",
        """
        import os
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        total = comm.allreduce(comm.Get_rank())
        print(f"mpi rank {comm.Get_rank()} of {comm.Get_size()} local {os.environ['OMPI_COMM_WORLD_LOCAL_RANK']}"
              f" sum {total}")
        """,
    )
    src = ScriptRunConfig(
        source_directory="./src",
        script="hello.py",
        distributed_job_config=MpiConfiguration(process_count_per_node=2, node_count=2),
    )
    run = Experiment(Workspace(), "mpi").submit(src)
    details = run.wait_for_completion(show_output=True)
    out = capsys.readouterr().out
    assert details["status"] == "Completed", out
    for rank in range(4):  # simulated nodes share one host: Open MPI's local rank is the rank
        assert f"mpi rank {rank} of 4 local {rank} sum 6" in out


def test_v1_tensorflow_configuration_gives_each_task_its_tf_config(sdk_env, capsys):
    write(
        sdk_env / "src" / "task.py",
        """
        import json, os, time
        config = json.loads(os.environ["TF_CONFIG"])
        task = config["task"]
        print(f"task {task['type']} {task['index']} cluster {sorted(config['cluster'])}"
              f" workers {len(config['cluster']['worker'])}")
        if task["type"] == "worker":
            time.sleep(3)  # the ps is stopped once the workers are done: let it print first
        """,
    )
    src = ScriptRunConfig(
        source_directory="./src",
        script="task.py",
        distributed_job_config=TensorflowConfiguration(worker_count=2),  # and Azure ML's default of 1 ps
    )
    run = Experiment(Workspace(), "tf").submit(src)
    run.wait_for_completion(show_output=True)
    out = capsys.readouterr().out
    for role, index in (("worker", 0), ("worker", 1), ("ps", 0)):
        assert f"task {role} {index} cluster ['ps', 'worker'] workers 2" in out


def test_v2_failing_job_raises_with_the_root_cause(sdk_env, capsys):
    project(sdk_env, FAILING)
    job = command(
        code="./src",
        command="python train.py",
        instance_count=2,
        distribution={"type": "pytorch", "process_count_per_instance": 2},
        limits={"grace_period": 3},
    )
    client = MLClient()
    name = client.jobs.create_or_update(job).name
    started = time.monotonic()
    with pytest.raises(distrun.JobFailedError) as caught:
        client.jobs.stream(name)
    assert time.monotonic() - started < 30  # the others were stopped, not waited for
    error = caught.value
    assert (error.job_name, error.rank, error.node_rank) == (name, 2, 1)
    assert "ValueError: bad batch on rank 2" in error.traceback
    assert str(error) == f"job {name} failed: rank 2 on node 1 exited with code 1"
    assert error.hint.endswith("std_log_process_02.txt")
    out = capsys.readouterr().out
    assert "Reason: rank 2 on node 1 exited with code 1" in out and "Status: Failed" in out
    assert client.jobs.get(name).status == "Failed"
    assert client.jobs.get(name).root_cause["rank"] == 2
    assert processes_of_job(name) == []


def test_v1_failing_run_raises_unless_asked_not_to(sdk_env):
    project(sdk_env, FAILING)
    src = ScriptRunConfig(
        source_directory="./src",
        script="train.py",
        distributed_job_config=PyTorchConfiguration(process_count=4, node_count=2),
    )
    run = Experiment(Workspace(), "failing").submit(src)
    with pytest.raises(distrun.JobFailedError) as caught:
        run.wait_for_completion()
    assert caught.value.rank == 2 and "ValueError: bad batch on rank 2" in caught.value.traceback
    details = run.wait_for_completion(raise_on_error=False)
    assert details["status"] == "Failed" and details["error"]["rootCause"]["node_rank"] == 1


def test_begin_cancel_stops_a_running_job(sdk_env, capsys):
    project(sdk_env, "import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    client = MLClient()
    job = command(code="./src", command="python train.py", instance_count=2, limits={"grace_period": 3})
    name = client.jobs.create_or_update(job).name
    logs = Layout().job(name).user_logs
    wait_for(lambda: [p.read_text() for p in sorted(logs.glob("*.txt"))] == ["up\n", "up\n"])
    poller = client.jobs.begin_cancel(name)
    poller.result(timeout=60)
    assert poller.done() and poller.status() == "Succeeded"
    assert client.jobs.get(name).status == "Canceled"
    client.jobs.stream(name)  # a canceled job streams to its end without raising
    assert "Status: Canceled" in capsys.readouterr().out
    notebook_output = io.StringIO()  # a notebook's sys.stdout has no binary buffer
    operations.stream(Layout(), name, notebook_output)
    assert "[0/0] up\n" in notebook_output.getvalue() and "[1/1] up\n" in notebook_output.getvalue()
    assert processes_of_job(name) == []
    with pytest.raises(distrun.DistrunError, match="no job named 'nope'"):
        client.jobs.begin_cancel("nope")


def test_v1_run_cancel_stops_a_running_run(sdk_env):
    project(sdk_env, "import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    src = ScriptRunConfig(
        source_directory="./src",
        script="train.py",
        distributed_job_config=PyTorchConfiguration(process_count=2, node_count=2),
    )
    run = Experiment(Workspace(), "canceled").submit(src)
    logs = Layout().job(run.id).user_logs
    wait_for(lambda: [p.read_text() for p in sorted(logs.glob("*.txt"))] == ["up\n", "up\n"])
    run.cancel()
    assert run.get_status() == "Canceled"
    assert processes_of_job(run.id) == []
    run.cancel()  # a run that already ended stays as it ended
    assert run.get_status() == "Canceled"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["v2_command_job.py", "v1_script_run_config.py"])
def test_examples_run_as_they_are(script, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "sdk" / script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_env(tmp_path / "home"),
        cwd=cwd,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Status: Completed" in result.stdout
    assert "[0/0] epoch 1/1 loss" in result.stdout
    assert list(cwd.iterdir()) == []  # downloads go to a temporary folder, not the user's folder
    assert "model:" in result.stdout


def test_import_distrun_loads_no_sdk_and_no_pydantic():
    code = (
        "import sys, distrun\n"
        "assert 'pydantic' not in sys.modules and 'distrun.sdk' not in sys.modules, sorted(sys.modules)\n"
        "assert callable(distrun.command) and 'distrun.sdk.client' not in sys.modules\n"
        "assert distrun.MLClient.__name__ == 'MLClient' and 'MLClient' in dir(distrun)\n"
        "print('lazy')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(SRC))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "lazy\n"
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        distrun.nothing_here  # noqa: B018


def test_invalid_job_raises_the_cli_problems_and_records_nothing(sdk_env, run_cli, tmp_path):
    job = command(
        code="./src",
        command="python train.py --epochs ${{inputs.epoch}}",
        inputs={"epochs": 3},
        environment_variables={"WORLD_SIZE": 8},
    )
    line = sys._getframe().f_lineno - 6  # the line of command( above
    with pytest.raises(distrun.ValidationError) as caught:
        MLClient().jobs.create_or_update(job)
    assert not (tmp_path / "home" / "jobs.db").exists()
    rendered = str(caught.value)
    assert rendered.startswith("invalid job: 2 problems")
    assert f"{__file__}:{line}: command: ${{{{inputs.epoch}}}} refers to an undefined input 'epoch'" in rendered
    assert "hint: did you mean inputs.epochs?" in rendered
    assert isinstance(caught.value, DistrunError)

    yml = write(
        sdk_env / "job.yml",
        """
        command: python train.py --epochs ${{inputs.epoch}}
        code: ./src
        inputs:
          epochs: 3
        environment_variables:
          WORLD_SIZE: 8
        """,
    )
    with pytest.raises(distrun.ValidationError) as from_yaml:
        load_job(yml)
    assert sorted(problems(caught.value)) == sorted(problems(from_yaml.value))
    cli = run_cli("job", "validate", "--file", str(yml))
    assert cli.returncode == 2
    for key, message, hint in problems(caught.value):
        assert f"{key}: {message}" in cli.stderr and hint in cli.stderr

    with pytest.raises(distrun.ValidationError, match=r"resources\.instance_count: must be at least 1, got 0"):
        MLClient().jobs.create_or_update(command(command="echo hi", instance_count=0))


def test_a_notebooks_cluster_cell_then_its_job_run_unchanged(sdk_env, capsys, monkeypatch):
    """azureml-examples' cluster cell, as written there, then a 2-node job on that cluster."""
    from distrun.entities import AmlCompute

    monkeypatch.setenv("DISTRUN_MLFLOW", "0")  # no MLflow store to create for this home: seconds saved

    ml_client = MLClient()
    cpu_compute_target = "cpu-cluster"
    try:
        ml_client.compute.get(cpu_compute_target)
    except Exception:
        cpu_cluster = AmlCompute(
            name=cpu_compute_target, type="amlcompute", size="STANDARD_DS3_V2", min_instances=0, max_instances=4
        )
        ml_client.compute.begin_create_or_update(cpu_cluster).result()
    job = command(
        command="echo node $NODE_RANK of $WORLD_SIZE",
        compute=cpu_compute_target,
        instance_count=2,
        distribution={"type": "pytorch", "process_count_per_instance": 1},
    )
    returned = ml_client.jobs.create_or_update(job)
    ml_client.jobs.stream(returned.name)  # raises if the job failed
    captured = capsys.readouterr()
    assert "distrun: compute cpu-cluster (AmlCompute size=STANDARD_DS3_V2" in captured.err
    assert "node 0 of 2" in captured.out and "node 1 of 2" in captured.out
    assert ml_client.jobs.get(returned.name).compute == cpu_compute_target
