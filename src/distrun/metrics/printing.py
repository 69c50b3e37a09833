"""The metrics part of `distrun job show`, and a metric point as `distrun metrics` prints it
(`distrun.cli.metrics_view`)."""

from __future__ import annotations

import time

from distrun.metrics.history import MetricPoint, last_values, metric_history
from distrun.metrics.tracking import read_tracked_run
from distrun.store.layout import JobFolder


def last_metric_values(folder: JobFolder) -> dict[str, object]:
    """{'metrics': {name: last value}} for a tracked job, {} for one run without mlflow."""
    run = read_tracked_run(folder)
    if run is None:
        return {}
    return {"metrics": last_values(metric_history(run)), "mlflow_run_id": run.run_id}


def point_line(name: str, point: MetricPoint) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(point.timestamp))
    return f"{when}  {name}  step {point.step}  {point.value:.6g}"
