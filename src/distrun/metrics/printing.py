"""`distrun metrics NAME [--follow]` and the metrics part of `distrun job show`."""

from __future__ import annotations

import sys
import time

from distrun.errors import DistrunError
from distrun.metrics.history import MetricPoint, last_values, metric_history
from distrun.metrics.tracking import read_tracked_run
from distrun.store.layout import JobFolder, Layout

POLL_SECONDS = 1.0


def last_metric_values(folder: JobFolder) -> dict[str, object]:
    """{'metrics': {name: last value}} for a tracked job, {} for one run without mlflow."""
    run = read_tracked_run(folder)
    if run is None:
        return {}
    return {"metrics": last_values(metric_history(run)), "mlflow_run_id": run.run_id}


def point_line(name: str, point: MetricPoint) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(point.timestamp))
    return f"{when}  {name}  step {point.step}  {point.value:.6g}"


def print_metrics(layout: Layout, name: str, follow: bool) -> None:
    from distrun.jobs import get_job

    record = get_job(layout, name)
    run = read_tracked_run(layout.job(record.name))
    if run is None:
        raise DistrunError(
            f"job {record.name} has no metrics: it ran without MLflow",
            'install it (pip install "distrun[mlflow]") and later jobs get a run; mlflow.log_metric then lands there',
        )
    print(f"# MLflow run {run.run_id} (experiment {run.experiment_name}) at {run.tracking_uri}", flush=True)
    seen: set[tuple[str, int, float, float]] = set()
    while True:
        ended = get_job(layout, record.name).terminal  # read first: points logged before the end are printed
        fresh = []
        for metric, points in metric_history(run).items():
            for point in points:
                key = (metric, point.step, point.timestamp, point.value)
                if key not in seen:
                    seen.add(key)
                    fresh.append((point.timestamp, metric, point))
        for _, metric, point in sorted(fresh, key=lambda item: (item[0], item[1], item[2].step)):
            sys.stdout.write(point_line(metric, point) + "\n")
        sys.stdout.flush()
        if not follow or ended:
            return
        time.sleep(POLL_SECONDS)
