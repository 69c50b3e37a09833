"""A sweep's best trial, or why it could not rank one, said rather than hidden.

A sweep ranks its completed trials by the primary metric each logged to its MLflow run. When
MLflow is not installed no metric can be read: the sweep is refused before any trial starts.
When no completed trial logged the metric, the sweep ends Failed, naming what the trials did
log and the closest name (a typo in `objective.primary_metric` or in the training script).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.store.layout import Layout


def refuse_untracked(name: str, metric: str) -> None:
    """A sweep whose trials' metric could never be read is refused before any trial starts:
    mlflow is not installed in distrun's Python. (Tracking turned off, DISTRUN_MLFLOW=0, is the
    user's choice: the trials run, and the sweep ends Failed, saying so.)"""
    from distrun.core.errors import DistrunError
    from distrun.metrics.tracking import mlflow_available, tracking_turned_off

    if mlflow_available() or tracking_turned_off():
        return
    raise DistrunError(
        f"sweep {name}: its trials are ranked by {metric}, read from their MLflow runs, and MLflow is "
        f"not installed in the Python distrun runs in ({sys.executable}): no trial could be ranked",
        "pip install 'distrun[mlflow]' (the trials log with mlflow.log_metric, or the v1 Run.log)",
    )


def logged_text(metric: str, logged: list[str] | None) -> str:
    """What a trial that did not log `metric` logged instead, with the closest name."""
    if logged is None:
        return " (its metrics were not tracked)"
    if not logged:
        return " (it logged no metric)"
    import difflib  # only when a metric is missing

    close = difflib.get_close_matches(metric, logged, n=1, cutoff=0.6)
    mean = f"; did you mean {close[0]!r}?" if close else ""
    return f" (it logged: {', '.join(logged)}{mean})"


def unranked_why(metric: str, logged: list[list[str] | None]) -> str:
    """Why no completed trial could be ranked: tracking off, or the metric never logged (and
    what the trials logged instead)."""
    from distrun.metrics.tracking import tracking_turned_off

    if all(names is None for names in logged) and tracking_turned_off():
        return f"no trial could be ranked: tracking is off (DISTRUN_MLFLOW=0), so no trial's {metric} was read"
    names = sorted({name for names in logged for name in names or []})
    shown = logged_text(metric, names if any(n is not None for n in logged) else None)
    return f"no trial could be ranked: no completed trial logged {metric}{shown}"


def best_trial(
    trials: dict[str, dict[str, Any]], goal: str, layout: Layout, outputs: list[str]
) -> dict[str, Any] | None:
    """The best completed trial that logged a rankable primary metric: its parameters, metric and
    the folders of its `outputs` (the sweep's outputs); None when no trial can be ranked."""
    from distrun.plan.sweep_policies import rankable
    from distrun.runner.summaries import ranked_trials

    for key, state in ranked_trials(trials, goal):
        if state["status"] == JobStatus.COMPLETED.value and rankable(state["metric"]):
            folder = layout.job(state["job"]).named_outputs
            return {
                "trial": key,
                "job": state["job"],
                "parameters": state["parameters"],
                "metric": state["metric"],
                "outputs": {name: str(folder / name) for name in outputs},
            }
    return None


def no_best_why(trials: dict[str, dict[str, Any]], metric: str, first_failure: str | None) -> str:
    """Why a sweep without a best trial failed: none started, none that completed logged the
    metric, or none completed (the first failed trial's reason)."""
    if not trials:
        return "no trial started"
    completed = [s for s in trials.values() if s["status"] == JobStatus.COMPLETED.value]
    if completed:
        return unranked_why(metric, [s.get("logged") for s in completed])
    first = first_failure or next(iter(trials))
    return f"no trial completed; {first}: {trials[first]['reason']}"


def failed_trial_cause(layout: Layout, trial: str, job: str) -> dict[str, Any]:
    """The root cause of a sweep without a best trial: its first failed trial's (its first failing
    rank, traceback or last lines of its log), named; its reason is the sweep's own."""
    from distrun.core.errors import DistrunError
    from distrun.runner import jobs

    try:
        cause = jobs.get_job(layout, job).root_cause
    except DistrunError:
        cause = None  # not started: its reason is the whole cause
    # Its own reason is its trial's; the sweep's reason is why the sweep failed.
    return {**{k: v for k, v in (cause or {}).items() if k != "reason"}, "trial": trial, "job": job}
