"""A sweep's trials' primary metric, read from each trial's MLflow run as it logs it.

The sweep's policy (`distrun.runner.sweep_policy`) starts and ends trials; this reads what they
logged: each running trial's new primary metric values (at most every METRIC_LOOK_SECONDS, and
once more when its job ended), each said and given to the early termination policy
(`distrun.plan.sweep_policies`), whose reason to stop the trial it returns; and the names of what
a trial logged, when it logged no primary metric.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from distrun.core.job_status import JobStatus
from distrun.runner.summaries import shown_value

if TYPE_CHECKING:
    from distrun.runner.parent_policy import Say
    from distrun.spec.loaded_sweep import LoadedSweep
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

METRIC_LOOK_SECONDS = 0.25  # how often a running trial's metrics are read (each a read of its run)


class TrialMetrics:
    """Each trial's primary metric values as logged, and when its run was last read."""

    def __init__(self, sweep: LoadedSweep, layout: Layout, say: Say) -> None:
        self.sweep = sweep
        self.layout = layout
        self.say = say
        self.objective = sweep.spec.objective
        self.values: dict[str, list[float]] = {}  # trial key -> its primary metric values, as logged
        self.read_at: dict[str, float] = {}  # trial key -> when its run was last read (monotonic)

    def add(self, key: str) -> None:
        self.values[key] = []

    def due(self, key: str, record: JobRecord | None) -> bool:
        """Whether the trial's run is read now: its job ended (it logged all it will), or it was
        last read METRIC_LOOK_SECONDS ago."""
        now = time.monotonic()
        if (record is not None and record.terminal) or now - self.read_at.get(key, 0.0) >= METRIC_LOOK_SECONDS:
            self.read_at[key] = now
            return True
        return False

    def read(self, key: str, trials: dict[str, dict[str, Any]]) -> tuple[bool, str | None]:
        """The trial's new primary metric values, said and kept in its state (of `trials`); whether
        there were any, and the early termination policy's reason to stop it."""
        from distrun.metrics.history import metric_history
        from distrun.metrics.tracking import read_tracked_run
        from distrun.plan.sweep_policies import stop_reason

        state = trials[key]
        run = read_tracked_run(self.layout.job(state["job"]))
        if run is None:
            return False, None
        metric = self.objective.primary_metric
        points = metric_history(run, metric).get(metric, [])
        seen = self.values[key]
        new = [point.value for point in points[len(seen) :]]
        stopped = None
        for value in new:
            seen.append(value)
            state["metric"], state["intervals"] = value, len(seen)
            self.say(f"[{key}] {metric} = {shown_value(value)} (interval {len(seen)})")
            if self.sweep.policy is not None and stopped is None:
                ended = {k for k, s in trials.items() if JobStatus.of(s["status"]).terminal}
                stopped = stop_reason(self.sweep.policy, self.objective.goal, self.values, key, len(seen), ended)
        return bool(new), stopped

    def logged(self, job: str) -> list[str] | None:
        """The names of the metrics the trial's job logged; None when it was not tracked."""
        from distrun.metrics.history import metric_history
        from distrun.metrics.tracking import read_tracked_run

        run = read_tracked_run(self.layout.job(job))
        if run is None:
            return None
        return sorted(metric_history(run))  # {} when its store cannot be read
