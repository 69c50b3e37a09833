"""Text a user reads about a job: the stream's head and its execution summary."""

from __future__ import annotations

from distrun.job_status import JobStatus
from distrun.store.index import JobRecord
from distrun.terminal_text import neutral_text

RULE = "=" * 60


def stream_header(record: JobRecord, process_count: int, node_count: int) -> str:
    nodes = "1 node" if node_count == 1 else f"{node_count} nodes"
    procs = "1 process" if process_count == 1 else f"{process_count} processes"
    return f"RunId: {record.name}\nStreaming {record.folder}/user_logs ({procs} on {nodes})\n{RULE}"


def execution_summary(record: JobRecord) -> str:
    lines = ["", "Execution Summary", RULE, f"RunId: {record.name}", f"Status: {record.status}"]
    duration = job_duration(record)
    if duration is not None:
        lines.append(f"Duration: {duration:.2f} s")
    if record.status != JobStatus.COMPLETED and record.reason:
        lines.append(f"Reason: {record.reason}")
    if record.attempts and len(record.attempts) > 1:  # a job that restarted (distrun.restarts)
        lines.append(f"Attempts: {len(record.attempts)}")
        lines.extend(f"  attempt {a.get('attempt')}: {a.get('status')}, {a.get('reason')}" for a in record.attempts)
    cause = record.root_cause
    if cause:
        after = cause.get("after_ms")
        if after is not None:
            lines.append(
                f"Failed first: {cause.get('name')} on node {cause.get('node_rank')} "
                f"({cause.get('host')}) after {after / 1000:.2f} s"
            )
        stopped = [p["name"] for p in record.processes or [] if p.get("stopped_by_distrun")]
        if stopped:
            lines.append(f"Stopped by distrun: {', '.join(stopped)}")
        if cause.get("traceback"):
            lines.append("Traceback:")
            lines.extend("  " + line for line in cause["traceback"].splitlines())
        elif cause.get("log_tail"):
            lines.append("Last lines of its log:")
            lines.extend("  " + line for line in cause["log_tail"].splitlines())
        lines.append(f"Log: {cause.get('log')}")
    else:
        lines.append(f"Logs: {record.folder}/user_logs")
    # The reason and the traceback are a job's own text: shown, never obeyed, by the terminal.
    return neutral_text("\n".join(lines))


def job_duration(record: JobRecord) -> float | None:
    """Seconds from start to end; never shorter than the time at which a process ended (the
    record's start is noted once the processes are up, their times count from their launch)."""
    if not (record.started_at and record.ended_at):
        return None
    ended = [p.get("after_ms") or 0.0 for p in record.processes or []]
    if record.root_cause:
        ended.append(record.root_cause.get("after_ms") or 0.0)
    return max(record.ended_at - record.started_at, max(ended, default=0.0) / 1000)


def environment_note(environment: object) -> str | None:
    if environment is None or _runs_in_own_environment(environment):
        return None
    import sys

    shown = environment if isinstance(environment, str) else "(inline environment)"
    return (
        f"local compute runs in this Python environment ({sys.executable}); "
        f"environment {shown} is kept for image-based backends"
    )


# Keys of the schema that distrun accepts and records but that nothing here acts on.
_UNUSED_KEYS = (
    ("services", ("services",)),
    ("identity", ("identity",)),
    ("queue_settings", ("queue_settings",)),
    ("resources.instance_type", ("resources", "instance_type")),
    ("resources.shm_size", ("resources", "shm_size")),
    ("resources.docker_args", ("resources", "docker_args")),
)


def unused_keys_note(spec: object, compute: str) -> str | None:
    """One line naming every key the job sets that has no meaning on `compute` (as the SDK
    notes ignored arguments once), or None."""
    given = []
    for shown, path in _UNUSED_KEYS:
        value: object = spec
        for part in path:
            value = getattr(value, part, None)
        if value is not None:
            given.append(shown)
    if not given:
        return None
    return f"{', '.join(given)}: no meaning on {compute} compute; recorded with the job, not used"


def local_notes(spec: object) -> list[str]:
    """What `run` and `plan` say once about a job on local compute."""
    notes = [environment_note(getattr(spec, "environment", None)), unused_keys_note(spec, "local")]
    return [note for note in notes if note]


def _runs_in_own_environment(environment: object) -> bool:
    """A conda_file, or a name config.yaml maps: the ranks run there, and the build says so."""
    if not isinstance(environment, str):
        return getattr(environment, "conda_file", None) is not None
    from distrun.environments.named import find_named
    from distrun.store.layout import distrun_home

    try:
        named = find_named(environment, distrun_home() / "config.yaml")
    except Exception:  # a broken config.yaml is reported where the job is validated
        return False
    return named is not None and ("conda_file" in named.body or "python" in named.body)
