"""What the SDK's job types (command, pipeline, sweep) share: Azure ML's job header fields, and
what `MLClient.jobs` fills in from the store once a job is submitted (`submitted_state`)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from distrun.sdk.notices import Recorded


@dataclass(frozen=True)
class CreationContext:
    created_at: datetime.datetime


class JobHeader(Recorded):
    """A job of the SDK: its header fields, and its state once submitted (None until then)."""

    status: str | None = None
    studio_url: str | None = None
    creation_context: CreationContext | None = None
    reason: str | None = None  # distrun: why the job ended as it did
    root_cause: dict[str, Any] | None = None  # distrun: the process that failed first

    def _set_header(
        self,
        *,
        name: str | None,
        display_name: str | None,
        experiment_name: str | None,
        description: str | None,
        tags: dict[str, Any] | None,
        properties: dict[str, Any] | None,
    ) -> None:
        self.name = name
        self.display_name = display_name
        self.experiment_name = experiment_name
        self.description = description
        self.tags = dict(tags or {})
        self.properties = dict(properties or {})


_Job = TypeVar("_Job", bound=JobHeader)


def submitted_state(job: _Job, record: Any, folder: Path) -> _Job:
    """`job` with what the store knows of it as submitted: its name, status, reason and times."""
    job.name = record.name
    job.display_name = job.display_name or record.display_name
    job.experiment_name = job.experiment_name or record.experiment_name
    job.status = str(record.status)
    job.reason = record.reason
    job.root_cause = record.root_cause
    job.studio_url = folder.as_uri()
    job.creation_context = CreationContext(datetime.datetime.fromtimestamp(record.created_at).astimezone())
    return job
