"""Reading a job's metrics back: every point of every metric, and the last value of each.

distrun's own store is SQLite, read here directly (read-only, one query) so that `job show`,
`distrun metrics` and the web UI do not import mlflow (about a second) to read a few rows;
the `metrics` table (key, value, timestamp, step, run_uuid, is_nan) has kept its shape across
MLflow releases. Any other tracking URI (an MLflow server) is read through mlflow's client.

MLflow's SQL store keeps a NaN as 0 with `is_nan` set, and an infinity as the largest float of
its sign: both are read back as what the rank logged (nan, inf, -inf), never as a number that
could rank a sweep's trial or drive its policy.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from distrun.core.safe_files import open_regular, sqlite_reader_uri, unreadable_because
from distrun.metrics.sqlite_store import sqlite_file
from distrun.metrics.tracking import TrackedRun, mlflow_available, read_tracked_run
from distrun.metrics.tracking_server import waited_on_at
from distrun.store.layout import JobFolder

_STORED_INFINITY = 1.7976931348623157e308  # how MLflow's SQL store writes +inf (and -inf as its negative)


@dataclass(frozen=True)
class MetricPoint:
    step: int
    timestamp: float  # seconds since the epoch
    value: float


History = dict[str, list[MetricPoint]]


def metric_history(run: TrackedRun, only: str | None = None) -> History:
    """name -> points in step order (several ranks may log the same step); {} if unreadable.
    `only`: that metric's points alone (a sweep reads its primary metric this way, often)."""
    path = sqlite_file(run.tracking_uri)
    if path is not None:
        try:
            fd = open_regular(path)
        except OSError:
            # Missing (mlflow's client would create an empty store there), or not a regular
            # file: a named pipe or a link the job put there is never opened by SQLite.
            return {}
        try:
            return _from_sqlite(fd, run.run_id, only)
        except sqlite3.Error:
            pass  # not created yet, or not MLflow's layout: ask mlflow, if it is here
        finally:
            os.close(fd)
    if not mlflow_available():
        return {}
    try:
        return _from_client(run, only)
    except Exception:
        return {}


def last_values(history: History) -> dict[str, float]:
    """The latest value of each metric (highest step, then latest time), as Azure ML's job page shows."""
    return {name: max(points, key=lambda p: (p.step, p.timestamp)).value for name, points in history.items() if points}


def store_problem(run: TrackedRun) -> str | None:
    """Why the run's local store cannot be read safely (not a regular file), else None."""
    path = sqlite_file(run.tracking_uri)
    why = None if path is None else unreadable_because(path)
    return None if why is None else f"the metrics store {path} cannot be read: {why}"


def _from_sqlite(fd: int, run_id: str, only: str | None = None) -> History:
    # Through the descriptor checked above: the job may swap the path at any moment.
    conn = sqlite3.connect(sqlite_reader_uri(fd), uri=True, timeout=10)
    keyed = "" if only is None else " AND key = ?"
    arguments = (run_id,) if only is None else (run_id, only)
    order = f" FROM metrics WHERE run_uuid = ?{keyed} ORDER BY key, step, timestamp"
    try:
        try:
            rows = conn.execute("SELECT key, step, timestamp, value, is_nan" + order, arguments).fetchall()
        except sqlite3.OperationalError:  # a store without the NaN flag (none of MLflow's own)
            rows = [(*row, 0) for row in conn.execute("SELECT key, step, timestamp, value" + order, arguments)]
    finally:
        conn.close()
    history: History = {}
    for key, step, timestamp, value, is_nan in rows:
        point = MetricPoint(int(step or 0), float(timestamp) / 1000, stored_value(value, is_nan))
        history.setdefault(key, []).append(point)
    return history


def stored_value(value: object, is_nan: object) -> float:
    """The value a rank logged, from MLflow's SQL row: its NaN flag and its stand-ins for infinity."""
    if is_nan:
        return math.nan
    number = float(value)  # type: ignore[arg-type]
    if abs(number) == _STORED_INFINITY:
        return math.copysign(math.inf, number)
    return number


def _from_client(run: TrackedRun, only: str | None = None) -> History:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=run.tracking_uri)
    history: History = {}
    keys = [only] if only is not None else sorted(client.get_run(run.run_id).data.metrics)
    for key in keys:
        points = [
            MetricPoint(int(m.step), m.timestamp / 1000, stored_value(m.value, False))
            for m in client.get_metric_history(run.run_id, key)
        ]
        history[key] = sorted(points, key=lambda p: (p.step, p.timestamp))
    return history


def last_logged_at(run: TrackedRun) -> float | None:
    """When the run's latest metric was logged (seconds since the epoch); None when none was, or unreadable.

    The hang watchdog's progress test: distrun's own store is read directly (one indexed query);
    another tracking URI is asked through mlflow's client, only for the metrics' latest values.
    """
    path = sqlite_file(run.tracking_uri)
    if path is not None:
        try:
            fd = open_regular(path)
        except OSError:
            return None
        try:
            conn = sqlite3.connect(sqlite_reader_uri(fd), uri=True, timeout=10)
            try:
                row = conn.execute(
                    "SELECT MAX(timestamp) FROM latest_metrics WHERE run_uuid = ?", (run.run_id,)
                ).fetchone()
            finally:
                conn.close()
            return None if row is None or row[0] is None else float(row[0]) / 1000
        except sqlite3.Error:
            return None
        finally:
            os.close(fd)
    if not mlflow_available():
        return None
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=run.tracking_uri)
        times = [
            point.timestamp
            for key in client.get_run(run.run_id).data.metrics
            for point in client.get_metric_history(run.run_id, key)
        ]
        return max(times) / 1000 if times else None
    except Exception:
        return None


def metric_clock(folder: JobFolder) -> Callable[[], float | None] | None:
    """`last_logged_at` of the job's run, for the hang watchdog; None when the job has no run.

    For ranks that log through distrun's server, also the last moment a client of that server
    waited for its answer: a rank waiting on distrun's own server (starting, or slow on a loaded
    machine) is not hung."""
    run = read_tracked_run(folder)
    if run is None:
        return None
    if run.server_pid is None:
        return lambda: last_logged_at(run)
    home = folder.root.parent.parent  # $DISTRUN_HOME/jobs/<name>

    def clock() -> float | None:
        found = [t for t in (last_logged_at(run), waited_on_at(home)) if t is not None]
        return max(found, default=None)

    return clock
