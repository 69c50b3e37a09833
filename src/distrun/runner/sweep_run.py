"""A sweep's trials as jobs: their names, each trial's job loaded from the sweep, the sweep checked
and planned as `distrun plan` shows it, its summary, and what a background supervisor loads. The
run itself is the sweep's policy (`distrun.runner.sweep_policy`) over the one parent-run loop
(`distrun.runner.parent_run`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.runner import jobs

if TYPE_CHECKING:
    from distrun.backends.base import Backend
    from distrun.prepare.compute import ComputeTarget
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.loaded_sweep import LoadedSweep
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

PREVIEW_NAME = "sweep"  # the sweep's name in a plan when the file gives none


def trial_key(number: int) -> str:
    return f"trial_{number}"


def trial_job_name(sweep: str, key: str) -> str:
    """The name of the job a trial runs as: readable, and found from the sweep's name."""
    return f"{sweep}.{key}"


def is_trial_name(job: str, parent: str) -> bool:
    """Whether a child job's name is a trial's of `parent` (else it is a pipeline step's)."""
    rest = job.removeprefix(parent + ".")
    return rest != job and rest.startswith("trial_") and rest[len("trial_") :].isdigit()


def trial_job(sweep: LoadedSweep, parameters: dict[str, Any], name: str) -> LoadedJob:
    """The trial's job with these parameters, loaded and checked as a job file is."""
    from distrun.spec.loader import load_job_data

    document = sweep.trial_document(parameters)
    document["name"] = name
    smap = copy.deepcopy(sweep.trial_source_map)
    return load_job_data(document, sweep.trial_base_dir, sweep.source, smap=smap)


TrialLoad = Callable[["LoadedSweep", dict[str, Any], str], "LoadedJob"]


def check_sweep(
    sweep: LoadedSweep,
    layout: Layout,
    compute: str | None = None,
    name: str = PREVIEW_NAME,
    load: TrialLoad = trial_job,
) -> tuple[ComputeTarget, Backend, LoadedJob]:
    """The trials' compute target and backend, checked as `distrun job validate` checks a job's,
    and the first trial's job (each parameter at a value of its range), as `load` gives it (a
    pipeline's sweep step whose inputs are not written yet: unchecked)."""
    from distrun.plan.sweep_search import example_value

    example = {key: example_value(expression) for key, expression in sweep.search_space.items()}
    job = load(sweep, example, trial_job_name(name, trial_key(0)))
    target, backend = jobs.check_target(job, layout, compute)
    return target, backend, job


def _shown(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def parameters_text(parameters: dict[str, Any]) -> str:
    return " ".join(f"{name}={_shown(value)}" for name, value in parameters.items())


def ranked_trials(trials: dict[str, dict[str, Any]], goal: str) -> list[tuple[str, dict[str, Any]]]:
    """Trials by their last primary metric value, best first (by the goal); those without one last."""
    with_metric = [(k, s) for k, s in trials.items() if s.get("metric") is not None]
    without = [(k, s) for k, s in trials.items() if s.get("metric") is None]
    with_metric.sort(key=lambda item: float(item[1]["metric"]), reverse=goal == "maximize")
    return with_metric + without


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
                "" if metric is None else _shown(metric),
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
        f"Best trial: {best['trial']} (job {best['job']}), {objective.get('primary_metric')} {_shown(best['metric'])} "
        f"({objective.get('goal')})",
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
    return neutral_text("\n".join(lines))


# ---------------------------------------------------------------- plan


def plan_sweep(
    sweep: LoadedSweep, layout: Layout, compute: str | None = None, count: int = 5, load: TrialLoad = trial_job
) -> dict[str, Any]:
    """The sweep's first trials' parameters and the first trial's job as `distrun plan` shows a job."""
    from distrun.plan.sweep_search import first_trials, search_for

    name = sweep.spec.name or PREVIEW_NAME
    check_sweep(sweep, layout, compute, name, load)
    seed = search_for(sweep.search_space, sweep.algorithm, sweep.spec.objective.goal).seed
    algorithm = sweep.algorithm
    if getattr(algorithm, "seed", "none") is None:
        algorithm = algorithm.model_copy(update={"seed": seed})
    first = first_trials(sweep.search_space, algorithm, sweep.spec.objective.goal, count)
    rendered = jobs.plan_job(load(sweep, first[0], trial_job_name(name, trial_key(0))), layout, compute)
    return {
        "sweep": name,
        "display_name": sweep.spec.display_name,
        "source": sweep.source,
        "objective": sweep.spec.objective.model_dump(),
        "sampling_algorithm": sweep.algorithm.model_dump(exclude_none=True),
        "seed_shown": seed if getattr(sweep.algorithm, "seed", "none") is None else None,
        "early_termination": sweep.policy.model_dump(exclude_none=True) if sweep.policy is not None else None,
        "limits": sweep.spec.limits.model_dump(exclude_none=True),
        "trials": [
            {"trial": trial_key(n), "job": trial_job_name(name, trial_key(n)), "parameters": p}
            for n, p in enumerate(first)
        ],
        "first_trial": rendered.show(),
    }


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


# ---------------------------------------------------------------- in the background


def requested_sweep(request: dict[str, Any]) -> LoadedSweep:
    """The sweep a background supervisor runs: a sweep file (one built in Python: its document,
    relative paths starting at `base_dir`), or a pipeline's sweep step as
    `distrun.runner.pipeline_sweeps.step_request` handed it over (its document, and its trial
    component as data)."""
    from distrun.spec.component_reader import load_component_data
    from distrun.spec.sweep_loader import load_sweep_data
    from distrun.spec.yaml_source import read_yaml_file

    step = request.get("step")
    if step is not None:
        trial = step["trial"]
        component = load_component_data(trial["data"], Path(trial["base_dir"]), str(trial["source"]))
        return load_sweep_data(step["document"], Path(step["base_dir"]), str(step["source"]), trial_component=component)
    file = Path(request["file"])
    data, smap = read_yaml_file(file)
    base_dir = Path(request["base_dir"]) if request.get("base_dir") else file.parent
    return load_sweep_data(data, base_dir, str(file), request.get("overrides") or [], smap)
