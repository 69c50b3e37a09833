"""The job orchestrator: what the CLI and the SDK do with jobs, in one place, for every backend.

    plan_job    load -> target -> backend.render(preview)           (`distrun plan`)
    submit_job  target -> preflight -> prepare_job -> render -> schedule   (`job create`, SDK)
    start_child a parent's child (a pipeline's step, a sweep's trial): submit_job, or a parent of
                its own (a pipeline's sweep step) recorded and supervised in the background
    run_job     target -> preflight -> prepare_job -> render -> runner.run_attached  (`distrun run`)
    get_job / list_jobs   the store's records, live engine jobs refreshed through observe
    stream_job  follow a job's per-rank logs until it ends, then its execution summary
    cancel_job  backend.cancel, then wait (grace period + the backend's margin) for the end
    wait_job    wait quietly until a job ends

The faces never ask which engine a job runs on: they call these, and these call the job's
backend (`distrun.backends.registry`) through the contract in `distrun.backends.base`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind

if TYPE_CHECKING:
    from distrun.backends.base import Backend, RenderedJob
    from distrun.loading.loader import LoadedJob
    from distrun.prepare.compute import ComputeTarget
    from distrun.runner.parent_policy import DetachedParent
    from distrun.spec.models import JobSpec
    from distrun.store.index import JobFilter, JobRecord
    from distrun.store.layout import Layout

POLL_SECONDS = 0.2
PREVIEW_NAME = "<generated-name>"


def backend_of(target: ComputeTarget) -> Backend:
    """The target's backend, its settings checked (a misspelled setting is caught before anything runs)."""
    from distrun.backends.registry import backend_for

    backend = backend_for(target.type)
    backend.validate_settings(target.name, target.settings)
    return backend


def _check_restarts(backend: Backend, target: ComputeTarget, spec: JobSpec) -> None:
    """A job with restarts on a backend that cannot restart: an error, not a job that silently runs once."""
    from distrun.restarts.policy import RestartPolicy

    if backend.restarts or not RestartPolicy.of(spec.limits).on:
        return
    raise DistrunError(
        f"compute target {target.name!r} ({backend.engine}) does not restart jobs yet: "
        "limits.max_restarts / limits.max_preemptions cannot be honoured there",
        "remove them (or --max-restarts) to run the job once, or run it on local compute",
    )


def record_backend(layout: Layout, record: JobRecord) -> Backend:
    """The backend of the engine a recorded job was submitted to (its target as recorded)."""
    return _submitted_to(layout, record)[1]


def _submitted_to(layout: Layout, record: JobRecord) -> tuple[ComputeTarget, Backend]:
    """The target the job was submitted to, as it was then, and its backend: looked up once, and
    handed to the backend's `observe` and `cancel`."""
    from distrun.backends.registry import backend_for
    from distrun.prepare.compute import submitted_target

    target = submitted_target(record, layout.config_path)
    return target, backend_for(target.type)


# ---------------------------------------------------------------- starting a job


def check_target(loaded: LoadedJob, layout: Layout, compute: str | None = None) -> tuple[ComputeTarget, Backend]:
    """The job's target (`compute`, else the job's own, else local) and its backend, checked as every
    command that starts or plans a job checks them: the target exists, its settings are valid, its
    backend can honour the job's restarts. The engine itself is not asked (submit's preflight does)."""
    from distrun.prepare.compute import refuse_other_kinds
    from distrun.prepare.submission import choose_target

    target = choose_target(loaded, layout, compute)
    refuse_other_kinds(target, str(loaded.kind))
    backend = backend_of(target)
    _check_restarts(backend, target, loaded.spec)
    return target, backend


def plan_job(loaded: LoadedJob, layout: Layout, compute: str | None = None) -> RenderedJob:
    """What the job would be on its compute target, computed without touching the store or the engine."""
    target, backend = check_target(loaded, layout, compute)
    loaded, said = _spark_ready(loaded, target)
    rendered = backend.plan(loaded, layout, target, loaded.spec.name or PREVIEW_NAME)
    if said:
        rendered = dataclasses.replace(rendered, notes=rendered.notes + said)
    return with_timeout_notes(rendered)


