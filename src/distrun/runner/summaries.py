"""The summaries and tables of every kind of job with children, in one place for the faces.

What `distrun run`, `distrun job show`, `distrun stream` and the SDK print of a pipeline and of a
sweep, all from the parent's record (or from a sweep's plan): plain data in, text out. A command
job's summary is `distrun.runner.report.execution_summary`; `distrun.runner.job_kinds` names the
summary of each kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distrun.store.index import JobRecord


# ---------------------------------------------------------------- pipelines


def best_text(state: dict[str, Any], running: bool = False) -> str:
    """`best trial_1 (job J), loss 0.12, of 3 trials`: a sweep step's outcome (or its best so far) in a line."""
    best = state.get("best")
    count = f"{state.get('trials')} trial{'s' if state.get('trials') != 1 else ''}"
    if not best:
        return f"no best trial yet, of {count}" if running else f"no best trial, of {count}"
    metric = best.get("metric")
    shown = f", {state.get('primary_metric')} {metric:.6g}" if isinstance(metric, (int, float)) else ""
    return f"best {best.get('trial')} (job {best.get('job')}){shown}, of {count}"


def pipeline_summary(record: JobRecord) -> str:
    """The pipeline's execution summary: its state, each step's, and the first failing step."""
    from distrun.core.terminal_text import neutral_text
    from distrun.runner.report import summary_head

    lines = [*summary_head(record), "Steps:"]
    steps = record.steps or {}
    width = max((len(step) for step in steps), default=0)
    for step, state in steps.items():
        started, ended = state.get("started_at"), state.get("ended_at")
        took = f"{ended - started:.2f} s" if started and ended else "-"
        shown = "Reused" if state.get("reused") else state.get("status")
        lines.append(f"  {step:<{width}}  {shown:<10}  {took:>8}  job {state.get('job')}")
        if state.get("sweep"):
            lines.append(f"  {'':<{width}}  sweep: {best_text(state['sweep'])}")
    cause = record.root_cause or {}
    if cause.get("step"):
        lines.append(f"Failed first: step {cause['step']} (job {cause['job']})")
        lines.extend(child_cause_lines(cause))
    return neutral_text("\n".join(lines))


def child_cause_lines(cause: dict[str, Any]) -> list[str]:
    """A failed child's cause in its parent's summary, as a command job's summary shows its own:
    its first failing process, then its traceback, else the last lines of its log, and the log."""
    lines = []
    if cause.get("name"):
        lines.append(f"  first failing process: {cause.get('name')} on node {cause.get('node_rank')}")
    if cause.get("traceback"):
        lines.append("  Traceback:")
        lines.extend("    " + line for line in str(cause["traceback"]).splitlines())
    elif cause.get("log_tail"):
        lines.append("  Last lines of its log:")
        lines.extend("    " + line for line in str(cause["log_tail"]).splitlines())
    if cause.get("log"):
        lines.append(f"  Log: {cause['log']}")
    return lines


# ---------------------------------------------------------------- sweeps


def shown_value(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def parameters_text(parameters: dict[str, Any]) -> str:
    return " ".join(f"{name}={shown_value(value)}" for name, value in parameters.items())


def ranked_trials(trials: dict[str, dict[str, Any]], goal: str) -> list[tuple[str, dict[str, Any]]]:
    """Trials by their last primary metric value, best first (by the goal); then those whose value
    is no number (NaN, an infinity: never ranked), then those without one."""
    from distrun.plan.sweep_policies import rankable

    with_metric = [(k, s) for k, s in trials.items() if rankable(s.get("metric"))]
    unranked = [(k, s) for k, s in trials.items() if s.get("metric") is not None and not rankable(s.get("metric"))]
    without = [(k, s) for k, s in trials.items() if s.get("metric") is None]
    with_metric.sort(key=lambda item: float(item[1]["metric"]), reverse=goal == "maximize")
    return with_metric + unranked + without


def trials_table(record: JobRecord) -> list[str]:
    """The sweep's trials, best first: status, primary metric, intervals, duration, parameters."""
    sweep = record.sweep or {}
    objective = sweep.get("objective") or {}
    metric_name = str(objective.get("primary_metric", "metric"))
    rows = [("TRIAL", "STATUS", metric_name.upper(), "INTERVALS", "DURATION", "PARAMETERS", "JOB")]
    for key, state in ranked_trials(record.steps or {}, str(objective.get("goal"))):
        started, ended = state.get("started_at"), state.get("ended_at")
        took = f"{ended - started:.2f} s" if started and ended else ""
        metric = state.get("metric")
        rows.append(
            (
                key,
                str(state.get("status")),
                "" if metric is None else shown_value(metric),
                str(state.get("intervals") or 0),
                took,
                parameters_text(state.get("parameters") or {}),
                str(state.get("job")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def best_lines(record: JobRecord) -> list[str]:
    sweep = record.sweep or {}
    best = sweep.get("best")
    objective = sweep.get("objective") or {}
    if not best:
        if not record.terminal:
            return ["Best trial: none yet"]
        return [f"Best trial: none (no completed trial logged {objective.get('primary_metric')})"]
    lines = [
        f"Best trial: {best['trial']} (job {best['job']}), {objective.get('primary_metric')} "
        f"{shown_value(best['metric'])} ({objective.get('goal')})",
        f"  parameters: {parameters_text(best.get('parameters') or {})}",
    ]
    lines.extend(f"  output {name}: {path}" for name, path in (best.get("outputs") or {}).items())
    return lines


def sweep_summary(record: JobRecord) -> str:
    """The sweep's execution summary: its state, its trials best first, and the best trial."""
    from distrun.core.terminal_text import neutral_text
    from distrun.runner.report import summary_head

    lines = [*summary_head(record)]
    count = len(record.steps or {})
    lines.append(f"Trials: {count}")
    lines.extend("  " + line for line in trials_table(record))
    lines.extend(best_lines(record))
    cause = record.root_cause or {}
    if cause.get("trial"):
        lines.append(f"Failed first: {cause['trial']} (job {cause['job']})")
        lines.extend(child_cause_lines(cause))
    return neutral_text("\n".join(lines))


def sweep_plan_text(planned: dict[str, Any]) -> str:
    from distrun.plan.text import plan_as_text

    objective = planned["objective"]
    algorithm = planned["sampling_algorithm"]
    lines = [
        f"Sweep: {planned['sweep']} ({planned['source']})",
        f"  objective: {objective['goal']} {objective['primary_metric']}",
        f"  sampling: {algorithm['type']}" + (f" ({algorithm['rule']})" if algorithm.get("rule") == "sobol" else ""),
        f"  limits: {', '.join(f'{k} {v}' for k, v in planned['limits'].items())}",
    ]
    if planned["early_termination"]:
        policy = planned["early_termination"]
        lines.append(f"  early termination: {', '.join(f'{k} {v}' for k, v in policy.items())}")
    if planned["seed_shown"] is not None:
        lines.append(
            f"  no seed: these are drawn with seed {planned['seed_shown']}; a run draws its own "
            "(set sampling_algorithm.seed to fix them)"
        )
    lines.append(f"First {len(planned['trials'])} trials:")
    lines.extend(f"  {t['trial']}  {parameters_text(t['parameters'])}" for t in planned["trials"])
    lines.append(f"The first trial's job ({planned['trials'][0]['job']}):")
    return "\n".join(lines) + "\n" + plan_as_text(planned["first_trial"])
