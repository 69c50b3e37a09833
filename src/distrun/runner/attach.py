"""`distrun run`: one job, attached to this terminal, on any backend; the only place that prints for it.

The header (RunId, where the logs are, how many processes on how many nodes), every rank's
lines, Ctrl-C and the Execution Summary are written here, once, whichever backend runs the job.
Backends start the job and report records; they never print. How the lines reach the terminal
depends on the backend's family:

    engine      (`EngineBackend`: Slurm, Kubernetes) `schedule`, then follow the per-rank log
                files while `observe` says the job is live (bringing them in with `fetch_logs`);
                Ctrl-C or SIGTERM cancels the job through its engine and the stream goes on
                until the engine has ended it; a second one stops waiting
    supervised  (`SupervisedBackend`: local, Ray) `supervise` runs the job in this process and
                writes every rank's lines as they come; a stop signal reaches the supervisor,
                which stops the job
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, BinaryIO

from distrun.agent.stop_signals import held_stop_signals
from distrun.agent.terminal_output import NonBlockingOutput, say
from distrun.backends.cluster import refreshed
from distrun.backends.engine import EngineBackend
from distrun.backends.supervised import SupervisedBackend
from distrun.core.job_status import JobStatus
from distrun.runner.follow import follow_logs
from distrun.runner.report import execution_summary, stream_header
from distrun.store.index import JobIndex

if TYPE_CHECKING:
    from distrun.backends.base import Backend
    from distrun.backends.values import RenderedJob
    from distrun.plan.model import LaunchPlan
    from distrun.prepare.submission import PreparedJob
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

# How often `distrun run` asks the engine about a job it streams.
POLL_S = 0.5


def run_attached(backend: Backend, rendered: RenderedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    """`distrun run` after the job was prepared and rendered: start it, stream it, summarize it; the final record."""
    if isinstance(backend, SupervisedBackend):
        return _supervised(backend, rendered, layout, out, color)
    if isinstance(backend, EngineBackend):
        return _on_engine(backend, rendered, layout, out, color)
    raise TypeError(f"{type(backend).__name__} is neither an EngineBackend nor a SupervisedBackend")


# ---------------------------------------------------------------- a job supervised here


def _supervised(
    backend: SupervisedBackend, rendered: RenderedJob, layout: Layout, out: BinaryIO, color: bool
) -> JobRecord:
    """The supervisor streams every line from the ranks' pipes; the header comes once the plan is known."""
    prepared = rendered.job

    def header(plan: LaunchPlan) -> None:
        record = JobIndex(layout.db_path).get(prepared.name)
        lines = [f"distrun: {text}" for text in backend.attached_notes(rendered, plan)]
        lines += [f"distrun: note: {text}" for text in _timeout_notes(rendered)]
        lines.append(stream_header(record, plan.process_count(), len(plan.nodes)))
        say(out, "\n".join(lines))

    live = NonBlockingOutput.wrap(out)  # a reader that stops reading never stalls supervision
    record = backend.supervise(rendered, layout, live, color, header)  # type: ignore[arg-type]
    # The record is final: a stop signal now (a `job cancel` that raced the job's own end)
    # changes nothing, so it is held and dropped rather than cutting the summary short.
    with held_stop_signals():
        if isinstance(live, NonBlockingOutput):
            live.finish()  # the record is written: now the reader may take its time
        say(out, execution_summary(record))
        backend.finished(rendered, record)  # after the summary: the user does not wait on it
    return record


def _timeout_notes(rendered: RenderedJob) -> list[str]:
    """Which of the job's timeouts fires first, where the user should know (`distrun.prepare.timeouts`)."""
    from distrun.prepare.timeouts import spec_timeouts, timeout_notes

    return timeout_notes(spec_timeouts(rendered.job.spec))


# ---------------------------------------------------------------- a job an engine runs


def _on_engine(backend: EngineBackend, rendered: RenderedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    job = rendered.job
    record = backend.schedule(rendered, layout)
    head, rule = stream_header(record, rendered.plan.process_count(), job.spec.node_count).rsplit("\n", 1)
    timeouts = _timeout_notes(rendered)
    # The engine's own warnings (a Slurm job's containers), then which timeout fires first.
    notes = [text for text in rendered.warnings if text not in timeouts] + timeouts
    said = "".join(f"distrun: note: {text}\n" for text in notes)
    say(out, f"{said}{head}\n{backend.engine} job {record.backend_id} on compute {job.target.name}\n{rule}")
    watch = EngineWatch(backend, layout, job, out)
    previous = {sig: signal.signal(sig, watch.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        follow_logs(job.folder, out, watch.finished, color=color)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    record = refreshed(backend, JobIndex(layout.db_path).get(job.name), layout, job.target)
    say(out, execution_summary(record))
    return record


class EngineWatch:
    """The log follower's "is it over?" for a job an engine runs.

    Asks the engine at most every POLL_S (and brings the logs into the job folder), says when
    the job waits (Queued and the engine's reason), and turns an interrupt into a cancel
    without leaving the log stream.
    """

    def __init__(self, backend: EngineBackend, layout: Layout, job: PreparedJob, out: BinaryIO) -> None:
        self.backend = backend
        self.layout = layout
        self.index = JobIndex(layout.db_path)
        self.name = job.name
        self.target = job.target  # the job's compute target, for the engine's observe and cancel
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
                self.backend.cancel(record, self.layout, self.target)
        now = time.monotonic()
        if self.done or now - self.last_check < POLL_S:
            return self.done
        self.last_check = now
        record = refreshed(self.backend, self.index.get(self.name), self.layout, self.target)
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
        say(self.out, f"distrun: {text}")
