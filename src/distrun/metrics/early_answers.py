"""What the server keeper answers itself while `mlflow server` starts: a rank's first metric.

A rank's first `mlflow.log_metric` in a job sends, in this order (the real client, MLFLOW_RUN_ID
set by distrun): `GET runs/get`, `POST runs/update` (status RUNNING), `GET runs/get` again, then
`POST runs/log-metric` (`log-batch` for `log_metrics` and asynchronous logging); its first
`log_param` and `set_tag` send `POST runs/log-parameter` and `runs/set-tag` (`log-batch` for
`log_params` and `set_tags`). Starting
`mlflow server` costs seconds of CPU (tens of seconds on a loaded machine), so the keeper answers
these itself from distrun's store (DISTRUN_HOME/mlflow.db) until the server serves, as
`sqlite_store` already writes runs, and relays everything after that to the server.

Only the job runs distrun holds open (`distrun_open_runs`), only requests whose every field is
understood here, only names and values MLflow would take (a run name given to `runs/update`
included): anything else (artifacts, a param changed from its logged value, another run, a
malformed body) gets None and waits for the server, whose answer (error included) is MLflow's
own. Each request is one SQLite transaction committed before the answer is sent, so a request
the client sends next (to the keeper or to the server) sees it; the rows are those MLflow's SQL
store writes (`metrics`, `latest_metrics` kept as MLflow keeps it, a NaN as 0 with `is_nan`, an
infinity as the largest float), so `distrun metrics`, sweeps' live reads and the hang watchdog
(which asks `runs/get`) see the points as they see the server's.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from distrun.core.safe_files import refuse_special_store
from distrun.metrics.early_params import (
    Entry,
    entries,
    entry,
    new_run_name,
    rename_run,
    write_params,
    write_tags,
)

API = "/api/2.0/mlflow/"
RUNS_GET = API + "runs/get"
RUNS_UPDATE = API + "runs/update"
LOG_METRIC = API + "runs/log-metric"
LOG_BATCH = API + "runs/log-batch"
LOG_PARAM = API + "runs/log-parameter"
SET_TAG = API + "runs/set-tag"
BODY_LIMIT = 1 << 20  # a log-batch of MLflow's largest (1000 metrics) is well under this
_BATCH_LIMIT = 1000  # MLflow's own limit of metrics in one log-batch
_STATUSES = frozenset({"RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"})
_NAME = re.compile(r"^[\w.\- :/]{1,250}$")  # MLflow's metric names (no `..`, not absolute: below)
_LARGEST = 1.7976931348623157e308  # how MLflow's SQL store writes an infinity
_INT64 = 1 << 63

Point = tuple[str, float, int, int]  # key, value, timestamp (ms), step


def request_line(head: bytes) -> tuple[str, str, dict[str, str]]:
    """A request head's method, target and headers (names lower-cased)."""
    lines = head.decode("latin-1").split("\r\n")
    method, _, rest = lines[0].partition(" ")
    target = rest.rpartition(" ")[0] or rest
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def body_length(method: str, target: str, headers: dict[str, str]) -> int | None:
    """How many body bytes to read for a request the keeper may answer; None for any other."""
    path = urlsplit(target).path
    if "transfer-encoding" in headers or "expect" in headers:
        return None
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > BODY_LIMIT:
        return None
    if (method, path) == ("GET", RUNS_GET) or (
        method == "POST" and path in (RUNS_UPDATE, LOG_METRIC, LOG_BATCH, LOG_PARAM, SET_TAG)
    ):
        return int(length)
    return None


