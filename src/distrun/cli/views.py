"""What `job list`, `job show`, `compute list/create` and `run -d` print for people.

Plain data in (records as the store keeps them), text out; JSON and YAML stay available with
`-o` for scripts. Tables are rich tables whose name column is never cut: names are what users
paste into `show`, `logs` and `cancel`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.cli.tables import format_seconds
from distrun.cli.tables import table as _table
from distrun.cli.tables import when as _when
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.runner.job_kinds import row_of
from distrun.runner.pipeline_schedule import NOT_STARTED
from distrun.runner.report import duration_text, job_duration
from distrun.runner.summaries import best_lines, best_text, trials_table
from distrun.runner.sweep_run import is_trial_name
from distrun.store.index import JobRecord


def _running_for(record: JobRecord, now: float) -> float | None:
    if record.terminal:
        return job_duration(record)
    return now - record.started_at if record.started_at else None


# ---------------------------------------------------------------- job list


def job_list_text(records: list[JobRecord], now: float | None = None) -> str:
    if not records:
        return "No jobs yet: start one with `distrun run job.yml`."
    now = time.time() if now is None else now
    rows = [(r.name, r.status, _compute(r), _when(r.created_at, now), _duration(_running_for(r, now))) for r in records]
    return _table(("NAME", "STATUS", "COMPUTE", "CREATED", "DURATION"), rows, keep=("NAME", "STATUS"))


def _duration(seconds: float | None) -> str:
    return "" if seconds is None else duration_text(seconds)


def _compute(record: JobRecord) -> str:
    """A pipeline's record runs no processes itself: its compute column counts its steps."""
    return _VIEWS[row_of(record).view].compute(record)


def _command_compute(record: JobRecord) -> str:
    """A job that runs processes: its compute, and its kind when it is not a command job's."""
    return record.compute if record.kind is JobKind.COMMAND else f"{record.compute} ({record.kind.noun})"


def _sweep_compute(record: JobRecord) -> str:
    if not record.terminal:
        return f"sweep: {progress_text(record)}"
    count = len(record.steps or {})
    return f"sweep ({count} trial{'s' if count != 1 else ''})"


def _pipeline_compute(record: JobRecord) -> str:
    if not record.terminal:
        return f"pipeline: {progress_text(record)}"
    return f"pipeline ({len(record.steps or {})} steps)"


def progress_text(record: JobRecord) -> str:
    """How far a pipeline or sweep is: `trials 3/20 done, 2 running, best 0.41`, `steps 2/5 done`."""
    states = [str(state.get("status")) for state in (record.steps or {}).values()]
    started = [JobStatus.of(status) for status in states if status != NOT_STARTED]
    done = sum(1 for status in started if status.terminal)
    running = len(started) - done
    total = len(states)
    limits = (record.sweep or {}).get("limits") or {}
    if isinstance(limits.get("max_total_trials"), int):
        total = max(total, limits["max_total_trials"])  # a sweep's trials are recorded as they start
    text = f"{row_of(record).children} {done}/{total} done" + (f", {running} running" if running else "")
    best = _best_so_far(record)
    return text if best is None else f"{text}, best {best:.6g}"


def _best_so_far(record: JobRecord) -> float | None:
    """A sweep's best primary metric among the trials that reported one, by its goal (a
    pipeline's steps have no metric)."""
    metrics = [
        state["metric"]
        for state in (record.steps or {}).values()
        if isinstance(state.get("metric"), (int, float)) and not isinstance(state.get("metric"), bool)
    ]
    if not metrics:
        return None
    goal = str(((record.sweep or {}).get("objective") or {}).get("goal", "")).lower()
    return float(max(metrics) if goal.startswith("max") else min(metrics))


# ---------------------------------------------------------------- job show


