"""The node agent of one node of a cluster job: engine-free, handed its node's facts.

A cluster backend starts one agent per node, through its own small entry point that learns
the node's `NodeFacts` from the engine (Slurm: `distrun.backends.slurm.node_agent`, from
SLURM_* and scontrol) and picks an `OutcomeChannel`. `run_node` then builds the same plan every
node builds, runs its own node's processes with the gang supervisor local compute uses, and
publishes the node's `NodeOutcome` on the channel for the backend to read. `failed_at` is
wall-clock time, so the backend can tell the first failure from the failures it caused on
other nodes. A node with no process of its own (an MPI job's nodes other than 0, whose ranks
node 0's mpirun starts) waits for the nodes that have some to report, and reports with them.

`python -m distrun.agent.node --facts FILE --channel DIR` runs one node from facts written as
JSON (`NodeFacts.to_dict`), publishing on a shared-folder channel: the engine-free way to run
the multi-agent path, e.g. one agent process per simulated node on this machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from distrun.agent.node_facts import NodeFacts, NodeOutcome
from distrun.agent.outcome import never_started
from distrun.agent.outcome_channel import ChannelPeers, FolderOutcomeChannel, OutcomeChannel
from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.agent.containers import ContainerRun
    from distrun.agent.outcome import GangResult
    from distrun.plan.model import Bindings, LaunchPlan, ProcessSpec
    from distrun.plan.plan_job import PlanJob
    from distrun.store.layout import JobFolder

EXIT_FAILED = 1
EXIT_NO_JOB = 2
EXIT_CANCELED = 143
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass(frozen=True)
class NodeJob:
    """The job as a node reads it from its job folder: what planning it needs, and its input/output bindings."""

    plan_job: PlanJob
    bindings: Bindings
    folder: JobFolder


def read_job(job_dir: Path) -> NodeJob:
    """job.json and bindings.json of the job folder; OSError when this node cannot read them.

    job.json was validated when the job was submitted: a node reads it as plain data (`PlanJob`),
    without loading the job models, which would add pydantic's import and validator build to the
    start of every node.
    """
    from distrun.plan.plan_job import PlanJob
    from distrun.store.layout import JobFolder

    folder = JobFolder(job_dir)
    job = PlanJob.from_dump(read_folder_json(folder.job_json), str(folder.job_json))
    return NodeJob(job, _bindings(folder), folder)


def _bindings(folder: JobFolder) -> Bindings:
    from distrun.core.errors import DistrunError
    from distrun.plan.model import Bindings

    try:
        return Bindings(**read_folder_json(folder.bindings_json))  # type: ignore[arg-type]
    except TypeError as exc:
        raise DistrunError(f"{folder.bindings_json} is not what distrun wrote there ({exc})", _CHANGED_HINT) from None


def read_folder_json(path: Path) -> object:
    """A JSON file of the job folder, where the job's processes can write (between attempts too):
    only a regular file of bounded size is read, and one that is not JSON is named, not a traceback."""
    from distrun.core.errors import DistrunError
    from distrun.core.safe_files import read_text

    try:
        return json.loads(read_text(path))
    except ValueError as exc:
        raise DistrunError(f"{path} is not what distrun wrote there ({exc})", _CHANGED_HINT) from None


_CHANGED_HINT = "the job's files were changed after submission: submit the job again"


def unreadable_job_message(where: str, job_dir: Path, exc: OSError) -> str:
    return (
        f"distrun node agent on {where}: cannot read the job folder {job_dir} ({exc.strerror or exc}). "
        "DISTRUN_HOME must be on a filesystem every node mounts at the same path (NFS, Lustre, GPFS, ...)."
    )


def note_stop_requests() -> list[int]:
    """From now until the gang takes over (and after it gives them back), stop signals are only noted.

    The outcome must still be published, or the job record would lack this node.
    """
    stop_requested: list[int] = []
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: stop_requested.append(signum))
    return stop_requested


def node_plan(job: NodeJob, facts: NodeFacts, adapt_plan: Callable[[LaunchPlan], LaunchPlan] | None) -> LaunchPlan:
    """The plan every node builds from the same facts; `adapt_plan` is the engine's touch (Slurm's MPI hostfile)."""
    from distrun.plan import build_plan
    from distrun.plan.model import Placement

    placement = Placement(
        hosts=facts.addresses,
        master_port=facts.master_port,
        task_ports=facts.task_ports,
        job_dir=str(facts.job_dir),
        run_id=facts.job_dir.name,
        restart_count=facts.restart_count,
    )
    plan = build_plan(job.plan_job, placement, job.bindings)
    return adapt_plan(plan) if adapt_plan is not None else plan


def node_outcome(result: GangResult, facts: NodeFacts, started_at: float, ended_at: float) -> NodeOutcome:
    """The node's report: the gang's result, named after the cluster's hosts, with wall-clock times."""
    data = result.to_dict()
    status = JobStatus(data["status"])
    reason = data["reason"]
    root = data["root_cause"]
    for proc in data["processes"]:
        proc["host"] = facts.node_name
        proc["address"] = facts.address
    failed_at = None
    if root is not None:
        # Usually a process of this node; for MPI a rank mpirun started on another node.
        where = root.get("node_rank")
        node = where if isinstance(where, int) and 0 <= where < facts.node_count else facts.node_rank
        root["host"] = facts.node_names[node]
        root["address"] = facts.addresses[node]
        if root.get("after_ms") is not None:
            failed_at = started_at + root["after_ms"] / 1000
        if root.get("signal") == "SIGTERM":
            # Nobody in distrun sent it: the engine signals every process of a job it ends
            # (a cancel, another node's failure, its time limit).
            status = JobStatus.CANCELED
            reason = f"stopped by {facts.engine}: {root['reason']}"
    failed = status == JobStatus.FAILED
    outcome = process_free_outcome(facts, status, reason, started_at, ended_at)
    return dataclasses.replace(
        outcome,
        root_cause=root if failed else None,
        failed_at=failed_at if failed else None,
        processes=data["processes"],
    )


