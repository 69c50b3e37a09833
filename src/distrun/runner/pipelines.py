"""What the faces do with pipeline jobs, above the backends: plan one, check one.

A pipeline step is a command job: its plan is `distrun.runner.jobs.plan_job` of the step's job,
on the step's compute (or `--compute`), so `distrun plan pipeline.yml` shows for each step
exactly what `distrun plan` shows for a job file. A step's job is named `<pipeline>.<step>`
(`step_job_name`); an input read from another step points at the folder that step's job will
write its output to.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.spec.pipeline_models import RESERVED_OUTPUTS

if TYPE_CHECKING:
    from distrun.backends.base import Backend
    from distrun.prepare.compute import ComputeTarget
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.loaded_pipeline import LoadedPipeline, PipelineStep, UpstreamOutput
    from distrun.spec.loaded_sweep import LoadedSweep
    from distrun.store.layout import Layout

PREVIEW_NAME = "pipeline"  # the pipeline's name in a plan when the file gives none
SWEEP_TRIALS_SHOWN = 3  # a sweep step's first trials' parameters in the plan


def step_job_name(pipeline: str, step: str) -> str:
    """The name of the job a step runs as: readable, and found from the pipeline's name."""
    return f"{pipeline}.{step}"


def upstream_path(layout: Layout, pipeline: LoadedPipeline, name: str, upstream: UpstreamOutput) -> str:
    """Where the step `upstream.step` of the pipeline run `name` writes its output `upstream.output`."""
    from distrun.data.locations import output_location
    from distrun.store.layout import distrun_home

    job = step_job_name(name, upstream.step)
    if upstream.output in RESERVED_OUTPUTS:  # the job's artifact root (distrun.spec.pipeline_models)
        return str(layout.job(job).code)
    declared = (pipeline.steps[upstream.step].document.get("outputs") or {}).get(upstream.output) or {}
    elsewhere = output_location(declared.get("path"), upstream.output, job, distrun_home())
    if elsewhere is not None:
        return str(elsewhere)
    folder = layout.job(job).named_output(upstream.output)
    return str(folder / upstream.output) if declared.get("type") == "uri_file" else str(folder)


VALUE_BYTES = 64 << 10  # the most a value output's file may hold


