"""What every cluster backend shares: node outcomes -> the job's record.

A cluster job runs one node agent per node; each publishes a `NodeOutcome`. The backend's
`observe` turns its engine's state and those outcomes into an `Observation` (with
`first_failure` to name the root cause across nodes); `refreshed` writes that observation into
the job's record (`distrun job show`, and `distrun run` following a job an engine runs).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from distrun.agent.node_facts import NodeOutcome
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.metrics.tracking import finish_run
from distrun.store.index import JobIndex, JobRecord

if TYPE_CHECKING:
    from distrun.backends.base import Backend
    from distrun.backends.values import Observation
    from distrun.prepare.compute import ComputeTarget
    from distrun.store.layout import Layout


def first_failure(outcomes: Sequence[NodeOutcome]) -> NodeOutcome | None:
    """The failed node outcome whose failure happened first, by wall clock across nodes.

    A rank failing on one node makes its peers on other nodes fail too (closed connections)
    a moment later, or be stopped by the engine: the earliest failure is the cause. Outcomes with
    a root cause (a rank that failed) come before those without (a node that could not start).
    """
    failed = [o for o in outcomes if o.status == JobStatus.FAILED]
    if not failed:
        return None
    return min(failed, key=lambda o: (not o.root_cause, o.failed_at or float("inf"), o.node_rank))


def merged_processes(outcomes: Sequence[NodeOutcome]) -> list[dict[str, Any]]:
    """Every node's processes, in node-rank then rank order: the record's `processes`."""
    procs = [dict(p) for o in outcomes for p in o.processes]
    return sorted(procs, key=lambda p: (p.get("node_rank", 0), p.get("rank") if p.get("rank") is not None else -1))


def record_changes(record: JobRecord, seen: Observation, now: float) -> dict[str, Any]:
    """The fields of `record` that `seen` changes (none when the record is up to date). Pure."""
    fields: dict[str, Any] = {}
    if seen.status != record.status:
        fields["status"] = seen.status
    if seen.reason != (record.reason or ""):
        fields["reason"] = seen.reason
    live = seen.status in (JobStatus.RUNNING, JobStatus.FINALIZING)
    if record.started_at is None and (seen.started_at or live):
        fields["started_at"] = seen.started_at or now
    if seen.attempts is not None and seen.attempts != (record.attempts or []):
        fields["attempts"] = seen.attempts
    if seen.terminal:
        fields["root_cause"] = seen.root_cause
        fields["processes"] = merged_processes(seen.outcomes)
        ended = seen.ended_at or max((o.ended_at or 0 for o in seen.outcomes), default=0)
        fields["ended_at"] = ended or now
    return fields


def refreshed(backend: Backend, record: JobRecord, layout: Layout, target: ComputeTarget) -> JobRecord:
    """A live engine job's record brought up to date through `backend.observe` (and written down);
    `target` is the job's compute target as it was submitted.

    An engine that does not answer changes nothing: the record stays as it was.
    """
    if record.terminal or not record.backend_id:
        return record
    try:
        seen = backend.observe(record, layout, target)
    except DistrunError:
        return record
    if seen is None:
        return record
    fields = record_changes(record, seen, time.time())
    if fields:
        changed = JobIndex(layout.db_path).update(record.name, **fields)
        record = dataclasses.replace(record, **fields)
        if changed and record.terminal:
            # The reader that saw the end (`distrun run`, `job list`, the UI...) closes the job's MLflow run.
            finish_run(layout.job(record.name), record.status)
    return record