def response(payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def answer(db: Path, method: str, target: str, body: bytes) -> bytes | None:
    """The keeper's answer to one request, its writes committed; None: leave it to the server."""
    parts = urlsplit(target)
    try:
        if method == "GET":
            query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
            run_id = query.get("run_id") or query.get("run_uuid") or ""
            return _with_store(db, lambda conn: _get_run(conn, run_id))
        fields = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(fields, dict):
        return None
    if parts.path == RUNS_UPDATE:
        return _update(db, fields)
    run_id = _run_id(fields)
    if parts.path in (LOG_PARAM, SET_TAG):
        one = entry(fields, tag=parts.path == SET_TAG)
        if one is None or run_id is None:
            return None
        params, tags = ([one], []) if parts.path == LOG_PARAM else ([], [one])
        return _with_store(db, lambda conn: _log(conn, run_id, [], params, tags))
    if parts.path not in (LOG_METRIC, LOG_BATCH):
        return None
    batch = parts.path == LOG_BATCH
    points = _points(fields, batch)
    params = entries(fields.get("params"), tag=False) if batch else []
    tags = entries(fields.get("tags"), tag=True) if batch else []
    if points is None or params is None or tags is None or run_id is None:
        return None
    return _with_store(db, lambda conn: _log(conn, run_id, points, params, tags))


def _run_id(fields: dict[str, object]) -> str | None:
    run_id = fields.get("run_id") or fields.get("run_uuid")
    return run_id if isinstance(run_id, str) and run_id else None


def _int(value: object, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value):  # proto JSON writes int64 as text
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
        return value
    return None


def _point(item: object) -> Point | None:
    if not isinstance(item, dict) or set(item) - {"key", "value", "timestamp", "step", "run_id", "run_uuid"}:
        return None
    key, value = item.get("key"), item.get("value")
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        value = float(value)
    if not isinstance(key, str) or not _NAME.match(key) or ".." in key or key.startswith("/"):
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    timestamp, step = _int(item.get("timestamp")), _int(item.get("step"), 0)
    if timestamp is None or step is None:
        return None
    return key, float(value), timestamp, step


def _points(fields: dict[str, object], batch: bool) -> list[Point] | None:
    if not batch:
        point = _point(fields)
        return None if point is None else [point]
    metrics = fields.get("metrics") or []
    if set(fields) - {"run_id", "run_uuid", "metrics", "params", "tags"}:
        return None
    if not isinstance(metrics, list) or len(metrics) > _BATCH_LIMIT:
        return None
    points = [_point(item) for item in metrics]
    return None if None in points else [point for point in points if point is not None]


def _with_store(db: Path, work: Callable[[sqlite3.Connection], dict[str, object] | None]) -> bytes | None:
    """`work(conn)` in one write transaction of the store; None when anything fails (nothing written)."""
    try:
        refuse_special_store(db)
        conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    except (OSError, sqlite3.Error):
        return None
    try:
        conn.execute("BEGIN IMMEDIATE")
        payload = work(conn)
        conn.execute("COMMIT" if payload is not None else "ROLLBACK")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return None
    finally:
        conn.close()
    return None if payload is None else response(payload)


def _open_run(conn: sqlite3.Connection, run_id: str) -> dict[str, object] | None:
    """The run's info as MLflow's REST API gives it, when distrun holds it open; else None."""
    row = conn.execute(
        "SELECT r.run_uuid, r.name, r.experiment_id, r.user_id, r.status, r.start_time, r.end_time,"
        " r.artifact_uri, r.lifecycle_stage FROM runs r JOIN distrun_open_runs o ON o.run_uuid = r.run_uuid"
        " WHERE r.run_uuid = ? AND r.lifecycle_stage = 'active'",
        (run_id,),
    ).fetchone()
    if row is None:
        return None
    info: dict[str, object] = {
        "run_id": row[0],
        "run_uuid": row[0],
        "run_name": row[1] or "",
        "experiment_id": str(row[2]),
        "user_id": row[3] or "",
        "status": row[4],
        "start_time": row[5],
        "artifact_uri": row[7] or "",
        "lifecycle_stage": row[8],
    }
    if row[6] is not None:
        info["end_time"] = row[6]
    return info


def _get_run(conn: sqlite3.Connection, run_id: str) -> dict[str, object] | None:
    info = _open_run(conn, run_id)
    if info is None:
        return None
    metrics = [
        {
            "key": key,
            "value": "NaN" if is_nan else value,  # as the server reads its rows back
            "timestamp": timestamp,
            "step": step,
        }
        for key, value, timestamp, step, is_nan in conn.execute(
            "SELECT key, value, timestamp, step, is_nan FROM latest_metrics WHERE run_uuid = ? ORDER BY key",
            (run_id,),
        )
    ]
    params = [
        {"key": k, "value": v} for k, v in conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,))
    ]
    tags = [
        {"key": k, "value": v} for k, v in conn.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,))
    ]
    return {"run": {"info": info, "data": {"metrics": metrics, "params": params, "tags": tags}, "inputs": {}}}


def _update(db: Path, fields: dict[str, object]) -> bytes | None:
    run_id, status, name = _run_id(fields), fields.get("status"), new_run_name(fields)
    end_time = _int(fields.get("end_time"))
    if set(fields) - {"run_id", "run_uuid", "status", "end_time", "run_name"} or name is None:
        return None
    if run_id is None or status not in _STATUSES or (fields.get("end_time") is not None and end_time is None):
        return None

    def work(conn: sqlite3.Connection) -> dict[str, object] | None:
        if _open_run(conn, run_id) is None:
            return None
        # distrun's trigger keeps an open run RUNNING whatever a rank sets (sqlite_store).
        conn.execute(
            "UPDATE runs SET status = ?, end_time = COALESCE(?, end_time) WHERE run_uuid = ?",
            (status, end_time, run_id),
        )
        if name:  # `mlflow.start_run(run_name=...)`
            rename_run(conn, run_id, name)
        info = _open_run(conn, run_id)
        return None if info is None else {"run_info": info}

    return _with_store(db, work)


def _log(
    conn: sqlite3.Connection, run_id: str, points: list[Point], params: list[Entry], tags: list[Entry]
) -> dict[str, object] | None:
    if _open_run(conn, run_id) is None or not write_params(conn, run_id, params):
        return None
    write_tags(conn, run_id, tags)
    for key, value, timestamp, step in points:
        is_nan = int(math.isnan(value))
        stored = 0.0 if is_nan else max(-_LARGEST, min(_LARGEST, value))
        conn.execute(
            "INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, ?, ?)",
            (key, stored, timestamp, run_id, step, is_nan),
        )
        latest = conn.execute(
            "SELECT step, timestamp, value FROM latest_metrics WHERE key = ? AND run_uuid = ?", (key, run_id)
        ).fetchone()
        # MLflow's rule: the latest point is the greatest (step, timestamp, value).
        if latest is None or (step, timestamp, stored) > tuple(latest):
            conn.execute(
                "INSERT OR REPLACE INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, stored, timestamp, step, is_nan, run_id),
            )
    return {}
