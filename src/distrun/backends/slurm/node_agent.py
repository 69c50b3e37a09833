"""`python -m distrun.backends.slurm.node_agent --job-dir DIR`: Slurm's entry point to the node agent.

The batch script starts one per node with `srun --ntasks-per-node=1`. It turns Slurm's view of
the node (SLURM_NODEID, the allocation's hosts from `scontrol show hostnames`, the ports the
batch script found on the first node) into `NodeFacts`, and runs the engine-free node agent
(`distrun.agent.node.run_node`) with the shared job folder as its outcome channel:

    <job folder>/slurm/node_NN.json   the node's outcome (status, reason, root cause, failed_at, processes)
    <job folder>/slurm/main_done_NN   the node's training processes all completed (peer marker)

It exits non-zero when its node failed, so that Slurm (`--kill-on-bad-exit=1`) stops the other
nodes at once.

`--free-ports N` prints N TCP ports free on this node. Batch scripts now run `python -m
distrun.backends.ports N` for that (half the start-up); the option stays for the batch script
of a job submitted by an earlier distrun, which Slurm runs again when it requeues the job.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distrun.agent.containers import ContainerRun
    from distrun.agent.node import NodeJob
    from distrun.agent.node_facts import NodeFacts
    from distrun.agent.outcome_channel import FolderOutcomeChannel
    from distrun.backends.slurm.spark_executor_logs import WorkFolderExecutorLogs
    from distrun.store.layout import JobFolder

ENGINE = "Slurm"

# Slurm's per-task and per-step variables describe the node agent (one task per node), not
# the ranks it starts: a rank that read SLURM_PROCID or SLURM_NTASKS as its own (PyTorch
# Lightning, submitit do) would be mis-wired. Job-level ones (SLURM_JOB_ID, SLURM_NODEID,
# SLURM_JOB_NODELIST, ...) stay: they are true for every rank.
TASK_LEVEL_SLURM_VARS = (
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_GTIDS",
    "SLURM_TASK_PID",
    "SLURM_CPU_BIND",
    "SLURM_CPU_BIND_LIST",
    "SLURM_CPU_BIND_TYPE",
    "SLURM_CPU_BIND_VERBOSE",
    "SLURM_DISTRIBUTION",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
    "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_UMASK",
    "SLURM_PRIO_PROCESS",
)


def rank_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the ranks inherit: the submitter's, minus what describes the agent's own task."""
    return {key: value for key, value in env.items() if key not in TASK_LEVEL_SLURM_VARS}


def slurm_facts(env: Mapping[str, str], job_dir: Path, pinned_port: int | None, task_ports: int) -> NodeFacts:
    """Node rank from SLURM_NODEID, hosts from `scontrol show hostnames`, ports from the batch script."""
    from distrun.agent.node_facts import NodeFacts
    from distrun.backends.slurm.client import SlurmClient
    from distrun.core.errors import DistrunError

    missing = [key for key in ("SLURM_NODEID", "SLURM_JOB_NODELIST", "SLURM_JOB_ID") if not env.get(key)]
    if missing:
        raise DistrunError(
            f"not inside a Slurm job step: {', '.join(missing)} not set",
            "the Slurm backend starts this agent with srun; it is not meant to be run by hand",
        )
    client = SlurmClient(env)
    names = tuple(client.hostnames(env["SLURM_JOB_NODELIST"]))
    addresses = client.node_addresses(names)
    ports = [int(p) for p in env.get("DISTRUN_PORTS", "").split(",") if p.strip().isdigit()]
    wanted = (0 if pinned_port is not None else 1) + task_ports
    if len(ports) != wanted:
        raise DistrunError(f"DISTRUN_PORTS has {len(ports)} ports, the job needs {wanted}: the batch script sets it")
    master_port = pinned_port if pinned_port is not None else ports.pop(0)
    return NodeFacts(
        node_rank=int(env["SLURM_NODEID"]),
        node_names=names,
        addresses=tuple(addresses.get(name, name) for name in names),
        master_port=master_port,
        task_ports=tuple(ports),
        job_dir=job_dir,
        base_env=rank_env(env),
        engine=ENGINE,
        engine_job_id=env["SLURM_JOB_ID"],
        # The batch script's attempt counter (a job with restarts); 0 for a job that runs once.
        restart_count=int(count) if (count := env.get("DISTRUN_RESTART_COUNT", "")).isdigit() else 0,
    )


