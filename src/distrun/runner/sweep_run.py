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
    from distrun.loading.loader import load_job_data

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
    from distrun.plan.sweep_search import example_parameters

    example = example_parameters(sweep.search_space, sweep.algorithm)
    job = load(sweep, example, trial_job_name(name, trial_key(0)))
    target, backend = jobs.check_target(job, layout, compute)
    return target, backend, job


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


# ---------------------------------------------------------------- in the background


def requested_sweep(request: dict[str, Any]) -> LoadedSweep:
    """The sweep a background supervisor runs: a sweep file (one built in Python: its document,
    relative paths starting at `base_dir`), or a pipeline's sweep step as
    `distrun.runner.pipeline_sweeps.step_request` handed it over (its document, and its trial
    component as data)."""
    from distrun.loading.component_reader import load_component_data
    from distrun.loading.sweep_loader import load_sweep_data
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
