"""What a job page shows, as plain data: timeline, per-rank rows, the plan, the failure banner.

Read from the job's record and the files of its folder. The job's own processes can write
into that folder, so every file read here is bounded and may be missing or garbled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from distrun.runner.report import job_duration
from distrun.store.index import JobRecord
from distrun.store.layout import JobFolder
from distrun.ui.job_files import FileText, read_head, read_json

MAX_FILE_BYTES = 4 << 20  # job.yml / plan.json shown at most this big
MAX_PLAN_PROCESSES = 256  # a 1024 x 8 plan is shown in part
# The plan's processes shown at most this many characters in all (each one's environment is
# shown whole): a plan the job rewrote with a huge shared environment stays a bounded page.
MAX_PLAN_CHARS = 2 << 20
MAX_VALUE_CHARS = 4096  # one environment value or command line, cut beyond this


@dataclass
class RankRow:
    name: str
    label: str
    node_rank: int | None
    local_rank: int | None
    rank: int | None
    log_name: str | None
    pid: int | None = None
    state: str = ""
    exit: str = ""
    started: float | None = None
    ended: float | None = None


@dataclass
class PlanView:
    command: str = ""
    world_size: int | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    hidden: int = 0  # processes left out of a very large plan


def clock(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def duration(record: JobRecord, now: float | None = None) -> str:
    start = record.started_at
    if start is None:
        return ""
    if record.terminal:
        # The same figure as `job show` and the execution summary: never shorter than the time
        # at which a process ended ("failed first after N s" on the same page).
        ended = job_duration(record)
        if ended is None:
            return ""
        seconds = ended
    else:
        seconds = max(0.0, (now or time.time()) - start)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def timeline(record: JobRecord) -> list[tuple[str, str]]:
    """(what, when) for each step the job has reached."""
    steps = [("Queued", clock(record.created_at))]
    if record.started_at is not None:
        steps.append(("Running", clock(record.started_at)))
    if record.terminal:
        steps.append((record.status, clock(record.ended_at)))
    elif record.status not in ("Queued", "Running"):
        steps.append((record.status, "now"))
    return steps


def read_plan(folder: JobFolder) -> tuple[dict[str, Any], str]:
    """The job's plan, and why it is {} when it could not be read ("" while it is not written)."""
    return read_json(folder, folder.plan_json, MAX_FILE_BYTES)


def job_yaml(folder: JobFolder) -> FileText:
    return read_head(folder, folder.job_yaml, MAX_FILE_BYTES)


def plan_view(plan: dict[str, Any]) -> PlanView:
    view = PlanView(command=_cut(plan.get("command") or ""), world_size=plan.get("world_size"))
    shared = plan.get("shared_env") if isinstance(plan.get("shared_env"), dict) else {}
    count = 0
    chars = 0
    for node in _list(plan.get("nodes")):
        for proc in _list(node.get("processes") if isinstance(node, dict) else None):
            if not isinstance(proc, dict):
                continue
            count += 1
            if count > MAX_PLAN_PROCESSES or chars > MAX_PLAN_CHARS:
                continue
            env = {**shared, **(proc.get("env") if isinstance(proc.get("env"), dict) else {})}
            pairs = sorted((_cut(k), _cut(v)) for k, v in env.items())
            argv = _cut(" ".join(str(a) for a in _list(proc.get("argv"))))
            chars += len(argv) + sum(len(k) + len(v) for k, v in pairs)
            view.processes.append(
                {
                    "name": _cut(proc.get("name")),
                    "node_rank": proc.get("node_rank"),
                    "local_rank": proc.get("local_rank"),
                    "argv": argv,
                    "env": pairs,
                }
            )
    view.hidden = max(0, count - len(view.processes))
    return view


def job_shape(folder: JobFolder) -> str:
    """'2 x 2' (nodes x processes per node) from the resolved job; '' if it cannot be read."""
    try:
        job, _ = read_json(folder, folder.job_json, 1 << 20)
        nodes = int(job.get("resources", {}).get("instance_count") or 1)
        distribution = job.get("distribution") or {}
        per_node = distribution.get("process_count_per_instance")
        if per_node is None and distribution.get("type") == "tensorflow":
            total = int(distribution.get("worker_count") or nodes) + int(
                distribution.get("parameter_server_count") or 0
            )
            return f"{nodes} x {total / nodes:g}"
        return f"{nodes} x {int(per_node or 1)}"
    except (ValueError, TypeError, AttributeError):
        return ""


def rank_rows(record: JobRecord, plan: dict[str, Any]) -> list[RankRow]:
    """One row per process: from the plan while it runs, with each outcome once it ended."""
    rows: dict[str, RankRow] = {}
    for node in _list(plan.get("nodes")):
        for proc in _list(node.get("processes") if isinstance(node, dict) else None):
            if isinstance(proc, dict) and proc.get("name"):
                name = str(proc["name"])
                rows[name] = RankRow(
                    name=name,
                    label=str(proc.get("label") or name),
                    node_rank=proc.get("node_rank"),
                    local_rank=proc.get("local_rank"),
                    rank=proc.get("rank"),
                    log_name=proc.get("log_name"),
                    state=_live_state(record),
                    started=record.started_at,
                )
    for outcome in record.processes or []:
        name = str(outcome.get("name"))
        row = rows.get(name) or RankRow(
            name=name,
            label=str(outcome.get("label") or name),
            node_rank=outcome.get("node_rank"),
            local_rank=None,
            rank=outcome.get("rank"),
            log_name=_base_name(outcome.get("log")),
        )
        row.pid = outcome.get("pid")
        row.started = record.started_at
        after = outcome.get("after_ms")
        row.ended = record.started_at + after / 1000 if record.started_at is not None and after is not None else None
        row.state, row.exit = _ended_state(outcome)
        rows[name] = row
    return list(rows.values())


def failure(record: JobRecord) -> dict[str, Any] | None:
    """The first failure, as the banner shows it: who, where, why, its traceback and its log."""
    cause = record.root_cause
    if record.status != "Failed" or not isinstance(cause, dict):
        return None
    return {
        "name": cause.get("name"),
        "reason": cause.get("reason") or record.reason,
        "node_rank": cause.get("node_rank"),
        "host": cause.get("host"),
        "after": f"{cause['after_ms'] / 1000:.2f} s" if isinstance(cause.get("after_ms"), (int, float)) else "",
        "traceback": cause.get("traceback") or "",
        "log_name": _base_name(cause.get("log")),
    }


def _live_state(record: JobRecord) -> str:
    return "running" if record.status == "Running" else record.status.lower()


def _ended_state(outcome: dict[str, Any]) -> tuple[str, str]:
    if outcome.get("never_started"):
        return "not started", ""
    if outcome.get("signal"):
        exit_text = f"signal {outcome['signal']}"
    elif outcome.get("exit_code") is not None:
        exit_text = f"exit {outcome['exit_code']}"
    else:
        return "running", ""
    if outcome.get("stopped_by_distrun"):
        return "stopped by distrun", exit_text
    failed = outcome.get("signal") is not None or outcome.get("exit_code") != 0
    return ("failed" if failed else "completed"), exit_text


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + f"… ({len(text)} characters)"


def _base_name(path: object) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return path.rsplit("/", 1)[-1]


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
