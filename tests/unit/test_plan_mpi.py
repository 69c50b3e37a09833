"""The `type: mpi` planner: the mpirun command, the hostfile, the variables ranks see, and
the detection of commands that start their own launcher (seed 001's draft form)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distrun.loading.loader import load_job_data, load_job_file
from distrun.plan import build_plan
from distrun.plan.common import shell_argv
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.plan.mpi import (
    HOSTFILE_PATH,
    LAUNCHER_LOG,
    OUTPUT_DEMUX,
    hostfile_text,
    rank_node,
    user_launcher,
)
from support.seed_jobs import SEED_001_HOROVODRUN, SEED_001_K8S, SEED_001_MPIRUN

JOB_DIR = "/var/jobs/job-1"


def placement(nodes: int = 2, simulated: bool = False) -> Placement:
    hosts = ("127.0.0.1",) * nodes if simulated else tuple(f"10.0.0.{k + 1}" for k in range(nodes))
    return Placement(hosts=hosts, master_port=29511, job_dir=JOB_DIR, run_id="job-1", simulated=simulated)


def mpi_plan(data: dict, simulated: bool = False) -> LaunchPlan:
    job = load_job_data(data, Path(".")).spec
    return build_plan(job, placement(job.node_count, simulated), Bindings())


def mpi_job(command: str = "python train.py", per_node: int = 4, nodes: int = 2, **extra: object) -> dict:
    dist = {"type": "mpi", "process_count_per_instance": per_node, **extra}
    return {"command": command, "resources": {"instance_count": nodes}, "distribution": dist}


def launcher_of(plan: LaunchPlan):
    (launcher,) = plan.processes()
    return launcher


# ---------------------------------------------------------------- distrun builds mpirun


def test_mpirun_runs_the_command_once_per_slot_from_node_0() -> None:
    plan = mpi_plan(mpi_job(per_node=4, nodes=2))
    launcher = launcher_of(plan)
    hostfile = f"{JOB_DIR}/{HOSTFILE_PATH}"
    assert plan.distribution == "mpi"
    assert plan.world_size == 8
    assert (launcher.name, launcher.role, launcher.node_rank, launcher.rank) == ("mpi_launcher", "launcher", 0, None)
    assert launcher.log_name == LAUNCHER_LOG == "mpi_log.txt"
    assert launcher.output_demux == OUTPUT_DEMUX
    argv = launcher.argv
    assert argv[:6] == ("mpirun", "-np", "8", "--hostfile", hostfile, "--tag-output")
    assert argv[6:10] == ("--bind-to", "none", "--map-by", "slot")
    assert argv[-3:] == shell_argv("python train.py")
    assert launcher.cwd == f"{JOB_DIR}/code"


def test_hostfile_lists_each_host_with_its_slots_on_node_0_only() -> None:
    plan = mpi_plan(mpi_job(per_node=4, nodes=3))
    assert plan.nodes[0].files == {HOSTFILE_PATH: "10.0.0.1 slots=4\n10.0.0.2 slots=4\n10.0.0.3 slots=4\n"}
    assert [len(node.processes) for node in plan.nodes] == [1, 0, 0]
    assert [node.files for node in plan.nodes[1:]] == [{}, {}]


def test_simulated_nodes_give_every_slot_to_this_machine() -> None:
    plan = mpi_plan(mpi_job(per_node=2, nodes=3), simulated=True)
    assert plan.nodes[0].files[HOSTFILE_PATH] == "localhost slots=6\n"
    # Ranks outnumber cores there: waiting ranks yield (a default the user's variables override).
    assert launcher_of(plan).env_defaults["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert "OMPI_MCA_mpi_yield_when_idle" not in launcher_of(mpi_plan(mpi_job(per_node=2, nodes=3))).env_defaults
    assert any("all 6 slots to this machine" in note for note in plan.notes)
    assert hostfile_text(("h",), 3, simulated=True) == "localhost slots=3\n"


def test_every_job_variable_is_exported_by_name_not_value() -> None:
    data = {**mpi_job(), "environment_variables": {"SECRET_TOKEN": "s3cr3t", "NCCL_DEBUG": "INFO"}}
    launcher = launcher_of(mpi_plan(data))
    exported = {launcher.argv[i + 1] for i, word in enumerate(launcher.argv) if word == "-x"}
    assert {"PATH", "SECRET_TOKEN", "NCCL_DEBUG", "AZ_BATCH_MASTER_NODE", "DISTRUN_JOB_NAME"} <= exported
    assert {"MASTER_ADDR", "MASTER_PORT", "AZUREML_MPI_HOSTFILE", "OMP_NUM_THREADS"} <= exported
    assert not any("s3cr3t" in word for word in launcher.argv)
    assert launcher.env["SECRET_TOKEN"] == "s3cr3t"
    # Open MPI's own variables reach the ranks without -x; exporting them would be noise.
    assert not any(name.startswith("OMPI_") for name in exported)


def test_ranks_see_the_master_node_variables_seed_002_reads() -> None:
    launcher = launcher_of(mpi_plan(mpi_job()))
    env = launcher.env
    assert env["AZ_BATCH_MASTER_NODE"] == "10.0.0.1:29511"
    assert env["AZ_BATCHAI_MPI_MASTER_NODE"] == "10.0.0.1"
    assert env["MASTER_PORT"] == "29511"
    assert env["AZUREML_MPI_HOSTFILE"] == f"{JOB_DIR}/{HOSTFILE_PATH}"
    # mpirun computes these per rank; distrun must not set them.
    assert not {"RANK", "WORLD_SIZE", "LOCAL_RANK"} & set(env)


def test_root_is_allowed_through_open_mpi_variables_not_a_flag() -> None:
    launcher = launcher_of(mpi_plan(mpi_job()))
    assert launcher.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert launcher.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert "--allow-run-as-root" not in launcher.argv


def test_mpirun_args_are_added_and_replace_the_defaults_they_contradict() -> None:
    extra = ["--map-by", "node", "-mca", "btl", "^openib"]
    argv = launcher_of(mpi_plan(mpi_job(mpirun_args=extra))).argv
    assert argv.count("--map-by") == 1
    assert ("--bind-to", "none") == argv[6:8]
    start = argv.index("-mca") - 2
    assert list(argv[start : start + 5]) == extra
    assert argv[-3:] == shell_argv("python train.py")


def test_one_process_per_node_by_default() -> None:
    data = {"command": "python a.py", "resources": {"instance_count": 3}, "distribution": {"type": "MPI"}}
    plan = mpi_plan(data)
    assert plan.world_size == 3
    assert launcher_of(plan).argv[:3] == ("mpirun", "-np", "3")
    assert launcher_of(plan).env_defaults == {}


def test_inputs_are_rendered_into_the_command() -> None:
    data = {**mpi_job(command="python train.py --epochs ${{inputs.epochs}}"), "inputs": {"epochs": 3}}
    job = load_job_data(data, Path(".")).spec
    plan = build_plan(job, placement(), Bindings(inputs={"epochs": "3"}))
    assert launcher_of(plan).argv[-1] == "python train.py --epochs 3"


def test_plan_is_plain_json() -> None:
    plan = mpi_plan(mpi_job())
    text = json.dumps(plan.to_dict())
    assert '"output_demux": "mpi-tagged"' in text
    # The same plain data as the standard library's (deep-copying, slower) conversion.
    assert plan.to_dict() == dataclasses.asdict(plan)


def test_rank_node_follows_slot_order() -> None:
    assert [rank_node(r, 2) for r in range(6)] == [0, 0, 1, 1, 2, 2]


# ---------------------------------------------------------------- the command starts its own launcher


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("mpirun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py", "mpirun"),
        ("horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py", "horovodrun"),
        ("mpiexec -n 4 python a.py", "mpiexec"),
        ("/usr/bin/mpirun -np 2 a.out", "mpirun"),
        ("NCCL_DEBUG=INFO mpirun -np 2 a.out", "mpirun"),
        ("env -u X A=1 horovodrun -np 2 python t.py", "horovodrun"),
        ("cd src && mpirun -np 2 python a.py", "mpirun"),
        ("pip install -r req.txt; exec mpirun -np 2 python a.py", "mpirun"),
        ("echo start\nmpirun -np 2 python a.py", "mpirun"),
        ("(time mpirun -np 2 python a.py)", "mpirun"),
        ("python train.py", None),
        ("echo mpirun", None),
        ("python train.py --launcher mpirun", None),
        ("python train.py  # then mpirun", None),
        ("echo 'mpirun -np 2'", None),
        ("bash -c 'mpirun -np 2 a'", None),
        ("python 'unbalanced", None),
    ],
)
def test_user_launcher(command: str, expected: str | None) -> None:
    assert user_launcher(command) == expected


@given(
    prefix=st.lists(st.sampled_from(["A=1", "cd src &&", "true;", "exec", "nohup", "env B=2"]), max_size=4),
    program=st.sampled_from(["mpirun", "mpiexec", "horovodrun", "python", "torchrun"]),
)
def test_launcher_found_after_any_prefix(prefix: list[str], program: str) -> None:
    command = " ".join([*prefix, program, "-np", "2", "python", "mpirun.py"])
    expected = program if program in ("mpirun", "mpiexec", "horovodrun") else None
    assert user_launcher(command) == expected


def test_own_launcher_runs_once_unwrapped_with_the_hostfile() -> None:
    command = "horovodrun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python train.py"
    plan = mpi_plan(mpi_job(command=command, per_node=2, mpirun_args=["--oversubscribe"]))
    launcher = launcher_of(plan)
    assert launcher.argv == shell_argv(command)
    assert launcher.label == "horovodrun"
    assert launcher.output_demux == OUTPUT_DEMUX
    # Its own mpirun tags rank output through Open MPI's MCA variable (horovodrun tags anyway).
    assert launcher.env["OMPI_MCA_orte_tag_output"] == "1"
    assert launcher.env["AZUREML_MPI_HOSTFILE"] == f"{JOB_DIR}/{HOSTFILE_PATH}"
    assert plan.nodes[0].files[HOSTFILE_PATH] == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    assert any("does not wrap it" in note for note in plan.notes)
    assert any("mpirun_args is ignored" in note for note in plan.notes)


# ---------------------------------------------------------------- seed 001's draft form (support.seed_jobs)


def write_job(tmp_path: Path, text: str) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "job.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "slots", "program"),
    [(SEED_001_HOROVODRUN, 1, "horovodrun"), (SEED_001_MPIRUN, 4, "mpirun"), (SEED_001_K8S, 1, "mpirun")],
)
def test_seed_001_draft_loads_into_the_same_model(tmp_path: Path, text: str, slots: int, program: str) -> None:
    job = load_job_file(write_job(tmp_path, text)).spec
    assert job.distribution_type == "mpi"
    assert job.resources.instance_count == 4
    assert job.distribution.process_count_per_instance == slots
    plan = build_plan(job, placement(4), Bindings())
    launcher = launcher_of(plan)
    assert launcher.label == program
    assert launcher.argv == shell_argv(job.command)
    assert plan.nodes[0].files[HOSTFILE_PATH].count(f"slots={slots}\n") == 4


def test_seed_001_launcher_resources_are_kept(tmp_path: Path) -> None:
    job = load_job_file(write_job(tmp_path, SEED_001_K8S)).spec
    assert job.distribution.launcher_resources == {"limits": {"cpu": 1, "memory": "2Gi"}}
    assert job.properties["compute_infrastructure"] == "k8s"


def test_seed_001_scaled_down_with_set(tmp_path: Path) -> None:
    # The 16-rank seed examples on a small machine: one node with 16 slots.
    overrides = ["resources.instance_count=1", "distributed.mpi.worker.slots_per=16"]
    job = load_job_file(write_job(tmp_path, SEED_001_MPIRUN), overrides).spec
    plan = build_plan(job, placement(1, simulated=True), Bindings())
    assert plan.nodes[0].files[HOSTFILE_PATH] == "localhost slots=16\n"


def test_the_progress_line_counts_mpis_ranks_not_its_one_launcher() -> None:
    # A 2-rank Horovod job on 2 nodes: one mpirun process on node 0 starts both ranks.
    from distrun.runner.report import stream_header
    from distrun.store.index import JobRecord

    launch = mpi_plan(
        {"command": "python train.py", "resources": {"instance_count": 2}, "distribution": {"type": "mpi"}}
    )
    assert len(list(launch.processes())) == 1
    assert launch.process_count() == 2
    record = JobRecord(name="hvd", status="Running", compute="local", folder="/jobs/hvd", created_at=0.0)
    assert stream_header(record, launch.process_count(), len(launch.nodes)).splitlines()[1] == (
        "Streaming /jobs/hvd/user_logs (2 processes on 2 nodes)"
    )
    pytorch = build_plan(
        load_job_data(
            {"command": "x", "resources": {"instance_count": 2}, "distribution": {"type": "pytorch"}}, Path(".")
        ).spec,
        placement(2),
        Bindings(),
    )
    assert pytorch.process_count() == len(list(pytorch.processes())) == 2