def steps_table(record: JobRecord) -> str:
    """A pipeline's steps: each step's job, state, compute, duration, and why it did not complete."""
    rows = []
    for step, state in (record.steps or {}).items():
        started, ended = state.get("started_at"), state.get("ended_at")
        took = format_seconds(ended - started) if started and ended else ""
        note = state.get("reason") if state.get("status") != "Completed" else ""
        # A reused step is Completed in the record, with the earlier run's job (its outputs).
        shown = "Reused" if state.get("reused") else str(state.get("status"))
        rows.append((step, shown, str(state.get("job")), str(state.get("compute")), took, note or ""))
    return _table(("STEP", "STATUS", "JOB", "COMPUTE", "DURATION", "REASON"), rows, keep=("STEP", "STATUS", "JOB"))


def sweep_step_lines(record: JobRecord) -> list[str]:
    """A pipeline's sweep steps: each one's trials and best trial (its sweep's record has them all)."""
    return [
        f"Sweep step {step}: {best_text(state['sweep'], not JobStatus.of(state['status']).terminal)}; "
        f"its trials: `distrun job show {state.get('job')}`"
        for step, state in (record.steps or {}).items()
        if state.get("sweep")
    ]


def process_state(proc: Mapping[str, Any]) -> str:
    if proc.get("never_started"):
        return "not started"
    if proc.get("stopped_by_distrun"):
        return "stopped"
    if proc.get("exit_code") is None and proc.get("signal") is None:
        return "running"
    if proc.get("exit_code") == 0:
        return "completed"
    return "failed"


def _exit(proc: Mapping[str, Any]) -> str:
    if proc.get("signal"):
        return str(proc["signal"])
    return "" if proc.get("exit_code") is None else str(proc["exit_code"])


def _local_ranks(processes: list[Mapping[str, Any]]) -> list[int]:
    """Each process's index among its node's processes (its LOCAL_RANK for rank processes)."""
    seen: dict[int, int] = {}
    ranks = []
    for proc in processes:
        node = int(proc.get("node_rank") or 0)
        ranks.append(seen.get(node, 0))
        seen[node] = ranks[-1] + 1
    return ranks


def process_table(record: JobRecord) -> str:
    processes = list(record.processes or [])
    folder = Path(record.folder)
    rows = []
    for proc, local in zip(processes, _local_ranks(processes), strict=True):
        log = str(proc.get("log") or "")
        if log.startswith(str(folder) + os.sep):
            log = log[len(str(folder)) + 1 :]
        after = proc.get("after_ms")
        rows.append(
            (
                str(proc.get("name", "")),
                str(proc.get("node_rank", "")),
                str(local),
                process_state(proc),
                _exit(proc),
                format_seconds(after / 1000 if after is not None else None),
                log,
            )
        )
    columns = ("PROCESS", "NODE", "LOCAL RANK", "STATE", "EXIT", "ENDED AFTER", "LOG")
    return _table(columns, rows, fit=False)


def _outputs(record: JobRecord) -> list[str]:
    named = Path(record.folder) / "named-outputs"
    try:
        return sorted(f"  {entry.name}: {entry}" for entry in named.iterdir())
    except OSError:
        return []