def process_free_outcome(
    facts: NodeFacts, status: JobStatus, reason: str, started_at: float, ended_at: float
) -> NodeOutcome:
    """The report of a node that ran no process: stopped before starting, or one with none of its own."""
    return NodeOutcome(
        node_rank=facts.node_rank,
        node_name=facts.node_name,
        address=facts.address,
        engine_job_id=facts.engine_job_id,
        status=status,
        reason=reason,
        started_at=started_at,
        ended_at=ended_at,
    )


def stopped_before_start(
    facts: NodeFacts, signum: int, now: float, mine: Sequence[ProcessSpec], log_dir: Path
) -> NodeOutcome:
    """Stopped while planning: the node's processes are listed, none of them started."""
    reason = f"stopped by {facts.engine} ({signal.Signals(signum).name}) before the processes started"
    return dataclasses.replace(
        process_free_outcome(facts, JobStatus.CANCELED, reason, now, now),
        processes=[
            {**never_started(spec, facts.node_name, log_dir).to_dict(), "address": facts.address} for spec in mine
        ],
    )


def setup_failure_outcome(node_rank: int, node_name: str, engine_job_id: str, message: str) -> NodeOutcome:
    """The report of a node whose agent could not start its processes (no facts, no plan)."""
    now = time.time()
    return NodeOutcome(
        node_rank=node_rank,
        node_name=node_name,
        engine_job_id=engine_job_id,
        status=JobStatus.FAILED,
        reason=f"the node agent on node {node_rank} ({node_name}) could not start: {message}",
        failed_at=now,
        started_at=now,
        ended_at=now,
    )


def wait_for_nodes(
    channel: OutcomeChannel, node_ranks: list[int], stop_requested: list[int]
) -> dict[int, NodeOutcome] | None:
    """The outcomes of `node_ranks` once all are published; None when a stop signal came first.

    A node with no process of its own (an MPI job's nodes other than 0: mpirun on node 0
    starts their ranks) stays in the job until it is over: its task ending early would look like
    the end of the job to some engines (Slurm with srun's --wait), and its report would claim
    "Completed" before anything was.
    """
    from distrun.agent.peers import POLL_SECONDS

    while not stop_requested:
        published = channel.outcomes(node_ranks)
        if all(rank in published for rank in node_ranks):
            return {rank: published[rank] for rank in node_ranks}
        time.sleep(POLL_SECONDS)
    return None