def output_value(layout: Layout, job: str, upstream: UpstreamOutput, value_type: str) -> Any:
    """The value the job `job` wrote to its value output `upstream.output` (a `string`, `integer`,
    `number` or `boolean` output: the text of the file its command was given), as `value_type`."""
    from distrun.core.errors import DistrunError
    from distrun.core.safe_files import read_text

    folder = layout.job(job)
    path = folder.named_output(upstream.output) / upstream.output
    what = f"output {upstream.output} of step {upstream.step} (job {job})"
    try:
        text = read_text(path, VALUE_BYTES, root=folder.root)
    except FileNotFoundError:
        raise DistrunError(f"{what} holds no value: the step wrote nothing to {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DistrunError(f"{what} cannot be read: {exc}") from None
    text = text[:-1] if text.endswith("\n") else text
    try:
        if value_type == "integer":
            return int(text)
        if value_type == "number":
            return float(text)
    except ValueError:
        raise DistrunError(
            f"{what} is {text[:80]!r}, not a {'whole number' if value_type == 'integer' else 'number'}"
        ) from None
    if value_type == "boolean":
        if text.strip().lower() not in ("true", "false"):
            raise DistrunError(f"{what} is {text[:80]!r}, not true or false")
        return text.strip().lower() == "true"
    return text


def step_job(
    pipeline: LoadedPipeline, step: PipelineStep, path_of: Callable[[UpstreamOutput], str], job_name: str
) -> LoadedJob:
    """The step's job, its upstream inputs at `path_of(upstream)`, named `job_name`.

    The document was validated with the pipeline; its upstream inputs' paths exist only once
    those steps ran, so it is not checked against the file system again here (a run loads it
    with `load_job_data` once they did)."""
    from distrun.loading.spark_loader import is_spark_document, loaded_spark_job
    from distrun.spec import models
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.normalize import normalize

    smap = step.source_map
    document = step.bound_document(path_of)
    if is_spark_document(document):  # a spark step: the command job that runs spark-submit
        return loaded_spark_job(document, step.base_dir, pipeline.source, smap, job_name)
    document = normalize(document, smap)
    spec = models.JobSpec.model_validate(document).model_copy(update={"name": job_name})
    return LoadedJob(spec, step.base_dir, pipeline.source, smap)


def step_sweep(
    pipeline: LoadedPipeline, step: PipelineStep, path_of: Callable[[UpstreamOutput], str], job_name: str
) -> LoadedSweep:
    """A sweep step's sweep, its upstream inputs at `path_of(upstream)`, named `job_name` (its
    trials are `job_name.trial_N`)."""
    from distrun.loading.sweep_step import load_step_sweep

    sweep = load_step_sweep(step, step.bound_document(path_of), pipeline.source, tuple(step.upstream))
    sweep.spec = sweep.spec.model_copy(update={"name": job_name})
    return sweep


def unchecked_trial_job(sweep: LoadedSweep, parameters: dict[str, Any], job_name: str) -> LoadedJob:
    """A sweep step's trial job before the steps it reads from ran: validated with the pipeline,
    not checked against the file system again (as `step_job`)."""
    from distrun.spec import models
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.normalize import normalize

    smap = copy.deepcopy(sweep.trial_source_map)
    document = normalize(sweep.trial_document(parameters), smap)
    spec = models.JobSpec.model_validate(document).model_copy(update={"name": job_name})
    return LoadedJob(spec, sweep.trial_base_dir, sweep.source, smap)


def step_target(
    pipeline: LoadedPipeline, step: PipelineStep, layout: Layout, name: str, compute: str | None
) -> tuple[ComputeTarget, Backend]:
    """The compute target and backend of the step `step` of the pipeline run `name` (a sweep
    step's: its trials'), checked as `distrun job validate` checks a job's."""
    from distrun.runner.jobs import check_target
    from distrun.runner.sweep_run import check_sweep

    job_name = step_job_name(name, step.name)
    path_of = lambda up: upstream_path(layout, pipeline, name, up)  # noqa: E731
    if step.is_sweep:
        sweep = step_sweep(pipeline, step, path_of, job_name)
        target, backend, _ = check_sweep(sweep, layout, compute, job_name, unchecked_trial_job)
        return target, backend
    return check_target(step_job(pipeline, step, path_of, job_name), layout, compute)


def check_pipeline(
    pipeline: LoadedPipeline, layout: Layout, compute: str | None = None
) -> dict[str, tuple[ComputeTarget, Backend]]:
    """Each step's compute target and backend, checked as `distrun job validate` checks a job's;
    every step's problem at once, each at the step's `compute` (or the pipeline's default)."""
    from distrun.core.errors import DistrunError, Position, Problem, ValidationError

    name = pipeline.spec.name or PREVIEW_NAME
    targets = {}
    problems = []
    for step_name, step in pipeline.steps.items():
        try:
            targets[step_name] = step_target(pipeline, step, layout, name, compute)
        except DistrunError as exc:
            where = "--compute" if compute else step.compute_key
            hint = exc.hint or "define the target with `distrun compute create`, or run every step with --compute local"
            position = Position(f"--compute {compute}") if compute else step.source_map.find(("compute",))
            problems.append(Problem(f"step {step_name}: {exc.message}", where, position, hint))
    if problems:
        raise ValidationError(problems)
    return targets


def plan_pipeline(pipeline: LoadedPipeline, layout: Layout, compute: str | None = None) -> dict[str, Any]:
    """The pipeline's graph and each step's job as `distrun plan` shows a job; nothing is written."""
    from distrun.runner.jobs import plan_job
    from distrun.runner.parallel_view import parallel_plan
    from distrun.runner.sweep_run import plan_sweep

    check_pipeline(pipeline, layout, compute)  # every step's target problem at once, before any plan
    name = pipeline.spec.name or PREVIEW_NAME
    levels = pipeline.levels()
    steps = []
    for step_name in pipeline.run_order():
        step = pipeline.steps[step_name]
        job_name = step_job_name(name, step_name)
        path_of = lambda up: upstream_path(layout, pipeline, name, up)  # noqa: E731
        sweep = None
        if step.is_sweep:  # its first trials' parameters, and the first trial's job as its plan
            loaded = step_sweep(pipeline, step, path_of, job_name)
            sweep = plan_sweep(loaded, layout, compute, SWEEP_TRIALS_SHOWN, unchecked_trial_job)
            rendered = sweep.pop("first_trial")
        else:
            rendered = plan_job(step_job(pipeline, step, path_of, job_name), layout, compute).show()
        for inp, up in step.upstream.items():
            if inp in rendered.get("inputs", {}):
                best = "'s best trial" if pipeline.steps[up.step].is_sweep else ""
                rendered["inputs"][inp]["source"] = f"output {up.output} of step {up.step}{best}, once it completed"
        steps.append(
            {
                "name": step_name,
                "job": job_name,
                "level": levels[step_name],
                "depends_on": list(step.depends_on),
                "component": step.component,
                "reads": {inp: f"{up.step}.{up.output}" for inp, up in step.upstream.items()},
                "pipeline_outputs": dict(step.pipeline_outputs),
                "rendered": rendered,
                "sweep": sweep,
                "parallel": parallel_plan(rendered),
            }
        )
    settings = pipeline.spec.settings
    return {
        "pipeline": name,
        "display_name": pipeline.spec.display_name,
        "source": str(Path(pipeline.source)),
        "notes": list(pipeline.notes),
        "settings": {
            "default_compute": settings.default_compute,
            "continue_on_step_failure": settings.continue_on_step_failure,
            "force_rerun": settings.force_rerun,
        },
        "steps": steps,
    }


def never_ran(state: dict[str, Any]) -> bool:
    """Whether a step of a pipeline's record has no job (it never started: waiting, or stopped before)."""
    return state.get("status") == "NotStarted" or str(state.get("reason") or "").startswith("not started")


def resolve_job_name(layout: Layout, name: str) -> str:
    """The job a name given to `job show`, `logs`, `stream`, `download` or `cancel` means:
    `PIPELINE/STEP` is that step's job (a reused step's: the earlier job whose outputs it has);
    any other name is itself (a job's names never hold a `/`)."""
    from distrun.core.errors import DistrunError
    from distrun.runner.jobs import get_job

    if "/" not in name:
        return name
    pipeline, step = name.split("/", 1)
    record = get_job(layout, pipeline)
    steps = record.steps
    if steps is None:
        raise DistrunError(f"{pipeline} is a job, not a pipeline: it has no step {step!r}", f"use `{pipeline}` alone")
    if step not in steps:
        raise DistrunError(f"pipeline {pipeline} has no step {step!r}", f"its steps: {', '.join(steps)}")
    state = steps[step]
    if never_ran(state):
        why = state.get("reason") or "it waits for the steps it reads from"
        raise DistrunError(
            f"step {step} of pipeline {pipeline} has no job: {why}", f"see `distrun job show {pipeline}`"
        )
    return str(state["job"])
