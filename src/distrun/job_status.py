"""A job's status, in Azure ML's words: the one vocabulary of the store, the agent, the backends and the faces.

A module of its own that imports nothing, so that the store (at the bottom) and the node agent
(which runs on cluster nodes) can use it without importing the layers above them.
"""

from __future__ import annotations

from enum import Enum


class JobStatus(str, Enum):
    """Azure ML's job statuses that distrun uses. A `str`: it compares, stores and prints as its value.

    A job goes Queued -> Starting -> Running -> Finalizing -> one of the three terminal states
    (Completed, Failed, Canceled); it may skip states, never go back. CancelRequested, Paused and
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


TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELED})