def job_show_text(
    record: JobRecord, parent_kind: JobKind | None = None, metrics: Mapping[str, Any] | None = None
) -> str:
    """`job show`'s text; `parent_kind`: the kind of the job's parent (a step's pipeline, a trial's
    sweep); `metrics`: each metric's last value, as Azure ML's job page shows them."""
    lines = [f"Name:     {record.name}", f"Status:   {record.status}"]
    if record.display_name and record.display_name != record.name:
        lines.append(f"Display:  {record.display_name}")
    row = row_of(record)
    if not row.has_children:
        shape = record.distribution if record.kind is JobKind.COMMAND else record.kind.noun  # "parallel job"
        lines.append(f"Compute:  {record.compute}" + (f" ({shape})" if shape else ""))
    if record.parent:
        noun = _parent_noun(record, parent_kind)
        lines.append(f"{noun[0].upper()}{noun[1:]}: {record.parent}")
    lines.append(f"Created:  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.created_at))}")
    duration = _running_for(record, time.time())
    if duration is not None:
        lines.append(f"Duration: {duration_text(duration)}" + ("" if record.terminal else " (running)"))
    if row.has_children:
        lines.append(f"Progress: {progress_text(record)}")
    if metrics:
        lines.append("Metrics:  " + ", ".join(f"{name}={_metric(value)}" for name, value in sorted(metrics.items())))
    timeouts = _timeouts_line(record.timeouts or [])
    if timeouts:
        lines.append(f"Timeouts: {timeouts}")
    if record.reason and record.status != "Completed":
        lines.append(f"Reason:   {record.reason}")
    cause = record.root_cause or {}
    if cause.get("hang"):
        lines.append(f"Stacks:   {record.folder}/hang/stacks.txt (every process, every thread)")
    if cause.get("step"):
        lines.append(f"Failed step: {cause['step']} (job {cause.get('job')})")
    if cause.get("after_ms") is not None:
        lines.append(
            f"Failed first: {cause.get('name')} on node {cause.get('node_rank')} ({cause.get('host')}) "
            f"after {cause['after_ms'] / 1000:.2f} s"
        )
    if cause.get("traceback"):
        lines.append("Traceback:")
        lines += ["  " + line for line in cause["traceback"].splitlines()]
    elif cause.get("log_tail"):
        lines.append("Last lines of its log:")
        lines += ["  " + line for line in cause["log_tail"].splitlines()]
    return "\n".join(lines + _VIEWS[row.view].details(record))