def _spark_ready(loaded: LoadedJob, target: ComputeTarget) -> tuple[LoadedJob, tuple[str, ...]]:
    """A Spark job as the command job that runs spark-submit with the target's master
    (`distrun.runner.spark_jobs`), and what is said of it; any other job as it is."""
    if loaded.kind is not JobKind.SPARK:
        return loaded, ()
    from distrun.runner.spark_jobs import ready_to_run

    spark = ready_to_run(loaded, target)  # type: ignore[arg-type]
    return spark.loaded, spark.notes


def with_timeout_notes(rendered: RenderedJob) -> RenderedJob:
    """The rendered job with a note (and a warning, for the SDK) on which of its timeouts fires first."""
    from distrun.prepare.timeouts import spec_timeouts, timeout_notes

    said = tuple(timeout_notes(spec_timeouts(rendered.job.spec)))
    if not said:
        return rendered
    return dataclasses.replace(rendered, notes=rendered.notes + said, warnings=rendered.warnings + said)


def _prepared(loaded: LoadedJob, layout: Layout, compute: str | None, name: str | None) -> tuple[Backend, RenderedJob]:
    from distrun.prepare.submission import prepare_job

    target, backend = check_target(loaded, layout, compute)
    loaded, said = _spark_ready(loaded, target)
    backend.preflight(target, loaded.spec)  # an engine that cannot take the job: error, nothing recorded
    prepared = prepare_job(loaded, layout, target, name)
    try:
        rendered = backend.render(prepared, layout)
    except DistrunError as exc:
        _not_started(layout, prepared.name, exc.message)
        raise
    except KeyboardInterrupt:
        _canceled_before_running(layout, prepared.name)
        raise
    if said:
        rendered = dataclasses.replace(rendered, notes=rendered.notes + said, warnings=rendered.warnings + said)
    return backend, with_timeout_notes(rendered)


def _canceled_before_running(layout: Layout, name: str) -> None:
    """A stop signal between the job's preparation and its supervisor taking over: Canceled.

    Without this the record would stay Starting until a reader found its launcher gone and
    called it lost (Failed). A job an engine already holds (a `backend_id`) is left to the
    backend, whose own cancel is under way.
    """
    from distrun.store.index import JobIndex

    index = JobIndex(layout.db_path)
    try:
        if not index.get(name).backend_id:
            index.cancel_if_not_running(name, "canceled before it was running")
    except DistrunError:
        pass  # the index cannot be written (a full disk): the record shows the launcher lost


def _not_started(layout: Layout, name: str, message: str) -> None:
    from distrun.core.job_status import JobStatus
    from distrun.store.index import JobIndex

    JobIndex(layout.db_path).update(name, status=JobStatus.FAILED, reason=message, ended_at=time.time())


def submit_job(
    loaded: LoadedJob, layout: Layout, compute: str | None = None, name: str | None = None
) -> tuple[JobRecord, RenderedJob]:
    """Validate, record and start a job in the background (`distrun job create`); returns at once."""
    from distrun.prepare.submission import interrupts_raised

    with interrupts_raised():
        backend, rendered = _prepared(loaded, layout, compute, name)
    return backend.schedule(rendered, layout), rendered


