"""A Slurm job's status in distrun's terms, from Slurm's state and the outcomes the nodes wrote.

Pure functions: Slurm's state word (PENDING, RUNNING, ...) maps to a `JobStatus`; the nodes'
outcomes say which rank failed first, across nodes, by wall clock (`cluster.first_failure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.cluster import first_failure
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.slurm_states import SLURM_STATES, distrun_status, slurm_word
from distrun.core.job_status import TERMINAL_STATUSES, JobState, JobStatus
from distrun.core.safe_files import SMALL_FILE_LIMIT, read_text

if TYPE_CHECKING:
    from distrun.backends.slurm.client import SlurmJobInfo

__all__ = [
    "SLURM_STATES",
    "TERMINAL",
    "JobState",
    "distrun_status",
    "first_failure",
    "job_state",
    "read_canceled_at",
    "slurm_word",
]

# After Slurm ended a job, how long to wait for node outcomes to appear on the shared filesystem.
OUTCOME_WAIT_S = 15.0


TERMINAL = TERMINAL_STATUSES
SLURM_FAILURE_REASONS = {
    "TIMEOUT": "Slurm's time limit was reached",
    "NODE_FAIL": "a node of the allocation failed",
    "OUT_OF_MEMORY": "a node ran out of memory (Slurm's memory limit)",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its Slurm deadline",
    "PREEMPTED": "Slurm preempted the job",
}


def job_state(
    slurm: SlurmJobInfo,
    outcomes: Sequence[NodeOutcome],
    node_count: int,
    *,
    canceled_at: float | None = None,
    now: float | None = None,
) -> JobState:
    """distrun's status of a Slurm job, from Slurm's state and the outcomes the nodes wrote. Pure.

    While Slurm runs the job and a node has not reported, Slurm's state is the status: a
    failure is final only once every node reported (the first failure may report last).
    `canceled_at` is when `distrun job cancel` asked; a failure before it still wins.
    """
    word = slurm_word(slurm.state)
    slurm_status = distrun_status(slurm.state)
    reported = {o.node_rank for o in outcomes}
    missing = sorted(set(range(node_count)) - reported)
    live = slurm_status not in TERMINAL and slurm_status != JobStatus.UNKNOWN
    if live and missing:
        if canceled_at is not None:
            return JobState(JobStatus.CANCEL_REQUESTED, "Slurm is stopping the job")
        # Why Slurm keeps it waiting (Resources, Priority, ...); "None" until the scheduler looked.
        waiting = slurm.reason if slurm_status == JobStatus.QUEUED and slurm.reason not in ("", "None") else ""
        return JobState(slurm_status, waiting)
    ran = slurm.node_list not in ("", "(null)") and canceled_at is None
    if ran and missing and slurm.end_time is not None and now is not None and now - slurm.end_time < OUTCOME_WAIT_S:
        # Files written on another node may take a moment to show here (NFS caches).
        return JobState(JobStatus.FINALIZING, "waiting for the nodes' outcomes in the job folder")
    if not missing and all(o.status == JobStatus.COMPLETED for o in outcomes):
        # The agents are done; while Slurm ends the batch step the job is finalizing.
        return JobState(JobStatus.FINALIZING if live else JobStatus.COMPLETED, "")
    cause = first_failure(outcomes)
    if cause is not None and (canceled_at is None or (cause.failed_at or float("inf")) < canceled_at):
        root = dict(cause.root_cause) if cause.root_cause else None
        return JobState(JobStatus.FAILED, cause.reason or "a process failed", root)
    if canceled_at is not None:
        return JobState(JobStatus.CANCELED, "canceled by the user")
    if word == "CANCELLED":
        return JobState(JobStatus.CANCELED, "canceled in Slurm (scancel or an administrator)")
    if word in SLURM_FAILURE_REASONS:
        return JobState(JobStatus.FAILED, SLURM_FAILURE_REASONS[word])
    stopped = [o for o in outcomes if o.status == JobStatus.CANCELED]
    if stopped and not missing:
        return JobState(JobStatus.CANCELED, stopped[0].reason or "stopped by a signal")
    if not missing:
        return JobState(JobStatus.FAILED, "the nodes reported no failure but did not all complete")
    ended = f"ended {word} (exit code {slurm.exit_code})" if word else "is no longer known to Slurm"
    return JobState(
        JobStatus.FAILED,
        f"Slurm job {slurm.job_id} {ended} and node(s) {', '.join(map(str, missing))} wrote no outcome: "
        "see slurm/output.txt in the job folder, and check that DISTRUN_HOME is on a filesystem every node sees",
    )


def read_canceled_at(paths: SlurmPaths) -> float | None:
    try:
        text = read_text(paths.cancel, SMALL_FILE_LIMIT).strip()
    except OSError:
        return None
    try:
        return float(text)
    except ValueError:
        return 0.0
