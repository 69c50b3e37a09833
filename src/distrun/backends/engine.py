"""The engine family of backends (Slurm, Kubernetes): an engine takes the job and keeps its state.

distrun hands the job to the engine (`schedule` records the engine's id as `backend_id`) and
from then on asks the engine about it (`observe`). Until the engine has the job there is no
one to ask: such a record has nothing to observe, and canceling it is only writing it down.
Those rules are written here once. `distrun run` on an engine is `schedule`, then following
the per-rank log files while `observe` says the job is live (`distrun.runner.attach`).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import TYPE_CHECKING

from distrun.backends.base import Backend
from distrun.core.job_status import JobStatus
from distrun.store.index import JobIndex, JobRecord

if TYPE_CHECKING:
    from distrun.backends.values import Observation
    from distrun.prepare.compute import ComputeTarget
    from distrun.store.layout import Layout

NOT_SUBMITTED = "canceled before it was submitted"


class EngineBackend(Backend):
    """A backend whose engine holds the job once `schedule` submitted it (a record with a `backend_id`)."""

    def observe(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        """The engine's view of a submitted job; a record the engine never got has none."""
        if not record.backend_id:
            return None
        return self.observe_submitted(record, layout, target)

    @abstractmethod
    def observe_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        """`observe` for a record with a `backend_id`: the engine is asked (see `Backend.observe`)."""

    def cancel(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """A job the engine never got is recorded Canceled at once; a submitted one is the engine's to stop."""
        if not record.backend_id:
            JobIndex(layout.db_path).update(
                record.name, status=JobStatus.CANCELED, reason=NOT_SUBMITTED, ended_at=time.time()
            )
            return
        self.cancel_submitted(record, layout, target)

    @abstractmethod
    def cancel_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """`cancel` for a record with a `backend_id`: note the request where `observe` sees it, then ask the engine."""
