"""`python -m distrun.agent.node --job-dir DIR`: the node agent of one node of a cluster job.

A cluster backend starts one of these per node (Slurm: `srun --ntasks-per-node=1`). It
finds out where it runs (node rank, the allocation's hosts, MASTER_PORT), builds the same
plan every node builds, runs its own node's processes with the gang supervisor local
compute uses, and writes its outcome to the job folder for the backend to read:

    <job folder>/slurm/node_NN.json   {status, reason, root_cause, failed_at, processes, ...}

It exits non-zero when its node failed, so that Slurm (`--kill-on-bad-exit=1`) stops the
other nodes at once. A node with no process of its own (an MPI job's nodes other than 0,
whose ranks node 0's mpirun starts through Slurm) waits for the nodes that have some to
report, and reports with them. `failed_at` is wall-clock time, so the backend can tell the first
failure from the failures it caused on other nodes.

`python -m distrun.agent.node --free-ports N` prints N TCP ports free on this node (the batch
script uses it on the first node for MASTER_PORT and TensorFlow's task ports).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distrun.backends.slurm.layout import SlurmPaths

EXIT_FAILED = 1
EXIT_NO_JOB = 2
EXIT_CANCELED = 143

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


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on every interface of this node, from the range local jobs use.

    Not from bind(0): those come from the ephemeral range, where an outgoing connection could
    take one before the framework binds it.
    """
    import random

    from distrun.backends.local import PORT_RANGE

    chosen: list[int] = []
    for _ in range(100 * (count + 10)):
        if len(chosen) == count:
            break
        port = random.randint(*PORT_RANGE)
        if port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue
        chosen.append(port)
    if len(chosen) < count:
        raise SystemExit(f"distrun: no {count} free TCP ports in {PORT_RANGE[0]}-{PORT_RANGE[1]}")
    return chosen


@dataclass(frozen=True)
class NodeFacts:
    """Where this agent runs, as the cluster tells it."""

    node_rank: int
    node_name: str
    names: tuple[str, ...]  # every node of the job, node rank order
    addresses: tuple[str, ...]  # where each node is reached; addresses[0] is MASTER_ADDR
    master_port: int
    task_ports: tuple[int, ...]  # TensorFlow's, one per task, in cluster order
    job_id: str


def slurm_facts(env: Mapping[str, str], pinned_port: int | None, task_ports: int) -> NodeFacts:
    """Node rank from SLURM_NODEID, hosts from `scontrol show hostnames`, ports from the batch script."""
    from distrun.backends.slurm.client import SlurmClient
    from distrun.errors import DistrunError

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
    node_rank = int(env["SLURM_NODEID"])
    return NodeFacts(
        node_rank=node_rank,
        node_name=env.get("SLURMD_NODENAME") or names[node_rank],
        names=names,
        addresses=tuple(addresses.get(name, name) for name in names),
        master_port=master_port,
        task_ports=tuple(ports),
        job_id=env["SLURM_JOB_ID"],
    )


def rank_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the ranks inherit: the submitter's, minus what describes the agent's own task."""
    return {key: value for key, value in env.items() if key not in TASK_LEVEL_SLURM_VARS}


def node_outcome(result: Any, facts: NodeFacts, started_at: float, ended_at: float) -> dict[str, Any]:
    """The node's report: the gang's result, named after the cluster's hosts, with wall-clock times."""
    data = result.to_dict()
    status = data["status"]
    reason = data["reason"]
    root = data["root_cause"]
    for proc in data["processes"]:
        proc["host"] = facts.node_name
        proc["address"] = facts.addresses[facts.node_rank]
    failed_at = None
    if root is not None:
        # Usually a process of this node; for MPI a rank mpirun started on another node.
        where = root.get("node_rank")
        node = where if isinstance(where, int) and 0 <= where < len(facts.names) else facts.node_rank
        root["host"] = facts.names[node]
        root["address"] = facts.addresses[node]
        if root.get("after_ms") is not None:
            failed_at = started_at + root["after_ms"] / 1000
        if root.get("signal") == "SIGTERM":
            # Nobody in distrun sent it: Slurm signals every process of a step it ends
            # (scancel, --kill-on-bad-exit after another node failed, its time limit).
            status = "Canceled"
            reason = f"stopped by Slurm: {root['reason']}"
    return {
        "node_rank": facts.node_rank,
        "node_name": facts.node_name,
        "address": facts.addresses[facts.node_rank],
        "slurm_job_id": facts.job_id,
        "status": status,
        "reason": reason,
        "root_cause": root if status == "Failed" else None,
        "failed_at": failed_at if status == "Failed" else None,
        "started_at": started_at,
        "ended_at": ended_at,
        "processes": data["processes"],
    }


