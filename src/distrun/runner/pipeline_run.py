"""`distrun run pipeline.yml`: a pipeline run as a graph of distrun jobs.

Each step is a distrun job of its own, named `<pipeline>.<step>`, submitted on its step's
compute target through the orchestrator (`distrun.runner.jobs.submit_job`), exactly as `distrun
job create` submits a job file: its own folder, record (with `parent` naming the pipeline),
per-rank logs, root cause and restarts. Nothing here knows an engine, so a step on Slurm, Ray or
Kubernetes is submitted and followed the same way (`get_job` refreshes an engine's job, which
asks the engine: that is done at most every `child_jobs.ENGINE_LOOK_SECONDS` a step).

A step is submitted once every step it reads from Completed; it reads their outputs by path
(`azureml://jobs/<job>/outputs/<name>`, resolved by the data layer to the folder the job wrote),
and is loaded and checked then, as a job file is, with those paths existing. On a target whose
nodes do not see this machine's job folders (Ray, Kubernetes), that folder is filled by the
backend when the upstream job ends, and the step's job gets a copy to ship with its code
(`distrun.prepare.submission.bind`): nothing here differs by engine. Steps that are
ready together start together, bounded on local compute by this machine's cores
(`distrun.runner.pipeline_schedule`). A failed step stops every step below it; without
`settings.continue_on_step_failure` it also cancels the steps still running and starts no other.
The pipeline's own record (no processes: `steps` lists each step's job and state) ends Failed
naming the first failing step, with that step's root cause (its first failing rank and traceback).

This process supervises the pipeline: it is the record's launcher, so a pipeline whose
`distrun run` is killed is found "launcher lost" by the next reader, as a job's is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.runner import jobs
from distrun.runner.child_jobs import (
    ChildExits,
    detached_request,
    due_looks,
    launchers_for,
    not_started,
    read_request,
    record_parent,
    start_supervisor,
    taken_over,
)
from distrun.runner.pipeline_schedule import NOT_STARTED, gpus_for, startable, stopped_by
from distrun.runner.pipeline_sweeps import best_text, start_sweep_step, step_outcome, sweep_state, trial_lines
from distrun.runner.pipelines import check_pipeline, step_job_name

if TYPE_CHECKING:
    from distrun.spec.loaded_pipeline import LoadedPipeline, UpstreamOutput
    from distrun.store.index import JobIndex, JobRecord
    from distrun.store.layout import Layout

PIPELINE_COMPUTE = "pipeline"  # the `compute` of a pipeline's own record: its steps name theirs


class PipelineRun:
    def __init__(
        self,
        pipeline: LoadedPipeline,
        layout: Layout,
        say: Callable[[str], None],
        compute: str | None = None,
        name: str | None = None,
        capacity: int | None = None,
    ) -> None:
        from distrun.prepare.compute import runs_on_this_machine
        from distrun.prepare.submission import generate_name
        from distrun.spec.checks import process_count
        from distrun.store.index import JobIndex

        self.pipeline = pipeline
        self.layout = layout
        self.say = say
        self.compute = compute
        self.name = name or pipeline.spec.name or generate_name()
        self.index: JobIndex = JobIndex(layout.db_path)
        self.capacity = capacity or os.cpu_count() or 1
        targets = check_pipeline(pipeline, layout, compute)
        self.targets = {step: target.name for step, (target, _) in targets.items()}
        # Steps whose processes run on this machine share its cores (`capacity`); an engine's don't.
        here = {step for step, (target, _) in targets.items() if runs_on_this_machine(target.type)}
        self.local_steps = [step for step in pipeline.steps if step in here]
        self.machine_types = sorted({targets[step][0].type for step in here})
        self.processes = {step: process_count_of(pipeline, step, process_count) for step in pipeline.steps}
        self.local_size = {step: self.processes[step] if step in here else 0 for step in pipeline.steps}
        # The GPUs each local step asks for, and this machine's (asked of the driver only when
        # a step asks): counted as the cores are, each step given GPUs no running step holds.
        asked = {step: process_count_of(pipeline, step, gpus_asked) for step in self.local_steps}
        self.gpu_need = {step: n for step, n in asked.items() if n}
        self.machine_gpus: tuple[str, ...] = local_gpus() if self.gpu_need else ()
        self.gpus_held: dict[str, tuple[str, ...]] = {}
        self.depends_on = pipeline.depends_on
        self.status: dict[str, str] = dict.fromkeys(pipeline.steps, NOT_STARTED)
        self.reasons: dict[str, str] = {}
        self.times: dict[str, list[float | None]] = {step: [None, None] for step in pipeline.steps}
        self.first_failure: str | None = None
        self.stopping = False
        # Step reuse: the job whose outputs each step has (an earlier run's, for a reused step),
        # and the key of each step that ran, recorded for later runs once it completed.
        self.job_of = {step: step_job_name(self.name, step) for step in pipeline.steps}
        self.reused_from: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        # A running step's supervisor on this machine, as a pidfd: readable once it exited.
        self.exits = ChildExits()
        # When the engine was last asked about each step it runs (time.monotonic()).
        self.looked: dict[str, float] = {}
        # Each sweep step's trials and best trial, as its sweep's record says, and the trials said.
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.trials_said: dict[str, set[str]] = {}

    # ------------------------------------------------------------ the record

    def _steps_field(self) -> dict[str, Any]:
        return {
            step: {
                **({"sweep": self.sweeps.get(step)} if self.pipeline.steps[step].is_sweep else {}),
                "job": self.job_of[step],
                "status": self.status[step],
                "reused": step in self.reused_from,
                "depends_on": list(self.depends_on[step]),
                "compute": self.targets[step],
                "reason": self.reasons.get(step),
                "started_at": self.times[step][0],
                "ended_at": self.times[step][1],
            }
            for step in self.pipeline.steps
        }

    def record(self, status: JobStatus = JobStatus.RUNNING) -> None:
        """Record the pipeline (its steps not started), this process its supervisor."""
        self._record(status)

    def _record(self, status: JobStatus = JobStatus.RUNNING) -> None:
        spec, steps = self.pipeline.spec, self._steps_field()
        record_parent(self.index, self.layout, self.name, status, spec, compute=PIPELINE_COMPUTE, steps=steps)

    def _save(self) -> None:
        self.index.update(self.name, steps=self._steps_field())

    # ------------------------------------------------------------ running

    def run(self, recorded: bool = False) -> JobRecord:
        """Run every step to its end (or until the pipeline fails); the pipeline's final record.
        `recorded`: `record` was called (by `distrun run -d`, which started this process)."""
        from distrun.prepare.submission import interrupts_raised

        if not taken_over(self.index, self.name, recorded, self._record):
            return self.index.get(self.name)  # canceled before it started
        self.say(f"RunId: {self.name}")
        order = ", ".join(self.pipeline.run_order())
        count = len(self.status)
        self.say(f"Pipeline: {count} step{'s' if count != 1 else ''} ({order})")
        try:
            with interrupts_raised(), launchers_for(self.machine_types, self.layout.home):
                while not all(self._done(step) for step in self.status):
                    self._follow_running()
                    ready = startable(
                        self.depends_on,
                        self.status,
                        self.local_size,
                        self.capacity,
                        self.gpu_need,
                        len(self.machine_gpus),
                    )
                    for step in ready:
                        if self.stopping:
                            break  # a step that failed to start stopped the pipeline
                        self._start(step)
                    self._wait()
        except KeyboardInterrupt:
            self._cancel_all("canceled")
            return self._finish(JobStatus.CANCELED, "canceled by the user")
        finally:
            self.exits.close()
        if self.first_failure is None:
            return self._finish(JobStatus.COMPLETED, None)
        return self._finish(JobStatus.FAILED, f"step {self.first_failure} failed: {self.reasons[self.first_failure]}")

    def _wait(self) -> None:
        running = [s for s, state in self.status.items() if state != NOT_STARTED and not JobStatus.of(state).terminal]
        self.exits.wait(running)

    def _done(self, step: str) -> bool:
        return self.status[step] != NOT_STARTED and JobStatus.of(self.status[step]).terminal

    def _start(self, step: str) -> None:
        from distrun.data.locations import job_output_uri
        from distrun.spec.loader import load_job_data

        pipeline_step = self.pipeline.steps[step]
        job = step_job_name(self.name, step)
        self.times[step][0] = time.time()
        # Counted as submitted from here: a Ctrl-C during the submission cancels the job it made.
        self.status[step] = JobStatus.QUEUED
        try:
            document = pipeline_step.bound_document(
                lambda up: job_output_uri(self.job_of[up.step], up.output), self._value_of
            )
            if self._reused(step, document):
                return
            if pipeline_step.is_sweep:
                record = start_sweep_step(self.pipeline, pipeline_step, document, self.layout, self.compute, job)
            else:
                document = self._with_gpus(step, document)
                loaded = load_job_data(
                    document, pipeline_step.base_dir, self.pipeline.source, smap=pipeline_step.source_map
                )
                record, _ = jobs.submit_job(loaded, self.layout, self.compute, job)
        except DistrunError as exc:
            self._ended(step, JobStatus.FAILED, f"not started: {exc.render()}")
            return
        self.index.update(job, only_if_not_terminal=False, parent=self.name)
        self.status[step] = record.status
        if record.backend_id:
            self.looked[step] = time.monotonic()
        self.exits.watch(step, record)
        processes = self.processes[step]
        where = f"{self.targets[step]}, {processes} process{'es' if processes != 1 else ''}"
        if pipeline_step.is_sweep:
            self.sweeps[step] = sweep_state(record)
            self.trials_said[step] = set()
            self.say(f"[{step}] started as sweep {job} on {where} a trial (its trials: {job}.trial_N)")
        else:
            self.say(f"[{step}] started as job {job} on {where}")
        self._save()

    def _value_of(self, upstream: UpstreamOutput, kind: str) -> Any:
        """The value a completed step wrote to a value output (its file's text, of the reading
        input's type), read through the safe path: the step's processes could write anything there."""
        from distrun.runner.pipelines import output_value

        return output_value(self.layout, self.job_of[upstream.step], upstream, kind)

    def _with_gpus(self, step: str, document: dict[str, Any]) -> dict[str, Any]:
        """A step asking for GPUs sees those it was given (CUDA_VISIBLE_DEVICES, which the local
        backend slices between its nodes), none that a running step holds. A step that sets
        CUDA_VISIBLE_DEVICES itself keeps its own, and is counted for what it asks."""
        from distrun.plan.gpus import VISIBLE_DEVICES, parse_visible_devices

        asked = self.gpu_need.get(step, 0)
        variables = document.get("environment_variables")
        variables = dict(variables) if isinstance(variables, dict) else {}
        if not asked or not self.machine_gpus:
            return document
        if VISIBLE_DEVICES in variables:
            own = parse_visible_devices(str(variables[VISIBLE_DEVICES])) or ()
            self.gpus_held[step] = tuple(gpu for gpu in own if gpu in self.machine_gpus)
            return document
        running = [s for s, state in self.status.items() if s != step and not self._done(s) and state != NOT_STARTED]
        devices = gpus_for(asked, self.machine_gpus, (self.gpus_held.get(s, ()) for s in running))
        self.gpus_held[step] = devices
        variables[VISIBLE_DEVICES] = ",".join(devices)
        return {**document, "environment_variables": variables}

    def _reused(self, step: str, document: dict[str, Any]) -> bool:
        """Whether the step was reused (then it is Completed with the earlier run's outputs);
        otherwise its key is kept, to be recorded when it completed."""
        from distrun.runner.pipeline_reuse import earlier_run, pipeline_step_key
        from distrun.spec.pipeline_reuse import why_not_reused
        from distrun.store.step_reuse import completed_run

        pipeline_step = self.pipeline.steps[step]
        if not pipeline_step.is_deterministic:
            return False
        key = pipeline_step_key(pipeline_step, document, self.layout.home)
        if key is None:
            return False
        self.keys[step] = key
        why = why_not_reused(True, self.pipeline.spec.settings.force_rerun, pipeline_step.force_rerun)
        if why is not None:
            if completed_run(self.layout.home, key) is not None:
                self.say(f"[{step}] not reused: {why}")
            return False
        earlier, why = earlier_run(self.layout.home, key)
        if earlier is None:
            if why:
                self.say(f"[{step}] not reused: {why}")
            return False
        same, best = "same component, inputs and code", ""
        if pipeline_step.is_sweep:  # its outputs are its best trial's, which the record shows
            try:
                self.sweeps[step] = sweep_state(self.index.get(earlier.job))
            except DistrunError as exc:  # removed since `earlier_run` read it
                self.say(f"[{step}] not reused: the earlier run {earlier.job} cannot be reused: {exc.message}")
                return False
            same, best = "same sweep, trial component, inputs and code", f": {best_text(self.sweeps[step])}"
        self.job_of[step] = earlier.job
        self.reused_from[step] = earlier.job
        self.status[step] = JobStatus.COMPLETED
        self.times[step][1] = time.time()
        self.say(f"[{step}] Reused: the outputs of job {earlier.job} ({same}){best}")
        self._save()
        return True

    def _follow_running(self) -> None:
        running = [s for s, state in self.status.items() if state != NOT_STARTED and not JobStatus.of(state).terminal]
        now = time.monotonic()
        for step in due_looks(running, self.looked, now):
            state = self.status[step]
            if JobStatus.of(state).terminal:
                continue  # ended since the list was made (canceled after another step failed)
            if step in self.looked:
                self.looked[step] = now
            try:
                record = jobs.get_job(self.layout, step_job_name(self.name, step))
            except DistrunError as exc:  # its record was removed or damaged: the step is lost
                self._ended(step, JobStatus.FAILED, f"its job's record cannot be read: {exc.message}")
                continue
            if step in self.sweeps:
                self._follow_sweep(step, record)
            if record.terminal and step in self.sweeps:
                self._ended(step, *step_outcome(record))
            elif record.terminal:
                self._ended(step, record.status, record.reason, record)
            elif record.status != state:
                self.status[step] = record.status
                self._save()

    def _follow_sweep(self, step: str, record: JobRecord) -> None:
        """A sweep step's trials that ended since the last look, said; its best trial kept."""
        for line in trial_lines(record, self.trials_said[step]):
            self.say(f"[{step}] {line}")
        state = sweep_state(record)
        if state != self.sweeps[step]:
            self.sweeps[step] = state
            self._save()

    def _ended(self, step: str, status: str, reason: str | None, record: JobRecord | None = None) -> None:
        self.status[step] = status
        self.exits.forget(step)
        self.times[step][1] = time.time()
        started = self.times[step][0] or self.times[step][1]
        took = f" in {self.times[step][1] - started:.2f} s" if started else ""  # type: ignore[operator]
        if status == JobStatus.COMPLETED:
            best = f": {best_text(self.sweeps[step])}" if step in self.sweeps else ""
            self.say(f"[{step}] Completed{took}{best}")
            self._remember(step)
        else:
            self.reasons[step] = reason or status
            self.say(f"[{step}] {status}{took}: {self.reasons[step]}")
            if self.first_failure is None:
                self.first_failure = step
            for below in stopped_by(step, self.depends_on, self.status):
                self.status[below] = JobStatus.CANCELED
                self.reasons[below] = f"not started: step {step} did not complete"
                self.say(f"[{below}] not started: step {step} did not complete")
            if not self.pipeline.spec.settings.continue_on_step_failure and not self.stopping:
                self.stopping = True
                self._cancel_all(f"step {step} failed")
        self._save()

    def _remember(self, step: str) -> None:
        """A completed step's key and outputs (a sweep step's: its best trial's), kept in the store
        for later runs to reuse."""
        from distrun.runner.pipeline_reuse import remember_step

        key = self.keys.get(step)
        if key is None:
            return
        outputs = self.pipeline.steps[step].document.get("outputs")
        names = list(outputs) if isinstance(outputs, dict) else []
        why = remember_step(self.layout.home, key, self.job_of[step], step, self.name, names)
        if why is not None:
            self.say(f"[{step}] cannot be reused later: {why}")

    def _cancel_all(self, why: str) -> None:
        """Cancel every running step's job (each waits its grace period), and start no other."""
        self.stopping = True
        for step, state in list(self.status.items()):
            if state == NOT_STARTED:
                self.status[step] = JobStatus.CANCELED
                self.reasons[step] = f"not started: {why}"
                continue
            if JobStatus.of(state).terminal:
                continue
            try:
                record = jobs.cancel_job(self.layout, step_job_name(self.name, step))
            except DistrunError as exc:
                self.reasons[step] = f"could not be canceled: {exc.message}"
                continue
            self.status[step] = record.status
            self.times[step][1] = time.time()
            self.reasons[step] = record.reason or why
            self.say(f"[{step}] {record.status}: {why}")
        self._save()

    def _finish(self, status: JobStatus, reason: str | None) -> JobRecord:
        root_cause = None
        if self.first_failure is not None:
            failing = step_job_name(self.name, self.first_failure)
            try:
                cause = jobs.get_job(self.layout, failing).root_cause
            except DistrunError:
                cause = None
            root_cause = {**(cause or {}), "step": self.first_failure, "job": failing}
        self.index.update(
            self.name,
            only_if_not_terminal=False,
            status=status,
            reason=reason,
            root_cause=root_cause,
            ended_at=time.time(),
            steps=self._steps_field(),
        )
        return self.index.get(self.name)


def process_count_of(pipeline: LoadedPipeline, step: str, count: Callable[[Any], int]) -> int:
    """How many processes a step's job runs (its document was validated with the pipeline)."""
    from distrun.spec import models
    from distrun.spec.normalize import normalize

    pipeline_step = pipeline.steps[step]
    if pipeline_step.is_sweep:  # each trial's
        from distrun.plan.sweep_search import example_parameters
        from distrun.runner.pipelines import step_sweep, unchecked_trial_job

        sweep = step_sweep(pipeline, pipeline_step, lambda up: "unused", step)
        example = example_parameters(sweep.search_space, sweep.algorithm)
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


# ---------------------------------------------------------------- in the background


BUILT_FILE = "pipeline.yml"  # a pipeline built in Python (distrun's SDK), kept in its folder


def start_detached(
    run: PipelineRun,
    file: str | None,
    overrides: list[str],
    document: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> JobRecord:
    """`distrun run -d pipeline.yml`: record the pipeline, then supervise it from a new background
    process (`python -m distrun.runner.pipeline_run NAME`), which loads the file again as given.
    A pipeline built in Python gives its `document` instead, written to the pipeline's folder
    for that process to load, with relative paths starting at `base_dir`."""
    run.record(JobStatus.QUEUED)
    assert file is not None or document is not None
    request = detached_request(run.layout, run.name, file, overrides, run.compute, document, base_dir, BUILT_FILE)
    start_supervisor(run.layout, run.name, "distrun.runner.pipeline_run", request)
    return run.index.get(run.name)


def _supervise(name: str) -> int:
    """The background supervisor of a pipeline `distrun run -d` recorded."""
    from distrun.spec.pipeline_loader import load_pipeline_file
    from distrun.store.layout import Layout

    layout = Layout()
    try:
        request = read_request(layout, name)
        pipeline = load_pipeline_file(request["file"], request.get("overrides") or [], request.get("base_dir"))
        run = PipelineRun(pipeline, layout, lambda text: print(text, flush=True), request.get("compute"), name)
    except (DistrunError, OSError, ValueError, KeyError, TypeError) as exc:
        return not_started(layout, name, exc)
    final = run.run(recorded=True)
    print(pipeline_summary(final), flush=True)
    return 0 if final.status == JobStatus.COMPLETED else 1


if __name__ == "__main__":
    import sys

    sys.exit(_supervise(sys.argv[1]))
