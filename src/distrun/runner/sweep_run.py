"""`distrun run sweep.yml`: a sweep job run as distrun jobs, one per trial.

Each trial is a distrun job of its own, named `<sweep>.trial_<n>`, submitted on the sweep's
compute target through the orchestrator (`distrun.runner.jobs.submit_job`), exactly as `distrun
job create` submits a job file: its own folder, record (with `parent` naming the sweep), per-rank
logs, root cause, its `distribution` and `resources`; `limits.trial_timeout` is its job's
`limits.timeout`. Nothing here knows an engine.

At most `limits.max_concurrent_trials` trials run at once, and on this machine only as many as
fit its cores (a trial larger than the machine runs alone), as pipeline steps do. The search
(`distrun.plan.sweep_search`) gives each new trial its parameters; a failed trial does not stop
the sweep. Each running trial's primary metric is read from its MLflow run as it logs it, and the
early termination policy (`distrun.plan.sweep_policies`) is applied at each interval: a trial it
stops is canceled, with the policy's reason in its record. The sweep ends when
`max_total_trials` trials ran (or the grid is exhausted), at `limits.timeout` (running trials
are canceled), or on cancel (Ctrl-C, `distrun job cancel SWEEP`). Its record names the best
completed trial, its parameters and metric, and its outputs are that trial's outputs.

This process supervises the sweep: it is the record's launcher, as a pipeline's `distrun run` is.
"""

from __future__ import annotations

import copy
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

if TYPE_CHECKING:
    from distrun.backends.base import Backend
    from distrun.prepare.compute import ComputeTarget
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.loaded_sweep import LoadedSweep
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

SWEEP_COMPUTE = "sweep"  # the `compute` of a sweep's own record: its trials name theirs
METRIC_LOOK_SECONDS = 0.25  # how often running trials' metrics are read (each a read of their run)
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


