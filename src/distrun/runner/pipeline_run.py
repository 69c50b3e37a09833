"""What a pipeline's run reads of its steps' jobs before they start (the processes and GPUs each
asks for), and the pipeline's execution summary. The run itself is the pipeline's policy
(`distrun.runner.pipeline_policy`) over the one parent-run loop (`distrun.runner.parent_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.runner.pipeline_sweeps import best_text

if TYPE_CHECKING:
    from distrun.spec.loaded_pipeline import LoadedPipeline
    from distrun.store.index import JobRecord


def process_count_of(pipeline: LoadedPipeline, step: str, count: Callable[[Any], int]) -> int:
    """How many processes a step's job runs (its document was validated with the pipeline)."""
    from distrun.spec import models
    from distrun.spec.normalize import normalize

    pipeline_step = pipeline.steps[step]
    if pipeline_step.is_sweep:  # each trial's
        from distrun.plan.sweep_search import example_value
        from distrun.runner.pipelines import step_sweep, unchecked_trial_job

        sweep = step_sweep(pipeline, pipeline_step, lambda up: "unused", step)
        example = {key: example_value(expression) for key, expression in sweep.search_space.items()}
        return count(unchecked_trial_job(sweep, example, step).spec)
    document = normalize(pipeline_step.bound_document(lambda up: "unused"), pipeline_step.source_map)
    return count(models.JobSpec.model_validate(document))


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
        if cause.get("name"):
            lines.append(f"  first failing process: {cause.get('name')} on node {cause.get('node_rank')}")
        if cause.get("traceback"):
            lines.append("  Traceback:")
            lines.extend("    " + line for line in str(cause["traceback"]).splitlines())
        if cause.get("log"):
            lines.append(f"  Log: {cause['log']}")
    return neutral_text("\n".join(lines))
