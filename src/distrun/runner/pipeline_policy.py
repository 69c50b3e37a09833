"""`distrun run pipeline.yml`: a pipeline run as a graph of distrun jobs, one per step.

Each step is a distrun job of its own, named `<pipeline>.<step>`, on its step's compute target,
started by the one parent-run loop (`distrun.runner.parent_run`); this is the pipeline's policy
over it: which steps start next, what a step's end means, what the pipeline's outcome is.

A step is started once every step it reads from Completed; it reads their outputs by path
(`azureml://jobs/<job>/outputs/<name>`, resolved by the data layer to the folder the job wrote),
and is loaded and checked then, as a job file is, with those paths existing. On a target whose
nodes do not see this machine's job folders (Ray, Kubernetes), that folder is filled by the
backend when the upstream job ends, and the step's job gets a copy to ship with its code
(`distrun.prepare.submission.bind`): nothing here differs by engine. Steps that are
ready together start together, bounded on local compute by this machine's cores
(`distrun.runner.pipeline_schedule`). A deterministic step whose component, inputs and code an
earlier run completed with is reused (`distrun.runner.pipeline_reuse`; the job behind each
step: `distrun.runner.pipeline_step_jobs`). A sweep step is a sweep
job, child of the pipeline (`distrun.runner.pipeline_sweeps`). A failed step stops every step
below it; without `settings.continue_on_step_failure` it also cancels the steps still running and
starts no other. The pipeline's own record (no processes: `steps` lists each step's job and
state) ends Failed naming the first failing step, with that step's root cause (its first failing
rank and traceback).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.runner.child_exits import IDLE_WAIT_SECONDS
from distrun.runner.parent_policy import Look
from distrun.runner.pipeline_schedule import NOT_STARTED, gpus_for, startable, stopped_by
from distrun.runner.pipeline_step_jobs import StepJobs
from distrun.runner.pipeline_sweeps import sweep_step
from distrun.runner.pipelines import check_pipeline, step_job_name

if TYPE_CHECKING:
    from distrun.runner.parent_policy import DetachedParent, Say
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.loaded_pipeline import LoadedPipeline
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

PIPELINE_COMPUTE = "pipeline"  # the `compute` of a pipeline's own record: its steps name theirs


class PipelinePolicy:
    kind = JobKind.PIPELINE
    record_compute = PIPELINE_COMPUTE
    built_file = "pipeline.yml"  # a pipeline built in Python (distrun's SDK), kept in its folder
    canceled_why = "canceled"
    longest_wait = IDLE_WAIT_SECONDS

    def __init__(
        self,
        pipeline: LoadedPipeline,
        layout: Layout,
        say: Say,
        compute: str | None,
        name: str,
        capacity: int | None = None,
    ) -> None:
        from distrun.loading.checks import process_count
        from distrun.prepare.compute import runs_on_this_machine
        from distrun.runner.pipeline_run import gpus_asked, process_count_of

        self.pipeline = pipeline
        self.spec = pipeline.spec
        self.layout = layout
        self.say = say
        self.compute = compute
        self.name = name
        self.capacity = capacity or os.cpu_count() or 1
        targets = check_pipeline(pipeline, layout, compute)
        self.targets = {step: target.name for step, (target, _) in targets.items()}
        # Steps whose processes run on this machine share its cores (`capacity`); an engine's don't.
        here = {step for step, (target, _) in targets.items() if runs_on_this_machine(target.type)}
        self.machine_types = sorted({targets[step][0].type for step in here})
        self.processes = {step: process_count_of(pipeline, step, process_count) for step in pipeline.steps}
        self.local_size = {step: self.processes[step] if step in here else 0 for step in pipeline.steps}
        asked = {step: process_count_of(pipeline, step, gpus_asked) for step in pipeline.steps if step in here}
        self.gpus = StepGpus({step: n for step, n in asked.items() if n})
        self.depends_on = pipeline.depends_on
        self.status: dict[str, str] = dict.fromkeys(pipeline.steps, NOT_STARTED)
        self.reasons: dict[str, str] = {}
        self.times: dict[str, list[float | None]] = {step: [None, None] for step in pipeline.steps}
        self.first_failure: str | None = None
        self.stopping = False
        # Each step's job (an earlier run's, for a reused step) and a sweep step's trials.
        self.jobs = StepJobs(pipeline, layout, say, name)

    # ------------------------------------------------------------ the record

    def steps(self) -> dict[str, Any]:
        return {
            step: {
                **self.jobs.record_of(step),
                "status": self.status[step],
                "depends_on": list(self.depends_on[step]),
                "compute": self.targets[step],
                "reason": self.reasons.get(step),
                "started_at": self.times[step][0],
                "ended_at": self.times[step][1],
                # Which of the step's outputs are the pipeline's (distrun.store.pipeline_outputs).
                "pipeline_outputs": dict(self.pipeline.steps[step].pipeline_outputs),
            }
            for step in self.pipeline.steps
        }

    def record_fields(self) -> dict[str, Any]:
        return {}

    def final_fields(self) -> dict[str, Any]:
        """The first failing step's root cause (its first failing rank and traceback), named."""
        from distrun.runner import jobs

        if self.first_failure is None:
            return {"root_cause": None}
        failing = step_job_name(self.name, self.first_failure)
        try:
            cause = jobs.get_job(self.layout, failing).root_cause
        except DistrunError:
            cause = None
        return {"root_cause": {**(cause or {}), "step": self.first_failure, "job": failing}}

    # ------------------------------------------------------------ the steps

    def begin(self) -> str:
        count = len(self.status)
        return f"Pipeline: {count} step{'s' if count != 1 else ''} ({', '.join(self.pipeline.run_order())})"

    def job_name(self, key: str) -> str:
        return step_job_name(self.name, key)

    def running(self) -> list[str]:
        return [s for s, state in self.status.items() if state != NOT_STARTED and not JobStatus.of(state).terminal]

    def _done(self, step: str) -> bool:
        return self.status[step] != NOT_STARTED and JobStatus.of(self.status[step]).terminal

    def to_start(self) -> Iterator[str]:
        gpus = self.gpus
        ready = startable(self.depends_on, self.status, self.local_size, self.capacity, gpus.need, len(gpus.machine))
        for step in ready:
            if self.stopping:
                return  # a step that failed to start stopped the pipeline
            self.times[step][0] = time.time()
            # Counted as submitted from here: a Ctrl-C during the submission cancels the job it made.
            self.status[step] = JobStatus.QUEUED
            yield step

    def child(self, key: str) -> LoadedJob | DetachedParent | None:
        from distrun.data.locations import job_output_uri
        from distrun.loading.loader import load_job_data

        pipeline_step = self.pipeline.steps[key]
        job_of = self.jobs.job_of
        document = pipeline_step.bound_document(
            lambda up: job_output_uri(job_of[up.step], up.output), self.jobs.value_of
        )
        if self.jobs.reused(key, document):  # Completed, with the earlier run's outputs
            self.status[key] = JobStatus.COMPLETED
            self.times[key][1] = time.time()
            return None
        if pipeline_step.is_sweep:
            return sweep_step(self.pipeline, pipeline_step, document, self.layout, self.compute, self.job_name(key))
        document = self.gpus.given(key, document, [s for s in self.running() if s != key])
        return load_job_data(document, pipeline_step.base_dir, self.pipeline.source, smap=pipeline_step.source_map)

    def started(self, key: str, record: JobRecord) -> None:
        self.status[key] = record.status
        job = self.job_name(key)
        processes = self.processes[key]
        where = f"{self.targets[key]}, {processes} process{'es' if processes != 1 else ''}"
        if self.pipeline.steps[key].is_sweep:
            self.jobs.sweep_started(key, record)
            self.say(f"[{key}] started as sweep {job} on {where} a trial (its trials: {job}.trial_N)")
        else:
            self.say(f"[{key}] started as job {job} on {where}")

    # ------------------------------------------------------------ following them

    def looked(self, key: str, record: JobRecord | None) -> Look:
        """The step's status, and a sweep step's trials that ended since the last look (said) and
        its best trial so far, as its job's record says."""
        if record is None:
            return Look()
        sweep_changed = key in self.jobs.sweeps and self.jobs.sweep_looked(key, record)
        if record.terminal:
            return Look()
        changed = record.status != self.status[key]
        self.status[key] = record.status
        return Look(changed or sweep_changed)

    def outcome_of(self, key: str, record: JobRecord) -> tuple[str, str | None]:
        if key not in self.jobs.sweeps:
            return record.status, record.reason
        return self.jobs.sweep_outcome(key, record)

    def ended(self, key: str, status: str, reason: str | None) -> str | None:
        self.status[key] = status
        self.times[key][1] = time.time()
        started = self.times[key][0] or self.times[key][1]
        took = f" in {self.times[key][1] - started:.2f} s" if started else ""  # type: ignore[operator]
        if status == JobStatus.COMPLETED:
            self.say(f"[{key}] Completed{took}{self.jobs.best(key)}")
            self.jobs.remember(key)
            return None
        self.reasons[key] = reason or status
        self.say(f"[{key}] {status}{took}: {self.reasons[key]}")
        if self.first_failure is None:
            self.first_failure = key
        for below in stopped_by(key, self.depends_on, self.status):
            self.status[below] = JobStatus.CANCELED
            self.reasons[below] = f"not started: step {key} did not complete"
            self.say(f"[{below}] not started: step {key} did not complete")
        if self.pipeline.spec.settings.continue_on_step_failure or self.stopping:
            return None
        return f"step {key} failed"

    # ------------------------------------------------------------ stopping

    def stop_reason(self) -> str | None:
        return None  # a pipeline has no timeout of its own: each step's job has its own

    def stop_starting(self, why: str) -> None:
        self.stopping = True
        for step, state in self.status.items():
            if state == NOT_STARTED:
                self.status[step] = JobStatus.CANCELED
                self.reasons[step] = f"not started: {why}"

    def canceled(self, key: str, record: JobRecord, why: str) -> tuple[str, str | None] | None:
        self.status[key] = record.status
        self.times[key][1] = time.time()
        self.reasons[key] = record.reason or why
        self.say(f"[{key}] {record.status}: {why}")
        return None

    def not_canceled(self, key: str, why: str) -> None:
        self.reasons[key] = why

    # ------------------------------------------------------------ the end

    def finished(self) -> bool:
        return all(self._done(step) for step in self.status)

    def outcome(self) -> tuple[str, str | None]:
        if self.first_failure is None:
            return JobStatus.COMPLETED, None
        return JobStatus.FAILED, f"step {self.first_failure} failed: {self.reasons[self.first_failure]}"

    # ------------------------------------------------------------ the faces

    @staticmethod
    def runs(loaded: Any) -> bool:
        from distrun.spec.loaded_pipeline import LoadedPipeline

        return isinstance(loaded, LoadedPipeline)

    @staticmethod
    def requested(request: dict[str, Any]) -> LoadedPipeline:
        from distrun.loading.pipeline_loader import load_pipeline_file

        return load_pipeline_file(request["file"], request.get("overrides") or [], request.get("base_dir"))

    @staticmethod
    def summary(record: JobRecord) -> str:
        from distrun.runner.summaries import pipeline_summary

        return pipeline_summary(record)