class SweepRun:
    def __init__(
        self,
        sweep: LoadedSweep,
        layout: Layout,
        say: Callable[[str], None],
        compute: str | None = None,
        name: str | None = None,
        capacity: int | None = None,
    ) -> None:
        from distrun.plan.sweep_search import search_for
        from distrun.prepare.compute import runs_on_this_machine
        from distrun.prepare.submission import generate_name
        from distrun.spec.checks import process_count
        from distrun.store.index import JobIndex

        self.sweep = sweep
        self.layout = layout
        self.say = say
        self.compute = compute
        self.name = name or sweep.spec.name or generate_name()
        self.index = JobIndex(layout.db_path)
        target, _, example = check_sweep(sweep, layout, compute, self.name)
        self.target = target
        self.processes = process_count(example.spec)
        self.here = runs_on_this_machine(target.type)
        limits = sweep.spec.limits
        self.max_total = limits.max_total_trials
        concurrent = min(limits.max_concurrent_trials or self.max_total, self.max_total)
        if self.here:  # trials on this machine share its cores; one larger than it runs alone
            concurrent = min(concurrent, max(1, (capacity or os.cpu_count() or 1) // self.processes))
        self.concurrent = concurrent
        self.objective = sweep.spec.objective
        self.search = search_for(sweep.search_space, sweep.algorithm, self.objective.goal)
        self.trials: dict[str, dict[str, Any]] = {}  # trial key -> its state, in start order
        self.values: dict[str, list[float]] = {}  # trial key -> its primary metric values, as logged
        self.exits = ChildExits()
        self.exhausted = False
        self.stopping: str | None = None  # why no other trial starts (the sweep's timeout)
        self.began = time.monotonic()
        self.last_look = 0.0  # when the running trials' runs were last read (time.monotonic())
        self.looked: dict[str, float] = {}  # when the engine was last asked about each trial it runs
        self.untracked_said = False

    # ------------------------------------------------------------ the record

    def sweep_field(self, best: dict[str, Any] | None = None) -> dict[str, Any]:
        policy = self.sweep.policy
        return {
            "objective": {"goal": self.objective.goal, "primary_metric": self.objective.primary_metric},
            "sampling_algorithm": self.sweep.algorithm.model_dump(exclude_none=True),
            "seed": self.search.seed,
            "early_termination": policy.model_dump(exclude_none=True) if policy is not None else None,
            "limits": self.sweep.spec.limits.model_dump(exclude_none=True),
            "search_space": {k: e.model_dump() for k, e in self.sweep.search_space.items()},
            "max_concurrent": self.concurrent,
            "best": best,
        }

    def record(self, status: JobStatus = JobStatus.RUNNING) -> None:
        """Record the sweep (no trial started), this process its supervisor."""
        sweep = self.sweep_field()
        record_parent(
            self.index, self.layout, self.name, status, self.sweep.spec, compute=SWEEP_COMPUTE, steps={}, sweep=sweep
        )

    def _save(self) -> None:
        self.index.update(self.name, steps=self.trials)

    # ------------------------------------------------------------ running

    def run(self, recorded: bool = False) -> JobRecord:
        """Run trials until the sweep ends; the sweep's final record. `recorded`: `record` was
        called (by `distrun run -d`, which started this process)."""
        from distrun.prepare.submission import interrupts_raised

        if not taken_over(self.index, self.name, recorded, self.record):
            return self.index.get(self.name)  # canceled before it started
        self.began = time.monotonic()
        self.say(f"RunId: {self.name}")
        self.say(self._header())
        try:
            with interrupts_raised(), launchers_for([self.target.type] if self.here else [], self.layout.home):
                while True:
                    self._follow()
                    self._check_timeout()
                    while self._may_start():
                        self._start_next()
                    running = self._running()
                    if not running and not self._may_start():
                        break
                    self.exits.wait(running, METRIC_LOOK_SECONDS)
        except KeyboardInterrupt:
            self._stop_all("canceled with the sweep")
            return self._finish(JobStatus.CANCELED, "canceled by the user")
        finally:
            self.exits.close()
        return self._finish(*self._outcome())

    def _header(self) -> str:
        algorithm = self.sweep.algorithm
        seed = f", seed {self.search.seed}" if self.search.seed is not None else ""
        rule = " (sobol)" if getattr(algorithm, "rule", "random") == "sobol" else ""
        policy = self.sweep.policy
        stop = f", early termination: {policy.type.replace('_', ' ')}" if policy is not None else ""
        return (
            f"Sweep: {algorithm.type}{rule} sampling{seed}, up to {self.max_total} trials, "
            f"{self.concurrent} at once on {self.target.name}; {self.objective.goal} "
            f"{self.objective.primary_metric}{stop}"
        )

    def _running(self) -> list[str]:
        return [key for key, state in self.trials.items() if not JobStatus.of(state["status"]).terminal]

    def _may_start(self) -> bool:
        return (
            self.stopping is None
            and not self.exhausted
            and len(self.trials) < self.max_total
            and len(self._running()) < self.concurrent
        )

    def _check_timeout(self) -> None:
        timeout = self.sweep.spec.limits.timeout
        if timeout is None or self.stopping is not None or time.monotonic() - self.began < timeout:
            return
        self.stopping = f"the sweep's timeout ({timeout:g} s) was reached"
        self.say(f"Sweep timeout ({timeout:g} s) reached: no trial starts, the running ones are canceled")
        self._stop_all(self.stopping)

    def _start_next(self) -> None:
        suggested = self.search.suggest()
        if suggested is None:
            self.exhausted = True
            return
        number, parameters = suggested
        key = trial_key(number)
        job = trial_job_name(self.name, key)
        state: dict[str, Any] = {
            "job": job,
            "number": number,
            "status": JobStatus.QUEUED.value,
            "parameters": parameters,
            "metric": None,
            "intervals": 0,
            "compute": self.target.name,
            "reason": None,
            "started_at": time.time(),
            "ended_at": None,
        }
        self.trials[key] = state  # counted as submitted from here: a Ctrl-C during it cancels the job
        self.values[key] = []
        try:
            loaded = trial_job(self.sweep, parameters, job)
            record, _ = jobs.submit_job(loaded, self.layout, self.compute, job)
        except DistrunError as exc:
            self._ended(key, JobStatus.FAILED, f"not started: {exc.render()}")
            return
        self.index.update(job, only_if_not_terminal=False, parent=self.name)
        state["status"] = record.status.value
        if record.backend_id:  # an engine's job: asked about at most every ENGINE_LOOK_SECONDS
            self.looked[key] = time.monotonic()
        self.exits.watch(key, record)
        processes = f"{self.processes} process{'es' if self.processes != 1 else ''}"
        self.say(f"[{key}] started as job {job} on {self.target.name}, {processes}: {parameters_text(parameters)}")
        self._save()

    def _follow(self) -> None:
        """Each running trial's new metric values (its policy applied to each), then its record.

        A trial an engine runs (Slurm, Ray, Kubernetes) is asked about at most every
        ENGINE_LOOK_SECONDS, as a pipeline's steps are; every trial's run is read at most every
        METRIC_LOOK_SECONDS, and once more when its job ended (it has logged all it will)."""
        now = time.monotonic()
        metrics_due = now - self.last_look >= METRIC_LOOK_SECONDS
        if metrics_due:
            self.last_look = now
        running = self._running()
        due = set(due_looks(running, self.looked, now))
        for key in running:
            state = self.trials[key]
            if JobStatus.of(state["status"]).terminal:
                continue  # stopped early since the list was made
            record = None
            if key in due:
                if key in self.looked:
                    self.looked[key] = now
                try:
                    record = jobs.get_job(self.layout, state["job"])
                except DistrunError as exc:  # its record was removed or damaged: the trial is lost
                    self._ended(key, JobStatus.FAILED, f"its job's record cannot be read: {exc.message}")
                    continue
            # The metrics after the record: a trial that ended has logged all it will.
            if (metrics_due or (record is not None and record.terminal)) and self._read_metrics(key):
                continue  # the policy stopped it
            if record is None:
                continue
            if record.terminal:
                self._ended(key, record.status, record.reason)
            elif record.status.value != state["status"]:
                state["status"] = record.status.value
                self._save()

    def _read_metrics(self, key: str) -> bool:
        """Read the trial's new primary metric values and apply the policy at each; True if it stopped the trial."""
        from distrun.metrics.history import metric_history
        from distrun.metrics.tracking import read_tracked_run
        from distrun.plan.sweep_policies import stop_reason

        state = self.trials[key]
        run = read_tracked_run(self.layout.job(state["job"]))
        if run is None:
            return False
        metric = self.objective.primary_metric
        points = metric_history(run, metric).get(metric, [])
        seen = self.values[key]
        new = [point.value for point in points[len(seen) :]]
        stopped = None
        for value in new:
            seen.append(value)
            state["metric"], state["intervals"] = value, len(seen)
            self.say(f"[{key}] {self.objective.primary_metric} = {_shown(value)} (interval {len(seen)})")
            if self.sweep.policy is not None and stopped is None:
                ended = {k for k, s in self.trials.items() if JobStatus.of(s["status"]).terminal}
                stopped = stop_reason(self.sweep.policy, self.objective.goal, self.values, key, len(seen), ended)
        if new:
            self._save()
        if stopped is None:
            return False
        self._stop(key, stopped)
        return True

    def _stop(self, key: str, why: str) -> None:
        """Cancel a trial's job; its record says why (the policy's reason, the sweep's timeout)."""
        state = self.trials[key]
        try:
            record = jobs.cancel_job(self.layout, state["job"])
        except DistrunError as exc:
            state["reason"] = f"could not be canceled: {exc.message}"
            return
        if record.status == JobStatus.CANCELED:
            self.index.update(state["job"], only_if_not_terminal=False, reason=why)
            self._ended(key, JobStatus.CANCELED, why)
        else:
            self._ended(key, record.status, record.reason)  # it ended by itself first

    def _stop_all(self, why: str) -> None:
        for key in self._running():
            self._stop(key, why)
        self._save()

    def _ended(self, key: str, status: str, reason: str | None) -> None:
        state = self.trials[key]
        state["status"] = JobStatus.of(status).value
        state["ended_at"] = time.time()
        self.exits.forget(key)
        took = f" in {state['ended_at'] - state['started_at']:.2f} s"
        metric = state["metric"]
        final = f": {self.objective.primary_metric} {_shown(metric)}" if metric is not None else ""
        if status == JobStatus.COMPLETED:
            self.say(f"[{key}] Completed{took}{final}")
            if metric is None and not self.untracked_said:
                self.untracked_said = True
                self.say(f"[{key}] logged no {self.objective.primary_metric}: it cannot be ranked")
        else:
            state["reason"] = reason or str(status)
            self.say(f"[{key}] {state['status']}{took}: {state['reason']}")
        # The search learns the trial's final value (a trial without one, or not completed, as failed).
        self.search.tell(state["number"], metric if status == JobStatus.COMPLETED else None)
        self._save()

    # ------------------------------------------------------------ the end

    def _best(self) -> dict[str, Any] | None:
        from distrun.plan.sweep_policies import rankable

        ranked = ranked_trials(self.trials, self.objective.goal)
        for key, state in ranked:
            if state["status"] == JobStatus.COMPLETED.value and rankable(state["metric"]):
                outputs = self.layout.job(state["job"]).named_outputs
                names = sorted((self.sweep.spec.outputs or {}).keys())
                return {
                    "trial": key,
                    "job": state["job"],
                    "parameters": state["parameters"],
                    "metric": state["metric"],
                    "outputs": {name: str(outputs / name) for name in names},
                }
        return None

    def _outcome(self) -> tuple[JobStatus, str | None]:
        completed = [k for k, s in self.trials.items() if s["status"] == JobStatus.COMPLETED.value]
        if completed:
            return JobStatus.COMPLETED, self.stopping
        if not self.trials:
            return JobStatus.FAILED, "no trial started"
        first = next(iter(self.trials.values()))
        return JobStatus.FAILED, f"no trial completed; {next(iter(self.trials))}: {first['reason']}"

    def _finish(self, status: JobStatus, reason: str | None) -> JobRecord:
        self.index.update(
            self.name,
            only_if_not_terminal=False,
            status=status,
            reason=reason,
            ended_at=time.time(),
            steps=self.trials,
            sweep=self.sweep_field(self._best()),
        )
        return self.index.get(self.name)


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


BUILT_FILE = "sweep.yml"  # a sweep built in Python (distrun's SDK), kept in its folder


def start_detached(
    run: SweepRun,
    file: str | None,
    overrides: list[str],
    step: dict[str, Any] | None = None,
    document: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> JobRecord:
    """`distrun run -d sweep.yml`: record the sweep, then supervise it from a new background
    process (`python -m distrun.runner.sweep_run NAME`), which loads the file again as given.
    A pipeline's sweep step gives `step` instead (`distrun.runner.pipeline_sweeps.step_request`);
    a sweep built in Python its `document`, written to the sweep's folder for that process to
    load, with relative paths starting at `base_dir`."""
    run.record(JobStatus.QUEUED)
    request = detached_request(run.layout, run.name, file, overrides, run.compute, document, base_dir, BUILT_FILE)
    request["step"] = step
    start_supervisor(run.layout, run.name, "distrun.runner.sweep_run", request)
    return run.index.get(run.name)


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


def _supervise(name: str) -> int:
    """The background supervisor of a sweep `distrun run -d` recorded."""
    from distrun.store.layout import Layout

    layout = Layout()
    try:
        request = read_request(layout, name)
        sweep = requested_sweep(request)
        run = SweepRun(sweep, layout, lambda text: print(text, flush=True), request.get("compute"), name)
    except (DistrunError, OSError, ValueError, KeyError, TypeError) as exc:
        return not_started(layout, name, exc)
    run.index.update(name, sweep=run.sweep_field())  # with the seed this process drew
    final = run.run(recorded=True)
    print(sweep_summary(final), flush=True)
    return 0 if final.status == JobStatus.COMPLETED else 1


if __name__ == "__main__":
    import sys

    sys.exit(_supervise(sys.argv[1]))
