"""A pipeline's sweep step at run time: a sweep job, child of the pipeline, whose trials are its own
children.

The step's sweep is started through the entry every child starts through
(`distrun.runner.jobs.start_child`), as `distrun run -d sweep.yml` starts one: recorded, then
supervised by a background process of its own (`distrun.runner.detached_parent`), named
`<pipeline>.<step>`, its trials `<pipeline>.<step>.trial_<n>`. The pipeline follows its record
as it follows a step's job, and cancels it as one (`distrun.runner.jobs.cancel_job`: its
supervisor cancels its trials). What the supervisor loads is handed over as data
(`step_request`): the step's sweep document with its upstream inputs bound, and its trial
component. The step's outputs are the best trial's: a later
step's `azureml://jobs/<pipeline>.<step>/outputs/NAME` resolves to the best trial's output
(`distrun.data.locations`). A sweep that completed without a best trial (no trial logged the
primary metric) fails the step: there are no outputs to give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.runner.parent_policy import DetachedParent
    from distrun.spec.loaded_pipeline import LoadedPipeline, PipelineStep
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout


def step_request(step: PipelineStep, document: dict[str, Any], source: str) -> dict[str, Any]:
    """What the sweep's supervisor loads: the sweep document, and its trial component as data."""
    trial = step.trial
    assert trial is not None
    return {
        "document": document,
        "base_dir": str(step.base_dir),
        "source": source,
        "trial": {"data": trial.data, "base_dir": str(trial.base_dir), "source": trial.source},
    }


def sweep_step(
    pipeline: LoadedPipeline,
    step: PipelineStep,
    document: dict[str, Any],
    layout: Layout,
    compute: str | None,
    job: str,
) -> DetachedParent:
    """The step's sweep, to start as the job `job` in the background, its upstream inputs bound in
    `document` (their data exists now: checked as a sweep file's are)."""
    from distrun.loading.sweep_step import load_step_sweep
    from distrun.runner.detached_parent import detached
    from distrun.runner.sweep_policy import SweepPolicy

    sweep = load_step_sweep(step, document, pipeline.source)
    policy = SweepPolicy(sweep, layout, lambda text: None, compute, job)
    return detached(policy, None, [], compute, step=step_request(step, document, pipeline.source))


def sweep_state(record: JobRecord) -> dict[str, Any]:
    """What a pipeline's record keeps of its sweep step: its trials counted, and its best trial."""
    sweep = record.sweep or {}
    trials = record.steps or {}
    best = sweep.get("best")
    objective = sweep.get("objective") or {}
    return {
        "trials": len(trials),
        "completed": sum(1 for state in trials.values() if state.get("status") == JobStatus.COMPLETED.value),
        "primary_metric": objective.get("primary_metric"),
        "goal": objective.get("goal"),
        "best": None if not best else {key: best.get(key) for key in ("trial", "job", "metric", "parameters")},
    }


def step_outcome(record: JobRecord) -> tuple[str, str | None]:
    """The step's status and reason once its sweep ended: Completed only with a best trial."""
    if record.status != JobStatus.COMPLETED:
        return record.status, record.reason
    state = sweep_state(record)
    if state["best"] is None:
        metric = state["primary_metric"]
        return JobStatus.FAILED, (
            f"the sweep has no best trial: {state['completed']} of {state['trials']} trials completed, "
            f"none logged its primary metric {metric!r} (the step's outputs are the best trial's)"
        )
    return JobStatus.COMPLETED, None
