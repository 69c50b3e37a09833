"""Text a user reads about a job: the stream's head and its execution summary."""

from __future__ import annotations

from distrun.job_status import JobStatus
from distrun.store.index import JobRecord

RULE = "=" * 60


def stream_header(record: JobRecord, process_count: int, node_count: int) -> str:
    nodes = "1 node" if node_count == 1 else f"{node_count} nodes"
    procs = "1 process" if process_count == 1 else f"{process_count} processes"
    return f"RunId: {record.name}\nStreaming {record.folder}/user_logs ({procs} on {nodes})\n{RULE}"


def execution_summary(record: JobRecord) -> str:
    lines = ["", "Execution Summary", RULE, f"RunId: {record.name}", f"Status: {record.status}"]
    if record.started_at and record.ended_at:
        lines.append(f"Duration: {record.ended_at - record.started_at:.2f} s")
    if record.status != JobStatus.COMPLETED and record.reason:
        lines.append(f"Reason: {record.reason}")
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
        lines.append(f"Log: {cause.get('log')}")
    else:
        lines.append(f"Logs: {record.folder}/user_logs")
    return "\n".join(lines)


def environment_note(environment: object) -> str | None:
    if environment is None or _runs_in_own_environment(environment):
        return None
    import sys

    shown = environment if isinstance(environment, str) else "(inline environment)"
    return (
        f"distrun: local compute runs in this Python environment ({sys.executable}); "
        f"environment {shown} is kept for image-based backends"
    )


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
