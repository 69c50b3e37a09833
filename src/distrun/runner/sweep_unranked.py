"""Why a sweep could not rank a trial, said rather than hidden.

A sweep ranks its completed trials by the primary metric each logged to its MLflow run. When
MLflow is not installed no metric can be read: the sweep is refused before any trial starts.
When no completed trial logged the metric, the sweep ends Failed, naming what the trials did
log and the closest name (a typo in `objective.primary_metric` or in the training script).
"""

from __future__ import annotations

import sys


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