def stopped_before_start(facts: NodeFacts, signum: int, now: float) -> dict[str, Any]:
    reason = f"stopped by Slurm ({signal.Signals(signum).name}) before the processes started"
    return process_free_outcome(facts, "Canceled", reason, now, now)


def process_free_outcome(
    facts: NodeFacts, status: str, reason: str, started_at: float, ended_at: float
) -> dict[str, Any]:
    """The report of a node that ran no process: stopped before starting, or one with none of its own."""
    return {
        "node_rank": facts.node_rank,
        "node_name": facts.node_name,
        "address": facts.addresses[facts.node_rank],
        "slurm_job_id": facts.job_id,
        "status": status,
        "reason": reason,
        "root_cause": None,
        "failed_at": None,
        "started_at": started_at,
        "ended_at": ended_at,
        "processes": [],
    }


def wait_for_nodes(
    paths: SlurmPaths, node_ranks: list[int], stop_requested: list[int]
) -> dict[int, dict[str, Any]] | None:
    """The outcomes of `node_ranks` once all are written; None when a stop signal came first.

    A node with no process of its own (an MPI job's nodes other than 0: mpirun on node 0
    starts their ranks through Slurm) stays in the step until the job is over: its task
    ending early would look like the end of the job to a Slurm with srun's --wait (WaitTime)
    set, and its report would claim "Completed" before anything was.
    """
    from distrun.agent.peers import POLL_SECONDS

    while not stop_requested:
        with contextlib.suppress(OSError):
            os.listdir(paths.folder)  # revalidates NFS's cached view of the folder
        outcomes: dict[int, dict[str, Any]] = {}
        for rank in node_ranks:
            try:
                outcomes[rank] = json.loads(paths.node_outcome(rank).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                break
        else:
            return outcomes
        time.sleep(POLL_SECONDS)
    return None


def waited_outcome(
    facts: NodeFacts, others: dict[int, dict[str, Any]] | None, signum: int | None, started_at: float
) -> dict[str, Any]:
    """A process-free node's report: Completed with the nodes it waited for, otherwise Canceled.

    Never Failed: the failure, if any, is in the report of the node where it happened.
    """
    now = time.time()
    if others is None:
        name = signal.Signals(signum).name if signum else "a signal"
        return process_free_outcome(facts, "Canceled", f"stopped by Slurm ({name}) with the job", started_at, now)
    ended = {rank: str(o.get("status")) for rank, o in sorted(others.items())}
    said = ", ".join(f"node {rank} {status}" for rank, status in ended.items())
    if all(status == "Completed" for status in ended.values()):
        return process_free_outcome(facts, "Completed", f"no process of its own ({said})", started_at, now)
    return process_free_outcome(facts, "Canceled", f"stopped with the job ({said})", started_at, now)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Whole or not at all: readers on other hosts never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)


