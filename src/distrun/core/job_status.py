"""A job's status, in Azure ML's words: the one vocabulary of the store, the agent, the backends and the faces.

A module of its own that imports nothing of distrun, so that the store (at the bottom) and the
node agent (which runs on cluster nodes) can use it without importing the layers above them.
`JobState` is what a backend reads of a job from its engine, in that vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class JobStatus(str, Enum):
    """Azure ML's job statuses that distrun uses. A `str`: it compares, stores and prints as its value.

    A job goes Queued -> Starting -> Running -> Finalizing -> one of the terminal states
    (Completed, Failed, Canceled, Preempted); it may skip states, never go back. Preempted
    (distrun's word): stopped from outside (a SIGTERM that is not `job cancel`: Slurm
    preemption, a spot eviction) with no restart left (`distrun.restarts.policy`). CancelRequested, Paused and
    Unknown are what an engine may report of a live job (Slurm: being canceled, suspended,
    no answer); they are not terminal.
    """

    QUEUED = "Queued"
    STARTING = "Starting"
    RUNNING = "Running"
    FINALIZING = "Finalizing"
    CANCEL_REQUESTED = "CancelRequested"
    PAUSED = "Paused"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELED = "Canceled"
    PREEMPTED = "Preempted"

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @classmethod
    def of(cls, value: str) -> JobStatus:
        """The status named `value` (as stored); Unknown for a word distrun does not know."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.PREEMPTED})


@dataclass(frozen=True)
class JobState:
    """A job's state as a backend reads it from its engine and its nodes' outcomes. Pure data.

    status          the job's status now
    reason          one line for the user ("" when there is nothing to say)
    root_cause      the process that failed first, across nodes, when one did
    processes       the processes' outcomes known so far (the record's `processes` once it ends)
    stop_the_rest   the status is decided while part of the job still runs (the gang after a
                    failure or a cancel, helpers such as parameter servers after success): the
                    backend must end that part, and the job is terminal only once it has
    """

    status: JobStatus
    reason: str = ""
    root_cause: dict[str, Any] | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    stop_the_rest: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES and not self.stop_the_rest
