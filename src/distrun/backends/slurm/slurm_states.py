"""Slurm's state words (PENDING, RUNNING, ...) as distrun's `JobStatus`.

Its own module, light to import: the Slurm client reads a job's state with it, and the client
runs in every node agent (`distrun.backends.slurm.state` gives the same names, with the rest of
a job's state).
"""

from __future__ import annotations

import re

from distrun.core.job_status import JobStatus

SLURM_STATES: dict[str, JobStatus] = {
    "PENDING": JobStatus.QUEUED,
    "REQUEUED": JobStatus.QUEUED,
    "REQUEUE_HOLD": JobStatus.QUEUED,
    "REQUEUE_FED": JobStatus.QUEUED,
    "RESV_DEL_HOLD": JobStatus.QUEUED,
    "CONFIGURING": JobStatus.STARTING,
    "RUNNING": JobStatus.RUNNING,
    "RESIZING": JobStatus.RUNNING,
    "SIGNALING": JobStatus.RUNNING,
    "STAGE_OUT": JobStatus.FINALIZING,
    "COMPLETING": JobStatus.FINALIZING,
    "SUSPENDED": JobStatus.PAUSED,
    "STOPPED": JobStatus.PAUSED,
    "COMPLETED": JobStatus.COMPLETED,
    "CANCELLED": JobStatus.CANCELED,
    "FAILED": JobStatus.FAILED,
    "TIMEOUT": JobStatus.FAILED,
    "NODE_FAIL": JobStatus.FAILED,
    "OUT_OF_MEMORY": JobStatus.FAILED,
    "BOOT_FAIL": JobStatus.FAILED,
    "DEADLINE": JobStatus.FAILED,
    "PREEMPTED": JobStatus.FAILED,
    "SPECIAL_EXIT": JobStatus.FAILED,
    "REVOKED": JobStatus.CANCELED,
}


def slurm_word(slurm_state: str | None) -> str | None:
    """The state word: scontrol and squeue may add flags ("CANCELLED by 0", "RUNNING+")."""
    if not slurm_state:
        return None
    return re.split(r"[^A-Z_]", slurm_state.upper(), maxsplit=1)[0]


def distrun_status(slurm_state: str | None) -> JobStatus:
    word = slurm_word(slurm_state)
    return JobStatus.UNKNOWN if word is None else SLURM_STATES.get(word, JobStatus.UNKNOWN)
