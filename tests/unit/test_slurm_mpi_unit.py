"""MPI jobs on Slurm, the pure parts: the plan inside an allocation, the reports of nodes without processes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from distrun.agent.node import node_outcome, wait_for_nodes, waited_outcome
from distrun.agent.node_facts import NodeFacts, NodeOutcome
from distrun.agent.outcome import GangResult, ProcessOutcome
from distrun.agent.outcome_channel import FolderOutcomeChannel
from distrun.backends.slurm.client import SlurmJobInfo
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.mpi import for_slurm
from distrun.backends.slurm.state import job_state
from distrun.loading.loader import load_job_data
from distrun.plan import build_plan
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.plan.mpi import HOSTFILE_PATH

JOB_DIR = "/shared/distrun/jobs/calm_otter_1"
# Two Slurm nodes on one host, as in the test cluster: their addresses are the same.
PLACEMENT = Placement(hosts=("127.0.0.1", "127.0.0.1"), master_port=29500, job_dir=JOB_DIR, run_id="calm_otter_1")
FACTS = NodeFacts(
    node_rank=0,
    node_names=("n1", "n2"),
    addresses=("127.0.0.1", "127.0.0.1"),
    master_port=29500,
    task_ports=(),
    job_dir=Path(JOB_DIR),
    engine="Slurm",
    engine_job_id="7",
)


def plan_of(command: str, **distribution: object) -> LaunchPlan:
    data = {
        "command": command,
        "resources": {"instance_count": 2},
        "distribution": {"type": "mpi", "process_count_per_instance": 2, **distribution},
    }
    return build_plan(load_job_data(data, Path(".")).spec, PLACEMENT, Bindings())


def test_hostfile_names_slurms_nodes_even_when_they_share_an_address() -> None:
    plain = plan_of("python train.py")
    assert plain.nodes[0].files[HOSTFILE_PATH] == "127.0.0.1 slots=4\n"  # what mpirun would refuse in Slurm
    plan = for_slurm(plain, ("n1", "n2"))
    assert plan.nodes[0].files[HOSTFILE_PATH] == "n1 slots=2\nn2 slots=2\n"
    assert [len(node.processes) for node in plan.nodes] == [1, 0]  # mpirun on node 0 starts every rank


def test_the_launcher_may_start_a_job_step_beside_the_node_agents() -> None:
    for command in ("python train.py", "mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python train.py"):
        plan = for_slurm(plan_of(command), ("n1", "n2"))
        (launcher,) = plan.nodes[0].processes
        assert launcher.env["SLURM_OVERLAP"] == "1"
        assert launcher.env["SLURM_TASKS_PER_NODE"] == "2(x2)"  # the MPI job's ranks per node
        assert launcher.env["AZ_BATCH_MASTER_NODE"] == "127.0.0.1:29500"
        assert any("SLURM_OVERLAP=1" in note for note in plan.notes)
    # The Slurm variables are the launcher's own: not in distrun's `-x` list for the ranks.
    argv = for_slurm(plan_of("python train.py"), ("n1", "n2")).nodes[0].processes[0].argv
    assert "SLURM_OVERLAP" not in argv and "AZ_BATCH_MASTER_NODE" in argv


def test_other_plans_are_left_as_they_are() -> None:
    data = {
        "command": "python train.py",
        "resources": {"instance_count": 2},
        "distribution": {"type": "pytorch", "process_count_per_instance": 2},
    }
    plan = build_plan(load_job_data(data, Path(".")).spec, PLACEMENT, Bindings())
    assert for_slurm(plan, ("n1", "n2")) is plan


def test_a_rank_that_failed_on_another_node_is_named_with_that_nodes_host() -> None:
    launcher = ProcessOutcome(
        name="mpi_launcher", role="launcher", index=0, rank=None, node_rank=0, host="127.0.0.1", log="x", label="mpirun"
    )
    launcher.exit_code, launcher.after_ms = 1, 4000.0
    root = {"name": "rank_3", "rank": 3, "node_rank": 1, "host": "127.0.0.1", "after_ms": 4000.0}
    outcome = node_outcome(GangResult("Failed", "rank 3 failed", root, [launcher]), FACTS, 1000.0, 1005.0)
    assert (outcome.root_cause["host"], outcome.root_cause["node_rank"]) == ("n2", 1)
    assert outcome.processes[0]["host"] == "n1"  # mpirun itself ran on node 0
    assert outcome.failed_at == 1004.0


def test_a_node_without_processes_reports_with_the_job_never_as_its_failure() -> None:
    node1 = dataclasses.replace(FACTS, node_rank=1)

    def reported(status: str, **more: object) -> NodeOutcome:
        return NodeOutcome.from_dict({"node_rank": 0, "status": status, **more})

    done = waited_outcome(node1, {0: reported("Completed")}, None, 10.0)
    assert (done.status, done.reason) == ("Completed", "no process of its own (node 0 Completed)")
    failed = waited_outcome(node1, {0: reported("Failed")}, None, 10.0)
    assert (failed.status, failed.reason) == ("Canceled", "stopped with the job (node 0 Failed)")
    stopped = waited_outcome(node1, None, 15, 10.0)
    assert (stopped.status, stopped.reason) == ("Canceled", "stopped by Slurm (SIGTERM) with the job")
    # Node 0's failure stays the job's root cause.
    node0 = reported("Failed", reason="rank 3 failed", root_cause={"rank": 3}, failed_at=1)
    state = job_state(SlurmJobInfo("7", "FAILED"), [node0, failed], 2)
    assert (state.status, state.reason, state.root_cause) == ("Failed", "rank 3 failed", {"rank": 3})
    assert job_state(SlurmJobInfo("7", "COMPLETED"), [reported("Completed"), done], 2).status == "Completed"


def test_waiting_ends_with_the_outcome_file_or_a_stop_signal(tmp_path: Path) -> None:
    paths = SlurmPaths(tmp_path)
    paths.folder.mkdir()
    paths.node_outcome(0).write_text(json.dumps({"node_rank": 0, "status": "Completed"}))
    channel = FolderOutcomeChannel(paths.channel, 3)
    assert wait_for_nodes(channel, [0], []) == {0: NodeOutcome.from_dict({"node_rank": 0, "status": "Completed"})}
    assert wait_for_nodes(channel, [0, 2], [15]) is None  # node 2 never wrote; a signal came


def test_launchers_that_need_ssh_to_the_other_nodes_are_pointed_out() -> None:
    def notes(command: str) -> list[str]:
        return [note for note in for_slurm(plan_of(command), ("n1", "n2")).notes if "ssh" in note]

    assert notes("mpirun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python train.py") == []
    assert notes("python train.py") == []
    assert "horovodrun reaches the other nodes over ssh" in notes("horovodrun -np 4 -hostfile h python train.py")[0]
    assert "default runner (pdsh)" in notes("deepspeed --hostfile $AZUREML_MPI_HOSTFILE train.py")[0]
    assert notes("deepspeed --launcher openmpi --hostfile $AZUREML_MPI_HOSTFILE train.py") == []
