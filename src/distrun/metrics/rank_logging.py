"""Metrics logged from inside a job through the v1 face (`Run.get_context().log(...)`).

They go to the job's MLflow run, as `mlflow.log_metric` in the same process would; outside a
tracked job (no MLFLOW_RUN_ID, or mlflow not installed) they are printed, as Azure ML's
offline run does, so a script behaves the same everywhere.
"""

from __future__ import annotations

import os
import sys
import threading

_lock = threading.Lock()
_next_step: dict[str, int] = {}


def next_step(name: str) -> int:
    """Azure ML numbers repeated values of one metric 0, 1, 2...; so does this, per process."""
    with _lock:
        step = _next_step.get(name, 0)
        _next_step[name] = step + 1
        return step


def tracked_run_id() -> str | None:
    """The job's run: MLFLOW_RUN_ID, which mlflow removes from the environment once it has
    resumed that run, so then its active run."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if run_id:
        return run_id
    mlflow = sys.modules.get("mlflow")
    active = mlflow.active_run() if mlflow is not None else None
    return active.info.run_id if active is not None else None


def log_value(name: str, value: float, step: int | None = None) -> None:
    chosen = next_step(name) if step is None else step
    if tracked_run_id():
        try:
            import mlflow
        except ImportError:
            pass
        else:
            mlflow.log_metric(name, float(value), step=chosen)
            return
    print(f"distrun: metric {name} = {value} (step {chosen}; not recorded: this is not a tracked job)", file=sys.stderr)


def log_values(name: str, values: list[float]) -> None:
    """`log_list`: one point per value, steps 0..n-1, in one call where mlflow can."""
    run_id = tracked_run_id()
    if run_id:
        try:
            import time

            import mlflow
            from mlflow.entities import Metric
        except ImportError:
            pass
        else:
            now = int(time.time() * 1000)
            metrics = [Metric(name, float(v), now, step) for step, v in enumerate(values)]
            mlflow.tracking.MlflowClient().log_batch(run_id, metrics=metrics)
            return
    for value in values:
        log_value(name, value)