def _metric(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _parent_noun(record: JobRecord, parent_kind: JobKind | None) -> str:
    """What the parent is, from its own record's kind; from the child's name when that is not known."""
    if parent_kind is not None:
        return parent_kind.noun
    return "sweep" if is_trial_name(record.name, record.parent or "") else "pipeline"


def _sweep_details(record: JobRecord) -> list[str]:
    """A sweep's show: its objective and sampling, its trials best first, and its best trial."""
    sweep = record.sweep or {}
    count = len(record.steps or {})
    objective, sampling = sweep.get("objective") or {}, sweep.get("sampling_algorithm") or {}
    seed = f", seed {sweep['seed']}" if sweep.get("seed") is not None else ""
    goal = f"{objective.get('goal')} {objective.get('primary_metric')}"
    lines = [f"Sweep:    {goal}; {sampling.get('type')} sampling{seed}"]
    lines += ["", f"Trials: {count}, best first", *trials_table(record), "", *best_lines(record)]
    return [*lines, "", "Each trial is a job: `distrun job show JOB`, `distrun logs JOB`, `distrun metrics JOB`."]


def _pipeline_details(record: JobRecord) -> list[str]:
    """A pipeline's show: its steps, and its sweep steps' best trials."""
    lines = ["", steps_table(record), *sweep_step_lines(record), *_pipeline_output_lines(record)]
    return [*lines, "", "Each step is a job: `distrun job show JOB`, `distrun logs JOB`."]


def _pipeline_output_lines(record: JobRecord) -> list[str]:
    """A pipeline's own outputs: each is an output of one of its steps' jobs."""
    from distrun.store.pipeline_outputs import pipeline_outputs

    outputs = pipeline_outputs(record.steps)
    lines = [
        f"  {name}: output {out.output} of step {out.step} (job {out.job}), azureml://jobs/{record.name}/outputs/{name}"
        for name, out in outputs.items()
    ]
    return ["", "Outputs:", *lines] if lines else []


def _command_details(record: JobRecord) -> list[str]:
    """A command job's show: its processes, its outputs and where its logs are."""
    from distrun.runner.parallel_view import show_lines

    lines = _spark_lines(record)
    lines += ["", process_table(record)] if record.processes else []
    lines += show_lines(Path(record.folder)) if record.folder else []  # a parallel step's mini-batches
    outputs = _outputs(record)
    if outputs:
        lines += ["", "Outputs:", *outputs]
    return [*lines, "", f"Logs: {record.folder}/user_logs"]


def _spark_lines(record: JobRecord) -> list[str]:
    """A Spark job's application id, and its UI's address while it runs (`distrun.runner.spark_app`)."""
    if record.kind is not JobKind.SPARK:
        return []
    from distrun.runner.spark_app import spark_application, spark_lines

    target_type = str((record.target or {}).get("type") or "local")  # where its executors ran, and their logs
    found = spark_application(record.folder)
    if record.spark_application_id:  # the record's, once stored (`distrun.runner.spark_app.with_application_id`)
        found["application_id"] = record.spark_application_id
    found = spark_lines(found, running=not record.terminal, target_type=target_type)
    return ["", *found] if found else []


def _automl_details(record: JobRecord) -> list[str]:
    """An AutoML job's show: what it searches, then a command job's lines (its search is one process)."""
    from distrun.runner.automl_results import TASK_TAG

    task = (record.tags or {}).get(TASK_TAG)
    return ["", f"AutoML job: {task or 'search'} with FLAML", *_command_details(record)]


def _timeouts_line(timeouts: list[dict[str, Any]]) -> str:
    """`limits.hang_timeout 120 s, gloo collective timeout 1800 s`: the timeouts that are set."""
    said = []
    for item in timeouts:
        if item.get("seconds") is not None:
            said.append(f"{item.get('name')} {item['seconds']:g} s")
        elif item.get("value") is not None:
            said.append(f"{item.get('name')}={item['value']}")
    return ", ".join(said)


# ---------------------------------------------------------------- started in the background


def created_text(record: JobRecord) -> str:
    return "\n".join(_VIEWS[row_of(record).view].created(record))


def _sweep_created(record: JobRecord) -> list[str]:
    """A sweep: its trials' jobs have the logs."""
    name = record.name
    return [
        f"Created sweep {name} ({record.status})",
        f"  its trials:     distrun job show {name}",
        f"  a trial's logs: distrun logs {name}.trial_N",
        f"  cancel it:      distrun job cancel {name}",
    ]


def _pipeline_created(record: JobRecord) -> list[str]:
    """A pipeline: its steps' jobs have the logs."""
    name = record.name
    return [
        f"Created pipeline {name} with {len(record.steps or {})} steps ({record.status})",
        f"  its steps:     distrun job show {name}",
        f"  follow it:     distrun stream {name}   (every step's logs; one step's: {name}/STEP)",
        f"  cancel it:     distrun job cancel {name}",
    ]


def _command_created(record: JobRecord) -> list[str]:
    name = record.name
    return [
        f"Created job {name} on {record.compute} ({record.status})",
        f"  follow it:     distrun job stream {name}",
        f"  its logs:      distrun logs {name}",
        f"  its record:    distrun job show {name}",
        f"  cancel it:     distrun job cancel {name}",
    ]


# ---------------------------------------------------------------- each view


@dataclass(frozen=True)
class _View:
    """What `job list`, `job show` and `run -d` print of the jobs a view shows (`KindRow.view`)."""

    compute: Callable[[JobRecord], str]  # the list's COMPUTE cell
    details: Callable[[JobRecord], list[str]]  # `job show`'s lines after the ones every job has
    created: Callable[[JobRecord], list[str]]  # what `run -d` says of the job it started


_VIEWS = {
    "command": _View(_command_compute, _command_details, _command_created),
    "automl": _View(lambda record: f"{record.compute} (automl)", _automl_details, _command_created),
    "pipeline": _View(_pipeline_compute, _pipeline_details, _pipeline_created),
    "sweep": _View(_sweep_compute, _sweep_details, _sweep_created),
}


# ---------------------------------------------------------------- compute targets


def compute_table(targets: list[Mapping[str, Any]]) -> str:
    rows = []
    for target in targets:
        settings = ", ".join(f"{k}={v}" for k, v in target.items() if k not in ("name", "type"))
        rows.append((str(target["name"]), str(target["type"]), settings))
    return _table(("NAME", "TYPE", "SETTINGS"), rows, keep=("NAME",))
