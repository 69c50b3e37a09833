"""What every cluster backend shares: node outcomes -> the job's record, and run-and-stream.

A cluster job runs one node agent per node; each publishes a `NodeOutcome`. The backend's
`observe` turns its engine's state and those outcomes into an `Observation` (with
`first_failure` to name the root cause across nodes); `refreshed` writes that observation into
the job's record; `run_attached` is `distrun run` for a job an engine runs: schedule it, stream
every rank's log file while it runs, cancel it on Ctrl-C, print the summary.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Protocol

from distrun.agent.node_facts import NodeOutcome
from distrun.errors import DistrunError
from distrun.follow import follow_logs
from distrun.job_status import JobStatus
from distrun.metrics.tracking import finish_run
from distrun.report import execution_summary, stream_header
from distrun.store.index import JobIndex, JobRecord

if TYPE_CHECKING:
    from distrun.backends.values import Observation, RenderedJob
    from distrun.store.layout import Layout

# How often `distrun run` asks the engine about a job it streams.
POLL_S = 0.5


class EngineBackend(Protocol):
    """What the logic here asks of a backend: every `distrun.backends.base.Backend` is one.

    Named by its calls, not imported: the contract's default `run_attached` is `run_attached` here.
    """

    engine: ClassVar[str]
    cancel_command: ClassVar[str]

    def schedule(self, rendered: RenderedJob, layout: Layout) -> JobRecord: ...

    def observe(self, record: JobRecord, layout: Layout) -> Observation | None: ...

    def cancel(self, record: JobRecord, layout: Layout) -> None: ...

    def fetch_logs(self, record: JobRecord, layout: Layout) -> None: ...


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


def refreshed(backend: EngineBackend, record: JobRecord, layout: Layout) -> JobRecord:
    """A live engine job's record brought up to date through `backend.observe` (and written down).

    An engine that does not answer changes nothing: the record stays as it was.
    """
    if record.terminal or not record.backend_id:
        return record
    try:
        seen = backend.observe(record, layout)
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


def run_attached(
    backend: EngineBackend, rendered: RenderedJob, layout: Layout, out: BinaryIO, color: bool
) -> JobRecord:
    """`distrun run` on an engine: schedule, stream every rank's lines while it runs, summarize.

    Ctrl-C (or SIGTERM) cancels the job, as it cancels a local one, and the stream goes on
    until the engine has ended it; a second Ctrl-C stops waiting.
    """
    job = rendered.job
    record = backend.schedule(rendered, layout)
    processes = sum(1 for _ in rendered.plan.processes())
    head, rule = stream_header(record, processes, job.spec.node_count).rsplit("\n", 1)
    out.write(f"{head}\n{backend.engine} job {record.backend_id} on compute {job.target.name}\n{rule}\n".encode())
    out.flush()
    watch = EngineWatch(backend, layout, job.name, out)
    previous = {sig: signal.signal(sig, watch.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        follow_logs(job.folder, out, watch.finished, color=color)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    record = refreshed(backend, JobIndex(layout.db_path).get(job.name), layout)
    out.write((execution_summary(record) + "\n").encode())
    out.flush()
    return record


class EngineWatch:
    """The log follower's "is it over?" for a job an engine runs.

    Asks the engine at most every POLL_S (and brings the logs into the job folder), says when
    the job waits (Queued and the engine's reason), and turns an interrupt into a cancel
    without leaving the log stream.
    """

    def __init__(self, backend: EngineBackend, layout: Layout, name: str, out: BinaryIO) -> None:
        self.backend = backend
        self.layout = layout
        self.index = JobIndex(layout.db_path)
        self.name = name
        self.out = out
        self.last_check = 0.0
        self.done = False
        self.shown = ("", "")
        self.interrupted = 0
        self.signal_name = ""
        self.canceled = False

    def interrupt(self, signum: int, frame: object) -> None:
        self.interrupted += 1
        self.signal_name = signal.Signals(signum).name
        if self.interrupted > 1:
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting (the job is canceled already)

    def finished(self) -> bool:
        if self.interrupted and not self.canceled:
            self.canceled = True
            how = f" ({self.backend.cancel_command})" if self.backend.cancel_command else ""
            self._say(f"{self.signal_name} received, canceling the {self.backend.engine} job{how}")
            record = self.index.get(self.name)
            if record.backend_id and not record.terminal:
                self.backend.cancel(record, self.layout)
        now = time.monotonic()
        if self.done or now - self.last_check < POLL_S:
            return self.done
        self.last_check = now
        record = refreshed(self.backend, self.index.get(self.name), self.layout)
        self.backend.fetch_logs(record, self.layout)
        self.done = record.terminal
        seen = (str(record.status), record.reason or "")
        if not self.done and seen != self.shown and record.status != JobStatus.RUNNING:
            self._say(
                f"{self.backend.engine} job {record.backend_id}: {record.status}" + (f" ({seen[1]})" if seen[1] else "")
            )
        self.shown = seen
        return self.done

    def _say(self, text: str) -> None:
        self.out.write(f"distrun: {text}\n".encode())
        self.out.flush()
