"""What `MLClient.jobs` does with a pipeline job: the CLI's own path, called from Python.

    PipelineJob._to_data()  (the pipeline YAML document)
      -> distrun.loading.pipeline_loader.load_pipeline_data  (the one validation path)
      -> distrun.runner.parent_run.start_detached  (as `distrun job create --file pipeline.yml`)

so a pipeline built in Python is recorded, run, listed and followed exactly like a YAML one;
its document is kept in its folder as `pipeline.yml`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any, TextIO

from distrun.sdk.pipeline_job import PipelineJob
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

POLL_SECONDS = 0.2
ENDED_BADLY = frozenset({"Failed", "Canceled", "Preempted"})  # a step's or trial's end that has a reason to say


def checked_pipeline(job: PipelineJob) -> tuple[dict[str, Any], Any]:
    """The pipeline's document, and the `LoadedPipeline` the loader made of it: every step, its
    components and compute checked. Problems point at the lines that built the steps (or, for a
    pipeline loaded from YAML, at the file's)."""
    from distrun.loading.pipeline_loader import load_pipeline_data
    from distrun.spec.source_map import SourceMap

    document = job._to_data()
    smap = SourceMap(job._source, job._positions())
    return document, load_pipeline_data(copy.deepcopy(document), job._base_dir, job._source, (), smap)


def submit_pipeline(job: PipelineJob, layout: Layout, compute: str | None) -> JobRecord:
    """Validate the pipeline (every step, its components and compute) and start it in the background."""
    from distrun.runner.parent_run import ParentRun, start_detached

    document, loaded = checked_pipeline(job)
    run = ParentRun.of(loaded, layout, lambda text: None, compute, job.name)
    return start_detached(run, None, [], document, job._base_dir)


def pipeline_of_record(
    record: JobRecord, folder: Any, job_of: Callable[[JobRecord], Any], layout: Layout
) -> PipelineJob:
    """A recorded pipeline as a `PipelineJob`: its status, and `jobs` holding each step's job
    (as `jobs.get` returns it) once that step's job was recorded."""
    from distrun.core.errors import DistrunError
    from distrun.runner.jobs import get_job
    from distrun.sdk.job_header import submitted_state

    steps: dict[str, Any] = {}
    for step, state in (record.steps or {}).items():
        try:
            steps[step] = job_of(get_job(layout, str(state.get("job"))))
        except DistrunError:
            continue  # not started (yet): its state is in `pipeline_job.steps`
    job = PipelineJob(
        jobs=steps,
        outputs=_recorded_outputs(record),
        name=record.name,
        display_name=record.display_name,
        experiment_name=record.experiment_name,
        tags=record.tags,
    )
    submitted_state(job, record, folder)
    job.steps = dict(record.steps or {})  # distrun: each step's state, job, compute and times
    return job


def _recorded_outputs(record: JobRecord) -> dict[str, Any]:
    """The pipeline's own outputs, each an `Output` whose path a later job takes as an input
    (`azureml://jobs/PIPELINE/outputs/NAME`, the output of the step that writes it)."""
    from distrun.sdk.inputs_outputs import Output
    from distrun.store.pipeline_outputs import pipeline_outputs

    return {name: Output(path=out.to_dict(record.name)["path"]) for name, out in pipeline_outputs(record.steps).items()}


def stream_pipeline(layout: Layout, name: str, out: TextIO) -> JobRecord:
    """Follow a pipeline (or a sweep) until it ends: each step's (trial's) state as it changes,
    then the execution summary (what `distrun run pipeline.yml` or `sweep.yml` prints)."""
    from distrun.core.terminal_text import neutral_text
    from distrun.runner.job_kinds import row_of
    from distrun.runner.jobs import get_job
    from distrun.runner.pipeline_schedule import NOT_STARTED

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    record = get_job(layout, name)
    say(f"RunId: {record.name}")
    said: dict[str, str] = {}
    while True:
        record = get_job(layout, name)
        for step, state in (record.steps or {}).items():
            shown = "Reused" if state.get("reused") else str(state.get("status"))
            if said.get(step) != shown and shown != NOT_STARTED:
                said[step] = shown
                line = f"[{step}] {shown} (job {state.get('job')})"
                if shown in ENDED_BADLY and state.get("reason"):
                    line += f": {state['reason']}"  # as `distrun run` says it: why the step or trial ended
                say(neutral_text(line))  # the reason quotes the job (a frame's file name)
        if record.terminal:
            break
        time.sleep(POLL_SECONDS)
    say(row_of(record).summary(record))
    return record


def is_pipeline(record: JobRecord) -> bool:
    return record.kind.has_children


__all__ = ["checked_pipeline", "is_pipeline", "pipeline_of_record", "stream_pipeline", "submit_pipeline"]