def start_child(
    child: LoadedJob | DetachedParent,
    layout: Layout,
    compute: str | None,
    name: str,
    parent: str,
    say: Callable[[str], None] | None = None,
) -> JobRecord:
    """Start a parent's child as the job `name`, its record naming `parent`: the one entry every
    child starts through (`distrun.runner.parent_run`). A job is submitted as `submit_job` submits
    one; a child that is a parent itself (a pipeline's sweep step) is recorded and supervised in
    the background, as `distrun run -d` starts one. Returns the child's record as started; a Spark
    child's notes (what it does not honour, its UI) go to `say`, as `distrun run` prints a Spark job's."""
    from distrun.runner.detached_parent import start_detached
    from distrun.runner.parent_policy import DetachedParent
    from distrun.store.index import JobIndex

    if isinstance(child, DetachedParent):
        record = start_detached(layout, child)
    else:
        record, rendered = submit_job(child, layout, compute, name)
        if say is not None and child.kind is JobKind.SPARK:
            for text in rendered.warnings:
                say(text)
    JobIndex(layout.db_path).update(name, only_if_not_terminal=False, parent=parent)
    return record


def run_job(
    loaded: LoadedJob, layout: Layout, out: BinaryIO, color: bool, compute: str | None = None, name: str | None = None
) -> JobRecord:
    """`distrun run`: start the job and stream every rank's lines until it ends; returns the final record."""
    from distrun.prepare.submission import interrupts_raised
    from distrun.runner.attach import run_attached

    # From the record's creation until the supervisor holds the stop signals itself, Ctrl-C,
    # SIGTERM and SIGHUP raise KeyboardInterrupt, so the record can end Canceled.
    with interrupts_raised():
        backend, rendered = _prepared(loaded, layout, compute, name)
        if loaded.kind is JobKind.SPARK:  # its notes and the Spark UI's address, before the stream
            out.write("".join(f"distrun: note: {text}\n" for text in rendered.warnings).encode())
        try:
            return run_attached(backend, rendered, layout, out, color)
        except KeyboardInterrupt:
            _canceled_before_running(layout, rendered.job.name)
            final = _final_record(layout, rendered.job.name)
            if final is None:
                raise
            return final  # it had ended already: the late signal does not change its outcome


def _final_record(layout: Layout, name: str) -> JobRecord | None:
    from distrun.store.index import JobIndex

    try:
        record = JobIndex(layout.db_path).get(name)
    except DistrunError:
        return None
    return record if record.terminal and record.status != "Canceled" else None


# ---------------------------------------------------------------- reading jobs


# How often this process asks an engine about one live job. A parent's loop and the followers of
# its children's output (`distrun run` of a pipeline on Slurm) all read the same children: asked
# once per job per half second, slurmctld gets two lookups a second per running step however
# many readers there are, and each reader gets the record as that last look wrote it.
OBSERVE_EVERY_S = 0.5
_observed: dict[tuple[str, str], float] = {}  # (jobs.db, job) -> when its engine was last asked
_observed_lock = threading.Lock()


def refresh(layout: Layout, record: JobRecord) -> JobRecord:
    """A live engine job's record brought up to date from its engine (at most every
    OBSERVE_EVERY_S in this process: else as the last look wrote it); any other record as it is.
    A Spark job's record gets its application id once its driver named it."""
    if record.kind is JobKind.SPARK:
        from distrun.runner.spark_app import with_application_id
        from distrun.store.index import JobIndex

        record = with_application_id(JobIndex(layout.db_path), record)
    if record.terminal or not record.backend_id:
        return record
    from distrun.backends.cluster import refreshed

    key, now = (str(layout.db_path), record.name), time.monotonic()
    with _observed_lock:
        if now - _observed.get(key, -OBSERVE_EVERY_S) < OBSERVE_EVERY_S:
            return record
        _observed[key] = now
    try:
        target, backend = _submitted_to(layout, record)
    except DistrunError:
        return record  # the target was removed from config.yaml: show the record as last known
    return refreshed(backend, record, layout, target)


def get_job(layout: Layout, name: str) -> JobRecord:
    from distrun.store.index import JobIndex

    return refresh(layout, JobIndex(layout.db_path).get(name))


def list_jobs(layout: Layout, limit: int = 50, where: JobFilter | None = None) -> list[JobRecord]:
    from distrun.store.index import JobIndex

    return [refresh(layout, record) for record in JobIndex(layout.db_path).list(limit, where)]


