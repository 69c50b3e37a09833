"""A job that cannot be handed to its engine ends Failed, "not submitted", with a clear error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from distrun.backends.submission_failure import recorded_as_not_submitted
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.store.index import JobIndex, JobRecord


def _index(tmp_path: Path) -> JobIndex:
    index = JobIndex(tmp_path / "jobs.db")
    index.insert(JobRecord("j", JobStatus.of("Preparing"), "c", str(tmp_path / "j"), time.time()))
    return index


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (DistrunError("the cluster did not answer"), "not submitted: the cluster did not answer"),
        (PermissionError("denied"), "not submitted: could not write the job's files: denied"),
    ],
    ids=["engine-error", "file-error"],
)
def test_a_failed_submission_is_recorded_and_raised_as_a_distrun_error(
    tmp_path: Path, error: Exception, reason: str
) -> None:
    index = _index(tmp_path)
    with pytest.raises(DistrunError) as raised, recorded_as_not_submitted(index, "j", "the job's files"):
        raise error
    assert raised.value.message == reason.removeprefix("not submitted: ") or raised.value.message == reason
    record = index.get("j")
    assert record.status == JobStatus.FAILED and record.reason == reason and record.ended_at is not None


def test_a_submission_that_works_leaves_the_record_alone(tmp_path: Path) -> None:
    index = _index(tmp_path)
    with recorded_as_not_submitted(index, "j", "the job's files"):
        pass
    assert index.get("j").status == JobStatus.of("Preparing")
