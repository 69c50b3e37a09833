"""`distrun metrics NAME [--follow]`: a job's metric points, printed as they come until it ends."""

from __future__ import annotations

import sys
import time

from distrun.cli.output import emit
from distrun.core.errors import DistrunError
from distrun.core.terminal_text import neutral_text
from distrun.metrics.history import metric_history, store_problem
from distrun.metrics.printing import point_line
from distrun.metrics.tracking import read_tracked_run, tracking_file_problem
from distrun.runner.jobs import get_job
from distrun.store.layout import Layout

POLL_SECONDS = 1.0


def print_metrics(layout: Layout, name: str, follow: bool, output: str = "table") -> None:
    if output != "table" and follow:
        raise DistrunError("--follow prints the points as they come, one a line", "drop --follow, or -o table")
    record = get_job(layout, name)
    run = read_tracked_run(layout.job(record.name))
    if run is None:
        problem = tracking_file_problem(layout.job(record.name))
        if problem is not None:
            raise DistrunError(problem, "the job's processes may have replaced it; distrun reads only regular files")
        raise DistrunError(
            f"job {record.name} has no metrics: it ran without MLflow",
            'install it (pip install "distrun[mlflow]") and later jobs get a run; mlflow.log_metric then lands there',
        )
    problem = store_problem(run)
    if problem is not None:
        raise DistrunError(problem, "the job's processes may have replaced it; a regular file is needed to read it")
    if output != "table":
        points = [
            {"metric": metric, "step": point.step, "timestamp": point.timestamp, "value": point.value}
            for metric, series in metric_history(run).items()
            for point in series
        ]
        emit(sorted(points, key=lambda p: (p["timestamp"], p["metric"], p["step"])), output, str)
        return
    # Metric names, the experiment's name and the store's path are the job's text: shown neutral.
    print(
        neutral_text(f"# MLflow run {run.run_id} (experiment {run.experiment_name}) at {run.tracking_uri}"), flush=True
    )
    seen: set[tuple[str, int, float, str]] = set()
    while True:
        ended = get_job(layout, record.name).terminal  # read first: points logged before the end are printed
        fresh = []
        for metric, points in metric_history(run).items():
            for point in points:
                key = (metric, point.step, point.timestamp, repr(point.value))  # NaN equals no NaN: its text does
                if key not in seen:
                    seen.add(key)
                    fresh.append((point.timestamp, metric, point))
        for _, metric, point in sorted(fresh, key=lambda item: (item[0], item[1], item[2].step)):
            sys.stdout.write(neutral_text(point_line(metric, point)) + "\n")
        sys.stdout.flush()
        if not follow or ended:
            return
        time.sleep(POLL_SECONDS)