def run_node(job_dir: Path, env: Mapping[str, str]) -> int:
    from distrun.agent.gang import DEFAULT_GRACE, run_gang
    from distrun.agent.peers import FolderPeers
    from distrun.backends.slurm import mpi as slurm_mpi
    from distrun.backends.slurm.layout import SlurmPaths
    from distrun.plan import build_plan, task_port_count
    from distrun.plan.model import Placement
    from distrun.spec.models import JobSpec
    from distrun.store.layout import JobFolder
    from distrun.submission import load_bindings

    # Until the gang takes over SIGTERM (and after it gives it back), a stop request is only
    # noted: the outcome file must still be written, or the job record would lack this node.
    stop_requested: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop_requested.append(signum))
    folder = JobFolder(job_dir)
    paths = SlurmPaths(job_dir)
    where = env.get("SLURMD_NODENAME") or socket.gethostname()
    try:
        spec = JobSpec.model_validate(json.loads(folder.job_json.read_text(encoding="utf-8")))
        bindings = load_bindings(folder)
    except OSError as exc:
        print(
            f"distrun node agent on {where}: cannot read the job folder {job_dir} ({exc.strerror or exc}). "
            "DISTRUN_HOME must be on a filesystem every node mounts at the same path (NFS, Lustre, GPFS, ...).",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_NO_JOB
    pinned = spec.environment_variables.get("MASTER_PORT")
    facts = slurm_facts(env, int(pinned) if pinned and pinned.isdigit() else None, task_port_count(spec))
    placement = Placement(
        hosts=facts.addresses,
        master_port=facts.master_port,
        task_ports=facts.task_ports,
        job_dir=str(job_dir),
        run_id=job_dir.name,
    )
    # MPI: the hostfile names Slurm's nodes, and mpirun may start daemons on them with srun.
    plan = slurm_mpi.for_slurm(build_plan(spec, placement, bindings), facts.names)
    if facts.node_rank == 0:
        write_json(folder.plan_json, plan.to_dict())
    mine = [p for node in plan.nodes if node.node_rank == facts.node_rank for p in node.processes]
    working = [node.node_rank for node in plan.nodes if node.processes]
    ranks = ", ".join(p.name for p in mine) or (
        "no process of its own (the launcher on node 0 starts this node's ranks); waits for the job's end"
    )
    print(
        f"distrun node agent: node {facts.node_rank} of {len(plan.nodes)} ({facts.node_name}, "
        f"{facts.addresses[facts.node_rank]}), Slurm job {facts.job_id}, {ranks}; "
        f"MASTER_ADDR={plan.master_addr} MASTER_PORT={plan.master_port}",
        flush=True,
    )
    grace = spec.limits.grace_period if spec.limits.grace_period is not None else DEFAULT_GRACE
    started_at = time.time()
    if stop_requested:
        # Slurm stopped the step while this node was still planning: nothing to start.
        outcome = stopped_before_start(facts, stop_requested[0], started_at)
        write_json(paths.node_outcome(facts.node_rank), outcome)
        return EXIT_CANCELED
    if not mine and working:
        others = wait_for_nodes(paths, working, stop_requested)
        outcome = waited_outcome(facts, others, stop_requested[0] if stop_requested else None, started_at)
    else:
        result = run_gang(
            plan,
            [facts.node_rank],
            folder.user_logs,
            stream=sys.stdout.buffer,
            grace_period=grace,
            timeout=spec.limits.timeout,
            base_env=rank_env(env),
            launch_id=f"{job_dir.name}-slurm{facts.job_id}-node{facts.node_rank}",
            # Parameter servers on this node wait until every node's training tasks are done.
            peers=FolderPeers(paths.folder, facts.node_rank, len(plan.nodes)),
        )
        outcome = node_outcome(result, facts, started_at, time.time())
    write_json(paths.node_outcome(facts.node_rank), outcome)
    print(f"distrun node agent: node {facts.node_rank}: {outcome['status']} {outcome['reason']}".rstrip(), flush=True)
    if outcome["status"] == "Completed":
        return 0
    return EXIT_CANCELED if outcome["status"] == "Canceled" else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distrun.agent.node", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--job-dir", type=Path, help="the job folder (on a filesystem every node sees)")
    group.add_argument("--free-ports", type=int, metavar="N", help="print N TCP ports free on this node and exit")
    args = parser.parse_args(argv)
    if args.free_ports is not None:
        print(",".join(map(str, free_ports(args.free_ports))))
        return 0
    from distrun.errors import DistrunError

    job_dir = args.job_dir.absolute()
    try:
        return run_node(job_dir, dict(os.environ))
    except DistrunError as exc:
        print(f"distrun node agent: error: {exc.render()}", file=sys.stderr, flush=True)
        report_setup_failure(job_dir, os.environ, exc.message)
        return EXIT_FAILED


def report_setup_failure(job_dir: Path, env: Mapping[str, str], message: str) -> None:
    """The node could not start its processes: say so in its outcome, so the job record names it."""
    from distrun.backends.slurm.layout import SlurmPaths

    node = env.get("SLURM_NODEID", "")
    if not node.isdigit() or not job_dir.is_dir():
        return
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    now = time.time()
    outcome = {
        "node_rank": int(node),
        "node_name": name,
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "status": "Failed",
        "reason": f"the node agent on node {node} ({name}) could not start: {message}",
        "root_cause": None,
        "failed_at": now,
        "started_at": now,
        "ended_at": now,
        "processes": [],
    }
    try:
        write_json(SlurmPaths(job_dir).node_outcome(int(node)), outcome)
    except OSError:
        pass  # the message above is in slurm/output.txt


if __name__ == "__main__":
    sys.exit(main())