class StepGpus:
    """This machine's GPUs, shared by the local steps that ask for some: counted as the cores are,
    each step given GPUs no running step holds. `need`: the GPUs each local step asks for; the
    machine's are asked of the driver only when a step asks."""

    def __init__(self, need: dict[str, int]) -> None:
        from distrun.runner.pipeline_run import local_gpus

        self.need = need
        self.machine: tuple[str, ...] = local_gpus() if need else ()
        self.held: dict[str, tuple[str, ...]] = {}

    def given(self, step: str, document: dict[str, Any], running: list[str]) -> dict[str, Any]:
        """A step asking for GPUs sees those it was given (CUDA_VISIBLE_DEVICES, which the local
        backend slices between its nodes), none that a `running` step holds. A step that sets
        CUDA_VISIBLE_DEVICES itself keeps its own, and is counted for what it asks."""
        from distrun.plan.gpus import VISIBLE_DEVICES, parse_visible_devices

        asked = self.need.get(step, 0)
        variables = document.get("environment_variables")
        variables = dict(variables) if isinstance(variables, dict) else {}
        if not asked or not self.machine:
            return document
        if VISIBLE_DEVICES in variables:
            own = parse_visible_devices(str(variables[VISIBLE_DEVICES])) or ()
            self.held[step] = tuple(gpu for gpu in own if gpu in self.machine)
            return document
        devices = gpus_for(asked, self.machine, (self.held.get(s, ()) for s in running))
        self.held[step] = devices
        variables[VISIBLE_DEVICES] = ",".join(devices)
        return {**document, "environment_variables": variables}
