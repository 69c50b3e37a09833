"""What `schedule` does when a job cannot be handed to its engine: the same for every backend."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.store.index import JobIndex


@contextmanager
def recorded_as_not_submitted(index: JobIndex, job_name: str, files: str) -> Iterator[None]:
    """Around the steps that submit a job: a DistrunError or OSError marks the job Failed with
    "not submitted: ..." (never left Preparing with half its files) and is raised as a DistrunError,
    so the user sees what went wrong and not a traceback. `files` names what was being written."""
    try:
        yield
    except (DistrunError, OSError) as exc:
        message = exc.message if isinstance(exc, DistrunError) else f"could not write {files}: {exc}"
        index.update(job_name, status=JobStatus.FAILED, reason=f"not submitted: {message}", ended_at=time.time())
        if isinstance(exc, DistrunError):
            raise
        raise DistrunError(f"not submitted: {message}") from None
