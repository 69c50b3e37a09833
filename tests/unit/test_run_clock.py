"""A node agent's metric clock: MLflow's `runs/get` asked of a real HTTP server on 127.0.0.1.

The servers here answer what MLflow's tracking server answers (its JSON), never answer, or
answer a byte at a time: the clock says the latest metric's time, or None within its bound.
That the node agents of a real cluster use it is tests/engines/slurm/test_slurm_metric_progress.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from distrun.metrics.rank_route import UNREACHABLE_URI
from distrun.metrics.run_clock import ask_server, latest_metric_time, run_clock

RUN = {
    "run": {
        "info": {"run_id": "abc123", "status": "RUNNING"},
        "data": {
            "metrics": [
                {"key": "loss", "value": 0.5, "timestamp": 1700000001500, "step": 3},
                {"key": "acc", "value": 0.9, "timestamp": "1700000002250", "step": 1},  # int64 as a string
            ],
            "params": [],
        },
    }
}


@pytest.fixture
def server() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], str]]:
    """Starts an HTTP server whose GET is `answer(handler)`; gives its URI."""
    started: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[BaseHTTPRequestHandler], None]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer(self)

            def log_message(self, *args: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    """HTTP/1.0, as http.server speaks by default: the body ends where the connection closes."""
    handler.send_response(status)
    handler.end_headers()
    handler.wfile.write(json.dumps(body).encode())


def test_the_latest_metric_of_the_run_is_read_from_runs_get(server) -> None:
    asked: list[tuple[str, str | None]] = []

    def answer(handler: BaseHTTPRequestHandler) -> None:
        asked.append((handler.path, handler.headers.get("Authorization")))
        send_json(handler, 200, RUN)

    uri = server(answer)
    clock = run_clock({"MLFLOW_TRACKING_URI": uri + "/", "MLFLOW_RUN_ID": "abc123", "MLFLOW_TRACKING_TOKEN": "t0k"}, 60)
    assert clock is not None
    assert clock() == 1700000002.25
    assert asked == [("/api/2.0/mlflow/runs/get?run_id=abc123", "Bearer t0k")]


def test_a_run_without_metrics_or_an_error_answer_is_no_metric(server) -> None:
    empty = server(lambda handler: send_json(handler, 200, {"run": {"info": {}, "data": {}}}))
    assert ask_server(empty, "abc123", 2.0) is None
    missing = server(lambda handler: send_json(handler, 404, {"error_code": "RESOURCE_DOES_NOT_EXIST"}))
    assert ask_server(missing, "abc123", 2.0) is None
    not_json = server(lambda handler: send_json(handler, 200, "<html>") or handler.wfile.write(b"}"))
    assert ask_server(not_json, "abc123", 2.0) is None


def test_a_server_that_never_answers_or_answers_a_byte_at_a_time_is_no_metric_within_the_bound(server) -> None:
    release = threading.Event()

    def silent(handler: BaseHTTPRequestHandler) -> None:
        release.wait(30)

    def dripping(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(300):  # each byte within the socket's timeout, the whole far past the bound
            if release.wait(0.1):
                return
            handler.wfile.write(b" ")
            handler.wfile.flush()

    try:
        for uri in (server(silent), server(dripping)):
            began = time.monotonic()
            assert ask_server(uri, "abc123", 0.5) is None
            # Bounded: not the 30 s the server would take (generous for a loaded machine).
            assert time.monotonic() - began < 10
    finally:
        release.set()


def test_a_port_nobody_listens_on_is_no_metric() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        assert ask_server(f"http://127.0.0.1:{port}", "abc123", 2.0) is None


def test_only_a_served_run_gets_a_clock() -> None:
    served = {"MLFLOW_TRACKING_URI": "http://10.0.0.5:5000", "MLFLOW_RUN_ID": "abc123"}
    assert run_clock(served, 60) is not None
    assert run_clock({**served, "MLFLOW_RUN_ID": ""}, 60) is None
    assert run_clock({"MLFLOW_RUN_ID": "abc123"}, 60) is None
    # The run no server could serve, and stores that are files of the submitting machine.
    assert run_clock({**served, "MLFLOW_TRACKING_URI": UNREACHABLE_URI}, 60) is None
    assert run_clock({**served, "MLFLOW_TRACKING_URI": "sqlite:////home/u/.distrun/mlflow.db"}, 60) is None
    assert run_clock({**served, "MLFLOW_TRACKING_URI": "/home/u/mlruns"}, 60) is None


def test_answers_that_are_not_mlflows_shape_have_no_time() -> None:
    assert latest_metric_time(RUN) == 1700000002.25
    for odd in (None, [], {"run": None}, {"run": {"data": {"metrics": "x"}}}, {"run": {"data": {"metrics": [{}]}}}):
        assert latest_metric_time(odd) is None
    assert latest_metric_time({"run": {"data": {"metrics": [{"timestamp": "soon"}, {"timestamp": 2000}]}}}) == 2.0
