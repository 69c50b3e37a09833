"""The parallel step's queue across nodes: process 0 holds it (`Queue`, in its own job folder)
and serves it on MASTER_ADDR:MASTER_PORT, the rendezvous address every backend gives a
`type: pytorch` gang; every other process takes and reports its mini-batches over one TCP
connection. No file system is shared between nodes on Ray and Kubernetes, and none needs to be.

One JSON request per line, one JSON answer per line:

    {"op": "take", "process": P}                          -> {"index": 3} | {"index": null}
    {"op": "done", "index", "process", "items", "lines", "missing"}   -> {}
    {"op": "failed", "index", "record"}                   -> {}
    {"op": "stop", "why"}  {"op": "stopped"}  {"op": "failures"}  {"op": "bye"}

The thresholds are applied where the queue is (`SharedQueue`): a failure that passes one stops
every process at its next look.
"""

from __future__ import annotations

import errno
import json
import socket
import socketserver
import threading
import time
from argparse import Namespace
from typing import Any

from distrun.agent.parallel_queue import Queue
from distrun.agent.parallel_report import threshold_passed

CONNECT_TIMEOUT = 300.0  # seconds a process waits for process 0 to listen (its input split first)


class SharedQueue:
    """The queue with its thresholds: what process 0 uses itself and serves to the others."""

    def __init__(self, queue: Queue, options: Namespace, total: int) -> None:
        self.queue = queue
        self.options = options
        self.total = total
        self.lock = threading.Lock()
        self.cursor = 0
        self.gone = 0  # processes that took their last mini-batch and said so

    def next_index(self, process: str) -> int | None:
        with self.lock:
            if self.queue.stopped() is not None:
                return None
            while self.cursor < self.total:
                index = self.cursor
                self.cursor += 1
                if self.queue.claim(index):
                    return index
            return None

    def take(self, process: str) -> Any:
        while (index := self.next_index(process)) is not None:
            yield index

    def done(self, index: int, process: str, items: int, lines: list[str], missing: int = 0) -> None:
        self.queue.done(index, process, items, lines, missing)
        if missing and self.options.error_threshold >= 0:
            self._check()

    def failed(self, index: int, record: dict[str, Any]) -> None:
        self.queue.failed(index, record)
        self._check()

    def _check(self) -> None:
        with self.lock:
            passed = threshold_passed(self.queue, self.options, self.total)
        if passed:
            self.queue.stop(passed)

    def stop(self, why: str) -> None:
        self.queue.stop(why)

    def stopped(self) -> str | None:
        return self.queue.stopped()

    def failures(self) -> list[dict[str, Any]]:
        return self.queue.failures()

    def bye(self) -> None:
        with self.lock:
            self.gone += 1


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        shared = self.server.shared
        for line in self.rfile:
            request = json.loads(line)
            op = request.get("op")
            answer: dict[str, Any] = {}
            if op == "take":
                answer["index"] = shared.next_index(str(request["process"]))
            elif op == "done":
                shared.done(
                    int(request["index"]), str(request["process"]), int(request["items"]), request["lines"],
                    int(request.get("missing", 0)),
                )  # fmt: skip
            elif op == "failed":
                shared.failed(int(request["index"]), request["record"])
            elif op == "stop":
                shared.stop(str(request["why"]))
            elif op == "stopped":
                answer["stop"] = shared.stopped()
            elif op == "failures":
                answer["failures"] = shared.failures()
            elif op == "bye":
                shared.bye()
            self.wfile.write((json.dumps(answer) + "\n").encode())
            self.wfile.flush()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    shared: SharedQueue


def serve(shared: SharedQueue, host: str, port: int) -> _Server:
    """Serve `shared` at `host:port` (the gang's MASTER_ADDR: on a machine whose simulated nodes
    or emulated pods each have a loopback address of their own, two gangs may share a port), or on
    every address of this node when `host` is none of its own, in a thread of this process."""
    try:
        server = _Server((host, port), _Handler)
    except OSError as exc:
        if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and not isinstance(exc, socket.gaierror):
            raise
        server = _Server(("", port), _Handler)
    server.shared = shared
    threading.Thread(target=server.serve_forever, name="parallel-queue", daemon=True).start()
    return server


class RemoteQueue:
    """Process 0's queue, seen from another process of the gang."""

    def __init__(self, host: str, port: int) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.reader = self.sock.makefile("rb")

    def _ask(self, **request: Any) -> dict[str, Any]:
        self.sock.sendall((json.dumps(request) + "\n").encode())
        line = self.reader.readline()
        if not line:
            raise ConnectionError("process 0 of the parallel step (which holds the queue) is gone")
        return json.loads(line)  # type: ignore[no-any-return]

    def take(self, process: str) -> Any:
        while (index := self._ask(op="take", process=process)["index"]) is not None:
            yield index

    def done(self, index: int, process: str, items: int, lines: list[str], missing: int = 0) -> None:
        self._ask(op="done", index=index, process=process, items=items, lines=lines, missing=missing)

    def failed(self, index: int, record: dict[str, Any]) -> None:
        self._ask(op="failed", index=index, record=record)

    def stop(self, why: str) -> None:
        self._ask(op="stop", why=why)

    def stopped(self) -> str | None:
        return self._ask(op="stopped").get("stop")

    def failures(self) -> list[dict[str, Any]]:
        return list(self._ask(op="failures").get("failures") or [])

    def bye(self) -> None:
        """This process takes nothing more: process 0 may end once every other one said so."""
        self._ask(op="bye")
