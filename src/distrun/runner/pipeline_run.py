"""What a pipeline's run reads of its steps' jobs before they start (the processes and GPUs each
asks for), and the pipeline's execution summary. The run itself is the pipeline's policy
(`distrun.runner.pipeline_policy`) over the one parent-run loop (`distrun.runner.parent_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError

if TYPE_CHECKING:
    from distrun.spec.loaded_pipeline import LoadedPipeline


def process_count_of(pipeline: LoadedPipeline, step: str, count: Callable[[Any], int]) -> int:
    """How many processes a step's job runs (its document was validated with the pipeline)."""
    pipeline_step = pipeline.steps[step]
    if pipeline_step.is_sweep:  # each trial's
        from distrun.plan.sweep_search import example_parameters
        from distrun.runner.pipelines import step_sweep, unchecked_trial_job

        sweep = step_sweep(pipeline, pipeline_step, lambda up: "unused", step)
        example = example_parameters(sweep.search_space, sweep.algorithm)
        return count(unchecked_trial_job(sweep, example, step).spec)
    from distrun.runner.pipelines import step_job

    return count(step_job(pipeline, pipeline_step, lambda up: "unused", step).spec)


def gpus_asked(spec: Any) -> int:
    """The GPUs a step's job asks for on local compute: `gpus_per_node` times its nodes (0 when
    not asked, or asked in a form its load will refuse with the reason)."""
    from distrun.plan.gpus import asked_gpus_per_node
    from distrun.plan.plan_job import PlanJob

    try:
        per_node = asked_gpus_per_node(PlanJob.of(spec))
    except DistrunError:
        return 0
    return (per_node or 0) * spec.resources.instance_count


def local_gpus() -> tuple[str, ...]:
    """This machine's GPUs as distrun's local backend sees them (CUDA_VISIBLE_DEVICES, else the driver)."""
    from distrun.prepare.machine_gpus import probe_gpus

    return probe_gpus()