def waited_outcome(
    facts: NodeFacts, others: Mapping[int, NodeOutcome] | None, signum: int | None, started_at: float
) -> NodeOutcome:
    """A process-free node's report: Completed with the nodes it waited for, otherwise Canceled.

    Never Failed: the failure, if any, is in the report of the node where it happened.
    """
    now = time.time()
    if others is None:
        name = signal.Signals(signum).name if signum else "a signal"
        reason = f"stopped by {facts.engine} ({name}) with the job"
        return process_free_outcome(facts, JobStatus.CANCELED, reason, started_at, now)
    ended = {rank: o.status for rank, o in sorted(others.items())}
    said = ", ".join(f"node {rank} {status}" for rank, status in ended.items())
    if all(status == JobStatus.COMPLETED for status in ended.values()):
        return process_free_outcome(facts, JobStatus.COMPLETED, f"no process of its own ({said})", started_at, now)
    return process_free_outcome(facts, JobStatus.CANCELED, f"stopped with the job ({said})", started_at, now)


def node_launch_id(facts: NodeFacts) -> str:
    """The marker of this node's processes (their environment and cgroup), unique on the machine.

    The job's name and the engine's job id alone are not: two clusters on one machine (Slurm
    test clusters side by side, two emulated Kubernetes clusters) number their jobs alike, and a
    sweep of one node's leftovers would stop the other cluster's ranks of a job of the same name.
    """
    engine = f"{facts.engine.lower()}{facts.engine_job_id}"
    return f"{facts.job_dir.name}-{engine}-{os.urandom(6).hex()}-node{facts.node_rank}"


def run_node(
    facts: NodeFacts,
    channel: OutcomeChannel,
    job: NodeJob,
    *,
    adapt_plan: Callable[[LaunchPlan], LaunchPlan] | None = None,
    stop_requested: list[int] | None = None,
    out: BinaryIO | None = None,
    preempted_by: Callable[[int], bool] | None = None,
    container: ContainerRun | None = None,
    peers_share_job_folder: bool = True,
    before_publish: Callable[[], None] | None = None,
) -> NodeOutcome:
    """Run this node's part of the job and publish its outcome on `channel`; returns the outcome.

    `stop_requested` holds stop signals noted so far (`note_stop_requests`); one noted before the
    processes start means none starts. Node 0 writes the plan, with the real hosts and ports,
    into the job folder. Lines of this node's processes go to their log files and to `out`.
    `preempted_by` tells a stop signal that preempts the job from one that cancels it (`run_gang`).
    `container`: each of this node's processes runs in a container (`distrun.agent.containers`).
    `peers_share_job_folder`: whether the other nodes' agents see this node's job folder (shared
    or relayed); if not, a hang is judged on this node's progress and stacks alone.
    `before_publish`: what must be done once this node's processes ended and before the job is
    seen to end (the last of what a follower of other logs copies into the job's).
    """
    from distrun.agent.gang import run_gang
    from distrun.core.file_modes import write_file
    from distrun.core.json_encoding import compact_json
    from distrun.metrics.rank_token import read_token, with_token

    stops = stop_requested if stop_requested is not None else []
    stream = out if out is not None else sys.stdout.buffer
    # The ranks' MLflow token is in no file others read (the plan is one): given here, in memory.
    facts = dataclasses.replace(facts, base_env=with_token(facts.base_env, read_token(facts.job_dir)))
    plan = node_plan(job, facts, adapt_plan)
    if facts.node_rank == 0:
        write_file(job.folder.plan_json, compact_json(plan.to_dict()))
    mine = [p for node in plan.nodes if node.node_rank == facts.node_rank for p in node.processes]
    working = [node.node_rank for node in plan.nodes if node.processes]
    ranks = ", ".join(p.name for p in mine) or (
        "no process of its own (the launcher on node 0 starts this node's ranks); waits for the job's end"
    )
    _say(
        stream,
        f"distrun node agent: node {facts.node_rank} of {len(plan.nodes)} ({facts.node_name}, {facts.address}), "
        f"{facts.engine} job {facts.engine_job_id}, {ranks}; "
        f"MASTER_ADDR={plan.master_addr} MASTER_PORT={plan.master_port}",
    )
    started_at = time.time()
    if stops:
        # The engine stopped the job while this node was still planning: nothing to start.
        outcome = stopped_before_start(facts, stops[0], started_at, mine, job.folder.user_logs)
    elif not mine and working:
        others = wait_for_nodes(channel, working, stops)
        outcome = waited_outcome(facts, others, stops[0] if stops else None, started_at)
    else:
        result = run_gang(
            plan,
            [facts.node_rank],
            job.folder.user_logs,
            stream=stream,
            grace_period=job.plan_job.grace_seconds,
            timeout=job.plan_job.timeout,
            hang_timeout=job.plan_job.hang_timeout,
            last_metric=node_metric_clock(plan, mine[0] if mine else None, facts.base_env, job.plan_job.hang_timeout),
            base_env=facts.base_env,
            launch_id=node_launch_id(facts),
            # Parameter servers on this node wait until every node's training tasks are done.
            peers=ChannelPeers(channel, facts.node_rank, len(plan.nodes)),
            preempted_by=preempted_by,
            container=container,
            peers_share_job_folder=peers_share_job_folder,
        )
        outcome = node_outcome(result, facts, started_at, time.time())
    if before_publish is not None:
        before_publish()
    try:
        channel.publish(outcome)
    except OSError as exc:  # e.g. the channel's folder in the job folder replaced with a link by a rank
        said = exc.strerror or str(exc)
        _say(stream, f"distrun node agent: node {facts.node_rank}: could not publish its outcome: {said}")
    _say(stream, f"distrun node agent: node {facts.node_rank}: {outcome.status} {outcome.reason}".rstrip())
    return outcome


