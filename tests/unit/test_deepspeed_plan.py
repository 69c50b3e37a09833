"""Plans for DeepSpeed jobs: the DeepSpeed launcher run once under `type: mpi`, a hostfile
DeepSpeed's own parser accepts, the advice distrun gives on launcher commands, and no
variable that would switch DeepSpeed's start-up onto its Azure ML path."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.loading.loader import load_job_data
from distrun.plan import build_plan
from distrun.plan.common import shell_argv
from distrun.plan.deepspeed import launcher_options
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.plan.mpi import HOSTFILE_PATH, user_launcher

JOB_DIR = "/var/jobs/job-1"
LOCAL_COMMAND = (
    "deepspeed --hostfile $AZUREML_MPI_HOSTFILE --no_ssh_check --master_addr $MASTER_ADDR "
    "--master_port $MASTER_PORT train.py --deepspeed_config ds_config.json"
)


def placement(nodes: int, simulated: bool) -> Placement:
    hosts = ("127.0.0.1",) * nodes if simulated else tuple(f"10.0.0.{k + 1}" for k in range(nodes))
    return Placement(hosts=hosts, master_port=29511, job_dir=JOB_DIR, run_id="job-1", simulated=simulated)


def job(command: str, kind: str = "mpi", nodes: int = 2, per_node: int = 2, env: dict | None = None) -> dict:
    data: dict = {
        "command": command,
        "resources": {"instance_count": nodes},
        "distribution": {"type": kind, "process_count_per_instance": per_node},
    }
    if env:
        data["environment_variables"] = env
    return data


def plan_of(data: dict, simulated: bool = True) -> LaunchPlan:
    spec = load_job_data(data, Path(".")).spec
    return build_plan(spec, placement(spec.node_count, simulated), Bindings())


def deepspeed_notes(plan: LaunchPlan) -> list[str]:
    return [note for note in plan.notes if "DeepSpeed" in note]


# ---------------------------------------------------------------- the launcher form


@pytest.mark.parametrize(
    ("command", "program"),
    [
        (LOCAL_COMMAND, "deepspeed"),
        ("ds --hostfile $AZUREML_MPI_HOSTFILE train.py", "ds"),
        ("cd src && NCCL_DEBUG=INFO /opt/conda/bin/deepspeed train.py", "deepspeed"),
        ("env -u CUDA_VISIBLE_DEVICES deepspeed train.py", "deepspeed"),
        ("python train.py --launcher deepspeed", None),
        ("echo deepspeed && python train.py", None),
        ("python -m deepspeed.launcher.runner train.py", None),  # not seen: runs under mpirun
    ],
)
def test_the_deepspeed_launcher_is_found_in_command_position(command: str, program: str | None) -> None:
    assert user_launcher(command) == program


def test_the_launcher_runs_once_on_node_0_with_the_hostfile() -> None:
    plan = plan_of(job(LOCAL_COMMAND, nodes=3, per_node=2), simulated=False)
    (launcher,) = plan.processes()
    assert launcher.argv == shell_argv(LOCAL_COMMAND)  # not wrapped in mpirun
    assert (launcher.node_rank, launcher.label, launcher.rank) == (0, "deepspeed", None)
    assert launcher.env["AZUREML_MPI_HOSTFILE"] == f"{JOB_DIR}/{HOSTFILE_PATH}"
    assert (launcher.env["MASTER_ADDR"], launcher.env["MASTER_PORT"]) == ("10.0.0.1", "29511")
    assert plan.nodes[0].files == {HOSTFILE_PATH: "10.0.0.1 slots=2\n10.0.0.2 slots=2\n10.0.0.3 slots=2\n"}
    assert [len(node.processes) for node in plan.nodes] == [1, 0, 0]
    assert plan.world_size == 6
    assert any("starts deepspeed itself" in note for note in plan.notes)


def test_local_compute_gives_deepspeed_one_host_with_every_slot() -> None:
    plan = plan_of(job(LOCAL_COMMAND, nodes=2, per_node=2))
    assert plan.nodes[0].files[HOSTFILE_PATH] == "localhost slots=4\n"
    assert deepspeed_notes(plan) == []  # the documented local command needs no advice


# ---------------------------------------------------------------- advice on launcher commands


def test_launcher_without_master_port_is_told_about_29500() -> None:
    command = LOCAL_COMMAND.replace(" --master_port $MASTER_PORT", "")
    (note,) = deepspeed_notes(plan_of(job(command)))
    assert "port 29500" in note and "--master_port $MASTER_PORT" in note


@pytest.mark.parametrize(
    "command",
    [
        "deepspeed --hostfile $AZUREML_MPI_HOSTFILE --master_port $MASTER_PORT train.py",
        "deepspeed -H $AZUREML_MPI_HOSTFILE --no_ssh_check --master_port=$MASTER_PORT train.py",
    ],
)
def test_local_compute_asks_for_the_flags_that_launch_without_ssh(command: str) -> None:
    (note,) = deepspeed_notes(plan_of(job(command)))
    assert "--no_ssh_check --master_addr $MASTER_ADDR" in note
    # On a cluster ssh (pdsh) is the launcher's way to reach the other hosts: no such advice.
    assert deepspeed_notes(plan_of(job(command), simulated=False)) == []


def test_local_compute_warns_that_num_gpus_cuts_the_ranks() -> None:
    command = LOCAL_COMMAND.replace("train.py", "--num_nodes 2 --num_gpus 2 train.py")
    (note,) = deepspeed_notes(plan_of(job(command)))
    assert "--num_gpus 2 starts only 2 ranks" in note


def test_launcher_without_hostfile_on_several_nodes() -> None:
    (note,) = deepspeed_notes(plan_of(job("deepspeed --master_port $MASTER_PORT train.py"), simulated=False))
    assert "node 0 only" in note


def test_launcher_options_stop_at_the_training_script() -> None:
    options = launcher_options("A=1 deepspeed -H hf --no_ssh_check --num_gpus=2 train.py --master_port 1 --x")
    assert options == {"-H": "hf", "--no_ssh_check": "", "--num_gpus": "2"}


def test_the_launcher_under_type_pytorch_is_flagged_when_it_would_run_more_than_once() -> None:
    (note,) = deepspeed_notes(plan_of(job("deepspeed train.py", kind="pytorch", nodes=2, per_node=2)))
    assert "each of the 4 processes" in note and "type: mpi" in note
    assert deepspeed_notes(plan_of(job("deepspeed train.py", kind="pytorch", nodes=1, per_node=1))) == []
    # DeepSpeed's own per-node mode, one launcher per node: its normal use.
    per_node = "deepspeed --no_ssh --node_rank $NODE_RANK --hostfile hosts train.py"
    assert deepspeed_notes(plan_of(job(per_node, kind="pytorch", nodes=2, per_node=1))) == []


# ---------------------------------------------------------------- DeepSpeed's platform detection


def test_a_job_setting_azureml_experiment_id_is_told_what_it_does_to_deepspeed() -> None:
    plan = plan_of(job("python -m mpi4py train.py", env={"AZUREML_EXPERIMENT_ID": "exp-1"}))
    (note,) = deepspeed_notes(plan)
    assert note.startswith("AZUREML_EXPERIMENT_ID is set") and "54965" in note
    assert deepspeed_notes(plan_of(job("python -m mpi4py train.py"))) == []
