"""`distrun run sweep.yml`: a sweep job run as distrun jobs, one per trial.

Each trial is a distrun job of its own, named `<sweep>.trial_<n>`, on the sweep's compute
target, started by the one parent-run loop (`distrun.runner.parent_run`); this is the sweep's
policy over it. A trial's job has its own folder, record (with `parent` naming the sweep),
per-rank logs, root cause, its `distribution` and `resources`; `limits.trial_timeout` is its
job's `limits.timeout`. Nothing here knows an engine.

At most `limits.max_concurrent_trials` trials run at once, and on this machine only as many as
fit its cores (a trial larger than the machine runs alone), as pipeline steps do. The search
(`distrun.plan.sweep_search`) gives each new trial its parameters; a failed trial does not stop
the sweep. Each running trial's primary metric is read from its MLflow run as it logs it, and the
early termination policy (`distrun.plan.sweep_policies`) is applied at each interval
(`distrun.runner.sweep_metrics`): a trial it
stops is canceled, with the policy's reason in its record. The sweep ends when
`max_total_trials` trials ran (or the grid is exhausted), at `limits.timeout` (running trials
are canceled), or on cancel (Ctrl-C, `distrun job cancel SWEEP`). Its record names the best
completed trial, its parameters and metric, and its outputs are that trial's outputs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.runner.parent_policy import Look
from distrun.runner.summaries import parameters_text, shown_value
from distrun.runner.sweep_metrics import METRIC_LOOK_SECONDS, TrialMetrics
from distrun.runner.sweep_run import (
    check_sweep,
    requested_sweep,
    trial_job,
    trial_job_name,
    trial_key,
)
from distrun.runner.sweep_unranked import (
    best_trial,
    failed_trial_cause,
    logged_text,
    no_best_why,
    refuse_untracked,
)

if TYPE_CHECKING:
    from distrun.runner.parent_policy import Say
    from distrun.spec.loaded import LoadedJob
    from distrun.spec.loaded_sweep import LoadedSweep
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

SWEEP_COMPUTE = "sweep"  # the `compute` of a sweep's own record: its trials name theirs


class SweepPolicy:
    kind = JobKind.SWEEP
    record_compute = SWEEP_COMPUTE
    built_file = "sweep.yml"  # a sweep built in Python (distrun's SDK), kept in its folder
    canceled_why = "canceled with the sweep"
    longest_wait = METRIC_LOOK_SECONDS

    def __init__(
        self,
        sweep: LoadedSweep,
        layout: Layout,
        say: Say,
        compute: str | None,
        name: str,
        capacity: int | None = None,
    ) -> None:
        from distrun.loading.checks import process_count
        from distrun.plan.sweep_search import search_for
        from distrun.prepare.compute import runs_on_this_machine
        from distrun.store.index import JobIndex

        self.sweep = sweep
        self.spec = sweep.spec
        self.layout = layout
        self.say = say
        self.name = name
        self.index = JobIndex(layout.db_path)
        target, _, example = check_sweep(sweep, layout, compute, self.name)
        self.target = target
        self.processes = process_count(example.spec)
        here = runs_on_this_machine(target.type)
        self.machine_types = [target.type] if here else []
        limits = sweep.spec.limits
        self.max_total = limits.max_total_trials
        concurrent = min(limits.max_concurrent_trials or self.max_total, self.max_total)
        if here:  # trials on this machine share its cores; one larger than it runs alone
            concurrent = min(concurrent, max(1, (capacity or os.cpu_count() or 1) // self.processes))
        self.concurrent = concurrent
        self.objective = sweep.spec.objective
        self.search = search_for(sweep.search_space, sweep.algorithm, self.objective.goal)
        self.trials: dict[str, dict[str, Any]] = {}  # trial key -> its state, in start order
        self.metrics = TrialMetrics(sweep, layout, say)  # what each trial logged
        self.exhausted = False
        self.stopping: str | None = None  # why no other trial starts (the sweep's timeout)
        self.began = time.monotonic()
        self.first_failure: str | None = None  # the first trial that failed (its cause is the sweep's)
        refuse_untracked(self.name, self.objective.primary_metric)

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

    def steps(self) -> dict[str, Any]:
        return self.trials

    def record_fields(self) -> dict[str, Any]:
        return {"sweep": self.sweep_field()}

    def final_fields(self) -> dict[str, Any]:
        """The best trial; when there is none, the first failed trial's root cause, named."""
        best = self._best()
        cause = None
        if best is None and self.first_failure is not None:
            cause = failed_trial_cause(self.layout, self.first_failure, self.trials[self.first_failure]["job"])
        return {"sweep": self.sweep_field(best), "root_cause": cause}

    # ------------------------------------------------------------ the trials

    def begin(self) -> str:
        self.began = time.monotonic()
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

    def job_name(self, key: str) -> str:
        return trial_job_name(self.name, key)

    def running(self) -> list[str]:
        return [key for key, state in self.trials.items() if not JobStatus.of(state["status"]).terminal]

    def _may_start(self) -> bool:
        return (
            self.stopping is None
            and not self.exhausted
            and len(self.trials) < self.max_total
            and len(self.running()) < self.concurrent
        )

    def to_start(self) -> Iterator[str]:
        while self._may_start():
            suggested = self.search.suggest()
            if suggested is None:
                self.exhausted = True
                return
            number, parameters = suggested
            key = trial_key(number)
            # Counted as submitted from here: a Ctrl-C during the submission cancels the job it makes.
            self.trials[key] = {
                "job": self.job_name(key),
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
            self.metrics.add(key)
            yield key

    def child(self, key: str) -> LoadedJob:
        state = self.trials[key]
        return trial_job(self.sweep, state["parameters"], state["job"])

    def started(self, key: str, record: JobRecord) -> None:
        state = self.trials[key]
        state["status"] = record.status.value
        processes = f"{self.processes} process{'es' if self.processes != 1 else ''}"
        parameters = parameters_text(state["parameters"])
        self.say(f"[{key}] started as job {state['job']} on {self.target.name}, {processes}: {parameters}")

    # ------------------------------------------------------------ following them

    def looked(self, key: str, record: JobRecord | None) -> Look:
        """The trial's new metric values, read at most every METRIC_LOOK_SECONDS and once more
        when its job ended (it has logged all it will), its early termination policy applied to
        each (its reason to stop the trial); then its status, from a record that did not end."""
        changed, stop = False, None
        if self.metrics.due(key, record):
            changed, stop = self.metrics.read(key, self.trials)
        state = self.trials[key]
        if stop is None and record is not None and not record.terminal and record.status.value != state["status"]:
            state["status"] = record.status.value
            changed = True
        return Look(changed, stop)

    def outcome_of(self, key: str, record: JobRecord) -> tuple[str, str | None]:
        return record.status, record.reason

    def ended(self, key: str, status: str, reason: str | None) -> str | None:
        state = self.trials[key]
        state["status"] = JobStatus.of(status).value
        state["ended_at"] = time.time()
        took = f" in {state['ended_at'] - state['started_at']:.2f} s"
        metric = state["metric"]
        final = f": {self.objective.primary_metric} {shown_value(metric)}" if metric is not None else ""
        if status == JobStatus.COMPLETED:
            self.say(f"[{key}] Completed{took}{final}")
            if metric is None:
                state["logged"] = self.metrics.logged(state["job"])
                self.say(
                    f"[{key}] logged no {self.objective.primary_metric}: it cannot be ranked"
                    + logged_text(self.objective.primary_metric, state["logged"])
                )
        else:
            state["reason"] = reason or str(status)
            self.say(f"[{key}] {state['status']}{took}: {state['reason']}")
            if status == JobStatus.FAILED and self.first_failure is None:
                self.first_failure = key
        # The search learns the trial's final value (a trial without one, or not completed, as failed).
        self.search.tell(state["number"], metric if status == JobStatus.COMPLETED else None)
        return None  # a failed trial does not stop the sweep

    # ------------------------------------------------------------ stopping

    def stop_reason(self) -> str | None:
        """The sweep's timeout, once reached: no trial starts, the running ones are canceled."""
        timeout = self.sweep.spec.limits.timeout
        if timeout is None or self.stopping is not None or time.monotonic() - self.began < timeout:
            return None
        self.stopping = f"the sweep's timeout ({timeout:g} s) was reached"
        self.say(f"Sweep timeout ({timeout:g} s) reached: no trial starts, the running ones are canceled")
        return self.stopping

    def stop_starting(self, why: str) -> None:
        pass  # trials not started are not listed; after a timeout `stopping` starts no other

    def canceled(self, key: str, record: JobRecord, why: str) -> tuple[str, str | None] | None:
        """A trial canceled by the sweep (its policy, its timeout, its cancel): its record says why;
        one that ended by itself first keeps its own end."""
        if record.status != JobStatus.CANCELED:
            return record.status, record.reason
        self.index.update(self.trials[key]["job"], only_if_not_terminal=False, reason=why)
        return JobStatus.CANCELED, why

    def not_canceled(self, key: str, why: str) -> None:
        self.trials[key]["reason"] = why

    # ------------------------------------------------------------ the end

    def finished(self) -> bool:
        return not self.running() and not self._may_start()

    def _best(self) -> dict[str, Any] | None:
        outputs = sorted((self.sweep.spec.outputs or {}).keys())
        return best_trial(self.trials, self.objective.goal, self.layout, outputs)

    def outcome(self) -> tuple[str, str | None]:
        """Completed when a trial can be ranked (it completed and logged the primary metric);
        otherwise Failed, saying why no trial could be."""
        if self._best() is not None:
            return JobStatus.COMPLETED, self.stopping
        return JobStatus.FAILED, no_best_why(self.trials, self.objective.primary_metric, self.first_failure)

    # ------------------------------------------------------------ the faces

    @staticmethod
    def runs(loaded: Any) -> bool:
        from distrun.spec.loaded_sweep import LoadedSweep

        return isinstance(loaded, LoadedSweep)

    @staticmethod
    def requested(request: dict[str, Any]) -> LoadedSweep:
        return requested_sweep(request)

    @staticmethod
    def summary(record: JobRecord) -> str:
        from distrun.runner.summaries import sweep_summary

        return sweep_summary(record)