def node_metric_clock(
    plan: LaunchPlan, proc: ProcessSpec | None, base_env: Mapping[str, str], hang_timeout: float | None
) -> Callable[[], float | None] | None:
    """For the hang watchdog: when the job's MLflow run last logged a metric, asked of the tracking
    server this node's ranks log to (every node asks it, so a metric from any rank is every node's progress)."""
    if not hang_timeout or proc is None:
        return None
    from distrun.metrics.run_clock import run_clock

    return run_clock({**base_env, **plan.environment(proc)}, hang_timeout)


def exit_code(outcome: NodeOutcome) -> int:
    """The agent's exit status: non-zero when its node failed, so the engine can stop the other nodes."""
    if outcome.status == JobStatus.COMPLETED:
        return 0
    return EXIT_CANCELED if outcome.status == JobStatus.CANCELED else EXIT_FAILED


def _say(stream: BinaryIO, text: str) -> None:
    stream.write((text + "\n").encode())
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    import argparse  # here: the engines' agents import this module and parse their own arguments

    parser = argparse.ArgumentParser(prog="python -m distrun.agent.node", description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, required=True, help="this node's facts, as JSON (NodeFacts)")
    parser.add_argument("--channel", type=Path, required=True, help="the shared folder of the outcome channel")
    args = parser.parse_args(argv)
    stop_requested = note_stop_requests()
    data: dict[str, Any] = json.loads(args.facts.read_text(encoding="utf-8"))
    data.setdefault("base_env", dict(os.environ))
    facts = NodeFacts.from_dict(data)
    from distrun.core.errors import DistrunError

    try:
        job = read_job(facts.job_dir)
    except OSError as exc:
        print(unreadable_job_message(facts.node_name, facts.job_dir, exc), file=sys.stderr, flush=True)
        return EXIT_NO_JOB
    except DistrunError as exc:
        print(f"distrun node agent: error: {exc.render()}", file=sys.stderr, flush=True)
        return EXIT_NO_JOB
    from distrun.store.layout import NodeChannelPaths

    channel = FolderOutcomeChannel(NodeChannelPaths(args.channel), facts.node_count)
    return exit_code(run_node(facts, channel, job, stop_requested=stop_requested))


if __name__ == "__main__":
    sys.exit(main())