def outcome_channel(job_dir: Path, node_count: int) -> FolderOutcomeChannel:
    """The nodes' outcomes and peer markers, in the job folder's slurm/ (a filesystem every node sees)."""
    from distrun.agent.outcome_channel import FolderOutcomeChannel
    from distrun.backends.slurm.layout import SlurmPaths

    return FolderOutcomeChannel(SlurmPaths(job_dir).channel, node_count)


def run_slurm_node(job_dir: Path, env: Mapping[str, str]) -> int:
    from distrun.agent import node as agent
    from distrun.backends.slurm import mpi as slurm_mpi
    from distrun.backends.slurm.spark_cluster import for_spark
    from distrun.plan import task_port_count

    stop_requested = agent.note_stop_requests()
    try:
        job = agent.read_job(job_dir)
    except OSError as exc:
        where = env.get("SLURMD_NODENAME") or socket.gethostname()
        print(agent.unreadable_job_message(where, job_dir, exc), file=sys.stderr, flush=True)
        return agent.EXIT_NO_JOB
    hold_mlflow_server(job.folder)
    pinned = job.plan_job.environment_variables.get("MASTER_PORT")
    pinned_port = int(pinned) if pinned and pinned.isdigit() else None
    facts = slurm_facts(env, job_dir, pinned_port, task_port_count(job.plan_job))
    channel = outcome_channel(job_dir, facts.node_count)
    executors = executor_logs(job, facts)
    outcome = agent.run_node(
        facts,
        channel,
        job,
        container=node_container(job_dir, facts.node_name),
        # MPI: the hostfile names Slurm's nodes, and mpirun may start daemons on them with srun.
        # Spark: a standalone cluster over the allocation's nodes, its executors' logs followed.
        adapt_plan=lambda plan: for_spark(slurm_mpi.for_slurm(plan, facts.node_names)),
        stop_requested=stop_requested,
        preempted_by=preemption_test(job, channel),
        before_publish=executors.stop if executors is not None else None,
    )
    return agent.exit_code(outcome)


def executor_logs(job: NodeJob, facts: NodeFacts) -> WorkFolderExecutorLogs | None:
    """Node 0 of a Spark job's cluster follows its executors' logs into the job's (started); None otherwise."""
    from distrun.backends.slurm.spark_cluster import SPARK_CLUSTER_VAR

    if facts.node_rank != 0 or SPARK_CLUSTER_VAR not in job.plan_job.environment_variables:
        return None
    from distrun.backends.slurm.spark_executor_logs import WorkFolderExecutorLogs

    return WorkFolderExecutorLogs(facts.job_dir).start()


def node_container(job_dir: Path, node_name: str) -> ContainerRun | None:
    """How this node runs its processes in containers (slurm/container.json, written at submit),
    with this node's own engine; None for a job without one."""
    import shutil

    from distrun.agent.containers import ContainerRun
    from distrun.agent.node import read_folder_json
    from distrun.backends.slurm.layout import SlurmPaths
    from distrun.core.errors import DistrunError

    path = SlurmPaths(job_dir).container
    if not path.exists():
        return None
    try:
        run = ContainerRun.from_dict(read_folder_json(path), str(path))
    except ValueError as exc:
        raise DistrunError(str(exc), "the job's files were changed after submission: submit the job again") from None
    program = shutil.which(run.engine)
    if program is None:
        raise DistrunError(
            f"the job runs each process in a container of image {run.image}, but node {node_name} has no {run.engine}",
            f"install {run.engine} on every node, or submit with `distrun run --no-container` to run in the "
            "nodes' Python",
        )
    run = dataclasses.replace(run, program=program)
    if run.image_build:  # built from a context by the submitter; a node whose engine lacks it builds it
        from distrun.environments.image_build import ImageBuild, ensure_built

        built = run.image_build
        ensure_built(
            ImageBuild(built["tag"], built["context"], built["dockerfile"], run.engine, program), Path(run.config_dir)
        )
    return run