def refuse_pipeline_logs(record: JobRecord) -> None:
    """A pipeline's or sweep's record runs no process: its steps' or trials' jobs have the logs. Said,
    with their names."""
    if not record.kind.has_children:
        return
    jobs = [str(state.get("job")) for state in (record.steps or {}).values()]
    children = record.kind.children
    raise DistrunError(
        f"{record.name} is {record.kind.a_noun}: it has no logs of its own, each of its {children}' jobs has",
        f"e.g. `distrun logs {jobs[0]}`; its {children}' jobs: {', '.join(jobs)}" if jobs else "",
    )


def fetch_logs(layout: Layout, record: JobRecord) -> None:
    """Bring the job's per-rank logs into its folder (engines without a shared filesystem)."""
    try:
        record_backend(layout, record).fetch_logs(record, layout)
    except DistrunError:
        pass  # logs as last fetched


def is_finished(layout: Layout, name: str) -> Callable[[], bool]:
    """For a log follower: True once the job ended; brings its logs into the folder on each look."""

    def finished() -> bool:
        record = get_job(layout, name)
        fetch_logs(layout, record)
        return record.terminal

    return finished


def stream_job(layout: Layout, name: str, out: BinaryIO, say: Callable[[str], None], color: bool = False) -> JobRecord:
    """`distrun job stream`: say the header, follow every rank's log until the job ends, say the summary."""
    from distrun.runner.follow import follow_logs
    from distrun.runner.report import execution_summary

    record = get_job(layout, name)
    refuse_pipeline_logs(record)
    say(f"RunId: {record.name}\nStreaming {record.folder}/user_logs")
    follow_logs(layout.job(record.name), out, is_finished(layout, record.name), color=color, stop_when_unread=True)
    out.flush()
    final = get_job(layout, record.name)
    say(execution_summary(final))
    return final


def wait_job(layout: Layout, name: str) -> JobRecord:
    """Wait quietly until a job ends."""
    while True:
        record = get_job(layout, name)
        if record.terminal:
            return record
        time.sleep(POLL_SECONDS)


# ---------------------------------------------------------------- stopping a job


def cancel_job(layout: Layout, name: str) -> JobRecord:
    """`distrun job cancel`: ask the job's backend to stop it, and wait (bounded) for its final record.

    A job that already ended is left as it is (also when racing the job's own end).
    """
    try:
        record = get_job(layout, name)
    except DistrunError as exc:  # not in the index (removed, replaced) or a damaged record
        from distrun.runner.unrecorded_cancel import cancel_unrecorded

        return cancel_unrecorded(layout, name, exc, _grace_seconds(layout, name))
    if record.terminal:
        return record
    if record.kind.has_children:  # a pipeline or sweep: its supervisor cancels each running child's job
        from distrun.runner.pipeline_cancel import cancel_pipeline

        return cancel_pipeline(layout, record)
    target, backend = _submitted_to(layout, record)
    backend.cancel(record, layout, target)
    give_up = time.monotonic() + _grace_seconds(layout, name) + backend.cancel_wait_s
    while time.monotonic() < give_up:
        record = get_job(layout, name)
        if record.terminal:
            return record
        time.sleep(0.1)
    return get_job(layout, name)


def _grace_seconds(layout: Layout, name: str) -> float:
    """The job's grace period (0 means 0), from its resolved job in the folder; the default if unreadable."""
    from distrun.core.safe_files import read_text
    from distrun.spec.models import DEFAULT_GRACE_PERIOD

    # job.json is in the job's folder, which its processes can write: read it bounded and never
    # through a link or a pipe, and take only a number from it.
    try:
        spec = json.loads(read_text(layout.job(name).job_json))
        grace = (spec.get("limits") or {}).get("grace_period")
        return DEFAULT_GRACE_PERIOD if grace is None else float(grace)
    except (OSError, ValueError, TypeError, AttributeError):
        return DEFAULT_GRACE_PERIOD
