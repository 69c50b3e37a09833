"""A Slurm job's status in distrun's terms, from Slurm's state and the outcomes the nodes wrote.

Pure functions: Slurm's state word (PENDING, RUNNING, ...) maps to Azure ML's status names;
the nodes' outcome files say which rank failed first, across nodes, by wall clock.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distrun.backends.slurm.layout import SlurmPaths

if TYPE_CHECKING:
    from distrun.backends.slurm.client import SlurmJobInfo

# After Slurm ended a job, how long to wait for node outcomes to appear on the shared filesystem.
OUTCOME_WAIT_S = 15.0


SLURM_STATES = {
    "PENDING": "Queued",
    "REQUEUED": "Queued",
    "REQUEUE_HOLD": "Queued",
    "REQUEUE_FED": "Queued",
    "RESV_DEL_HOLD": "Queued",
    "CONFIGURING": "Starting",
    "RUNNING": "Running",
    "RESIZING": "Running",
    "SIGNALING": "Running",
    "STAGE_OUT": "Finalizing",
    "COMPLETING": "Finalizing",
    "SUSPENDED": "Paused",
    "STOPPED": "Paused",
    "COMPLETED": "Completed",
    "CANCELLED": "Canceled",
    "FAILED": "Failed",
    "TIMEOUT": "Failed",
    "NODE_FAIL": "Failed",
    "OUT_OF_MEMORY": "Failed",
    "BOOT_FAIL": "Failed",
    "DEADLINE": "Failed",
    "PREEMPTED": "Failed",
    "SPECIAL_EXIT": "Failed",
    "REVOKED": "Canceled",
}
TERMINAL = frozenset({"Completed", "Failed", "Canceled"})
SLURM_FAILURE_REASONS = {
    "TIMEOUT": "Slurm's time limit was reached",
    "NODE_FAIL": "a node of the allocation failed",
    "OUT_OF_MEMORY": "a node ran out of memory (Slurm's memory limit)",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its Slurm deadline",
    "PREEMPTED": "Slurm preempted the job",
}


def slurm_word(slurm_state: str | None) -> str | None:
    """The state word: scontrol and squeue may add flags ("CANCELLED by 0", "RUNNING+")."""
    if not slurm_state:
        return None
    return re.split(r"[^A-Z_]", slurm_state.upper(), maxsplit=1)[0]


def distrun_status(slurm_state: str | None) -> str:
    word = slurm_word(slurm_state)
    return "Unknown" if word is None else SLURM_STATES.get(word, "Unknown")


@dataclass(frozen=True)
class JobState:
    status: str
    reason: str = ""
    root_cause: dict[str, Any] | None = None
    slurm_state: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def first_failure(outcomes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The failed node outcome whose failure happened first, by wall clock across nodes.

    A rank failing on one node makes its peers on other nodes fail too (closed connections)
    a moment later, or be stopped by Slurm: the earliest failure is the cause. Outcomes with
    a root cause (a rank that failed) come before those without (a node that could not start).
    """
    failed = [o for o in outcomes if o.get("status") == "Failed"]
    if not failed:
        return None
    return min(
        failed,
        key=lambda o: (not o.get("root_cause"), o.get("failed_at") or float("inf"), int(o.get("node_rank", 0))),
    )


def job_state(
    slurm: SlurmJobInfo,
    outcomes: Sequence[Mapping[str, Any]],
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
    reported = {int(o["node_rank"]) for o in outcomes if "node_rank" in o}
    missing = sorted(set(range(node_count)) - reported)
    live = slurm_status not in TERMINAL and slurm_status != "Unknown"
    state = slurm.state
    if live and missing:
        if canceled_at is not None:
            return JobState("CancelRequested", "Slurm is stopping the job", None, state)
        # Why Slurm keeps it waiting (Resources, Priority, ...); "None" until the scheduler looked.
        waiting = slurm.reason if slurm_status == "Queued" and slurm.reason not in ("", "None") else ""
        return JobState(slurm_status, waiting, None, state)
    ran = slurm.node_list not in ("", "(null)") and canceled_at is None
    if ran and missing and slurm.end_time is not None and now is not None and now - slurm.end_time < OUTCOME_WAIT_S:
        # Files written on another node may take a moment to show here (NFS caches).
        return JobState("Finalizing", "waiting for the nodes' outcomes in the job folder", None, state)
    if not missing and all(o.get("status") == "Completed" for o in outcomes):
        # The agents are done; while Slurm ends the batch step the job is finalizing.
        return JobState("Finalizing" if live else "Completed", "", None, state)
    cause = first_failure(outcomes)
    if cause is not None and (canceled_at is None or (cause.get("failed_at") or float("inf")) < canceled_at):
        root = dict(cause["root_cause"]) if cause.get("root_cause") else None
        return JobState("Failed", str(cause.get("reason") or "a process failed"), root, state)
    if canceled_at is not None:
        return JobState("Canceled", "canceled by the user", None, state)
    if word == "CANCELLED":
        return JobState("Canceled", "canceled in Slurm (scancel or an administrator)", None, state)
    if word in SLURM_FAILURE_REASONS:
        return JobState("Failed", SLURM_FAILURE_REASONS[word], None, state)
    stopped = [o for o in outcomes if o.get("status") == "Canceled"]
    if stopped and not missing:
        return JobState("Canceled", str(stopped[0].get("reason") or "stopped by a signal"), None, state)
    if not missing:
        return JobState("Failed", "the nodes reported no failure but did not all complete", None, state)
    ended = f"ended {word} (exit code {slurm.exit_code})" if word else "is no longer known to Slurm"
    return JobState(
        "Failed",
        f"Slurm job {slurm.job_id} {ended} and node(s) {', '.join(map(str, missing))} wrote no outcome: "
        "see slurm/output.txt in the job folder, and check that DISTRUN_HOME is on a filesystem every node sees",
        None,
        state,
    )


def read_outcomes(paths: SlurmPaths, node_count: int) -> list[dict[str, Any]]:
    outcomes = []
    for node_rank in range(node_count):
        with contextlib.suppress(OSError, ValueError):
            outcomes.append(json.loads(paths.node_outcome(node_rank).read_text()))
    return outcomes


def read_canceled_at(paths: SlurmPaths) -> float | None:
    try:
        text = paths.cancel.read_text().strip()
    except OSError:
        return None
    try:
        return float(text)
    except ValueError:
        return 0.0