def hold_mlflow_server(folder: JobFolder) -> None:
    """On the machine of DISTRUN_HOME's MLflow server, the node agent holds a use of it while its
    ranks run, in place of the submission's lease (a detached job's submitter has exited).

    A node on another host cannot see that server's process; the lease keeps it there.
    """
    from distrun.metrics.tracking import hold_server
    from distrun.metrics.tracking_server import drop_lease

    home = folder.root.parent.parent  # DISTRUN_HOME/jobs/NAME
    if hold_server(folder, home):
        drop_lease(home, folder.root.name)


def preemption_test(job: NodeJob, channel: FolderOutcomeChannel) -> Callable[[int], bool] | None:
    """A job with restarts: a SIGTERM is a preemption unless it comes with a cancel or a failure.

    Slurm preemption signals every step; the batch script forwards a SIGTERM it got (`--signal=B:`,
    `scancel --signal=TERM --batch`) to the steps. `distrun job cancel` writes slurm/cancel before
    scancel; a node whose rank failed publishes its outcome before srun ends the other nodes.
    """
    import signal

    from distrun.backends.slurm.layout import SlurmPaths
    from distrun.core.job_status import JobStatus

    if not job.plan_job.restarts.on:
        return None
    cancel = SlurmPaths(job.folder.root).cancel

    def preempts(signum: int) -> bool:
        if signum != signal.SIGTERM or cancel.exists():
            return False
        return all(o.status != JobStatus.FAILED for o in channel.outcomes().values())

    return preempts


def report_setup_failure(job_dir: Path, env: Mapping[str, str], message: str) -> None:
    """The node could not start its processes: say so in its outcome, so the job record names it."""
    from distrun.agent.node import setup_failure_outcome

    node = env.get("SLURM_NODEID", "")
    if not node.isdigit() or not job_dir.is_dir():
        return
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    outcome = setup_failure_outcome(int(node), name, env.get("SLURM_JOB_ID", ""), message)
    try:
        outcome_channel(job_dir, int(node) + 1).publish(outcome)
    except OSError:
        pass  # the message is in slurm/output.txt


def parse_args(argv: list[str]) -> tuple[Path | None, int | None]:
    """(the job folder, how many free ports to print): one of them is given."""
    # The batch script's own form (`--job-dir DIR`) is read without argparse, whose import is
    # 5 ms of every node's start; anything else gets argparse's usage and errors.
    if len(argv) == 2 and argv[0] == "--job-dir" and argv[1] and not argv[1].startswith("-"):
        return Path(argv[1]), None
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m distrun.backends.slurm.node_agent", description=__doc__.splitlines()[0]
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--job-dir", type=Path, help="the job folder (on a filesystem every node sees)")
    group.add_argument("--free-ports", type=int, metavar="N", help="print N TCP ports free on this node and exit")
    args = parser.parse_args(argv)
    return args.job_dir, args.free_ports


def main(argv: list[str] | None = None) -> int:
    job_dir, free_port_count = parse_args(sys.argv[1:] if argv is None else argv)
    if free_port_count is not None:
        from distrun.backends import ports

        return ports.main([str(free_port_count)])  # the ports step batch scripts now run themselves
    from distrun.core.errors import DistrunError

    assert job_dir is not None  # argparse requires one of the two
    job_dir = job_dir.absolute()
    try:
        return run_slurm_node(job_dir, dict(os.environ))
    except DistrunError as exc:
        print(f"distrun node agent: error: {exc.render()}", file=sys.stderr, flush=True)
        report_setup_failure(job_dir, os.environ, exc.message)
        return 1


if __name__ == "__main__":
    sys.exit(main())
