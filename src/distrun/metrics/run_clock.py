"""When a job's MLflow run last logged a metric, as a cluster node's agent asks it: the hang watchdog's metric clock.

A node's ranks log to the tracking URI in their MLFLOW_TRACKING_URI (distrun's server, or the
user's own), so that URI is what this node reaches too, whatever the backend: the agent asks
the same server MLflow's REST `GET /api/2.0/mlflow/runs/get`, whose `data.metrics` holds each
metric's latest point with its `timestamp` (ms since the epoch). Only the standard library: a
Kubernetes pod's agent imports nothing else (`backends.kubernetes.agent_zip`).

The watchdog asks only once the output has been silent for most of the timeout, and from its
own loop, so a server that does not answer costs at most `query_seconds` (connection, request
and reading the answer together) and counts as no metric: the silence is judged on output alone.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from http.client import HTTPException

from distrun.metrics.rank_route import UNREACHABLE_URI

RUNS_GET = "/api/2.0/mlflow/runs/get"
QUERY_SECONDS = 3.0  # at most this long a question, or half the hang timeout if less
ANSWER_LIMIT = 4 << 20  # a run's latest metrics: a run with thousands of metric names fits
_CHUNK = 65536


def latest_metric_time(answer: object) -> float | None:
    """The latest `timestamp` of `runs/get`'s answer, in seconds since the epoch; None when it has none."""
    run = answer.get("run") if isinstance(answer, dict) else None
    data = run.get("data") if isinstance(run, dict) else None
    metrics = data.get("metrics") if isinstance(data, dict) else None
    latest = None
    for metric in metrics if isinstance(metrics, list) else []:
        try:
            # int64 fields come as JSON numbers or as strings, depending on the server's release.
            stamp = float(metric["timestamp"]) / 1000
        except (TypeError, KeyError, ValueError):
            continue
        latest = stamp if latest is None else max(latest, stamp)
    return latest


def ask_server(uri: str, run_id: str, seconds: float, headers: Mapping[str, str] | None = None) -> float | None:
    """When the run at the tracking server `uri` last logged a metric; None if none, or no answer in `seconds`."""
    url = f"{uri.rstrip('/')}{RUNS_GET}?{urllib.parse.urlencode({'run_id': run_id})}"
    deadline = time.monotonic() + seconds
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=seconds) as response:
            body = _read_by(response, deadline)
        return None if body is None else latest_metric_time(json.loads(body))
    except (OSError, HTTPException, ValueError):
        return None  # refused, timed out, an HTTP error (no such run), or not MLflow's JSON


def _read_by(response: object, deadline: float) -> bytes | None:
    """The answer's body if it all came before `deadline` and within ANSWER_LIMIT: the socket's
    timeout bounds each read, not a server that sends a byte now and then."""
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            return None
        part = response.read1(_CHUNK)  # type: ignore[attr-defined]
        if not part:
            return b"".join(parts)
        size += len(part)
        if size > ANSWER_LIMIT:
            return None
        parts.append(part)


def auth_headers(environment: Mapping[str, str]) -> dict[str, str]:
    """The credentials MLflow's own client would send to the server, from the ranks' variables."""
    token = environment.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = environment.get("MLFLOW_TRACKING_USERNAME"), environment.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def run_clock(environment: Mapping[str, str], hang_timeout: float) -> Callable[[], float | None] | None:
    """The metric clock of the run the ranks with `environment` log to; None when they log to no
    run this node can ask (no run, a run that could not be served, or a store that is no server:
    a SQLite or file store on the submitting machine is not this node's)."""
    uri, run_id = environment.get("MLFLOW_TRACKING_URI"), environment.get("MLFLOW_RUN_ID")
    if not uri or not run_id or uri == UNREACHABLE_URI:
        return None
    if urllib.parse.urlsplit(uri).scheme not in ("http", "https"):
        return None
    seconds = min(QUERY_SECONDS, hang_timeout / 2)
    headers = auth_headers(environment)
    return lambda: ask_server(uri, run_id, seconds, headers)
