"""Text a user reads about a job: the stream's head and its execution summary."""

from __future__ import annotations

from distrun.core.job_status import JobStatus
from distrun.core.terminal_text import neutral_text
from distrun.store.index import JobRecord

RULE = "=" * 60


def stream_header(record: JobRecord, process_count: int, node_count: int) -> str:
    nodes = "1 node" if node_count == 1 else f"{node_count} nodes"
    procs = "1 process" if process_count == 1 else f"{process_count} processes"
    return f"RunId: {record.name}\nStreaming {record.folder}/user_logs ({procs} on {nodes})\n{RULE}"


def summary_head(record: JobRecord) -> list[str]:
    """The lines every execution summary starts with: the run, its status, duration and reason."""
    lines = ["", "Execution Summary", RULE, f"RunId: {record.name}", f"Status: {record.status}"]
    duration = job_duration(record)
    if duration is not None:
        lines.append(f"Duration: {duration_text(duration)}")
    if record.status != JobStatus.COMPLETED and record.reason:
        lines.append(f"Reason: {record.reason}")
    return lines


def execution_summary(record: JobRecord) -> str:
    lines = summary_head(record)
    if record.attempts and len(record.attempts) > 1:  # a job that restarted (distrun.restarts.policy)
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
        processes = record.processes or []
        stopped = [p["name"] for p in processes if p.get("stopped_by_distrun") and not p.get("never_started")]
        if stopped:
            lines.append(f"Stopped by distrun: {', '.join(stopped)}")
        unstarted = [p["name"] for p in processes if p.get("never_started")]
        if unstarted:
            lines.append(f"Not started (stopped before their turn): {', '.join(unstarted)}")
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


def duration_text(seconds: float) -> str:
    """A job's duration as its summary, `job show` and `job list` all say it: `4.20 s`, and from a
    minute on with minutes too, `185.23 s (3m05s)`."""
    said = f"{seconds:.2f} s"
    if seconds < 60:
        return said
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{said} ({hours}h{minutes:02d}m{secs:02d}s)" if hours else f"{said} ({minutes}m{secs:02d}s)"


def job_duration(record: JobRecord) -> float | None:
    """Seconds from start to end; never shorter than the time at which a process ended (the
    record's start is noted once the processes are up, their times count from their launch)."""
    if not (record.started_at and record.ended_at):
        return None
    ended = [p.get("after_ms") or 0.0 for p in record.processes or []]
    if record.root_cause:
        ended.append(record.root_cause.get("after_ms") or 0.0)
    return max(record.ended_at - record.started_at, max(ended, default=0.0) / 1000)
