"""A standalone cluster's executors' logs, followed into the job's own as `[executor N]`.

Each executor writes its stdout and stderr in its worker's work folder
(`SPARK_WORKER_DIR/APP_ID/N/`), on the worker's machine. The worker serves them by byte range
over HTTP (its web UI's `/log/` endpoint, what the Spark UI's log pages read), and the driver's
REST API (`/api/v1/applications/APP_ID/allexecutors`) names each executor with its logs'
addresses: distrun follows them from there while the job runs, from this machine, wherever the
workers are. What is read is appended to `user_logs/std_log_executor_N.txt` (N: Spark's executor
id) through the job folder's safe path, and, under `distrun run`, shown in the live stream with
the executor's role, as the driver's lines are.

The executors' output is the job's (user code prints it) and the addresses come from the job's
driver: only http URLs are asked, each read is bounded, and a source that fails is left for the
next pass; nothing here stops or slows the job.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distrun.core.file_modes import open_append_beneath, write_all
from distrun.store.log_labels import executor_log_name

__all__ = [
    "ExecutorLogs",
    "application_id",
    "driver_ui",
    "executor_log_name",
    "keep_executor_output",
    "log_sources",
    "parse_log_reply",
]

POLL_SECONDS = 0.5
READ_BYTES = 256 << 10  # per source and pass: a flooding executor is followed, never buffered whole
HTTP_TIMEOUT_S = 5.0
LAST_WORDS_S = 5.0  # how long, once the driver ended, the executors' last lines are waited for
LAST_WORDS_GAP_S = 0.3
# `==== Bytes 0-120 of 120 of /work/app-.../0/stdout ====` (Spark's worker, LogPage.renderLog)
_HEADER = re.compile(rb"==== Bytes ([0-9]+)-([0-9]+) of ([0-9]+) of [^\n]*====\n")
_LOG_TYPES = ("stdout", "stderr")

# (the source's key, its stream label, the bytes read): each source's lines stay whole
Sink = Callable[[str, str, bytes], None]


def driver_ui(command: str) -> str:
    """The driver's UI on this machine, from the port its command gives it (`spark.ui.port`)."""
    ports = re.findall(r"spark\.ui\.port=([0-9]{1,5})\b", command)
    return f"http://127.0.0.1:{ports[-1]}" if ports else ""  # the last one given is Spark's


@dataclass
class Source:
    """One executor's stdout or stderr as its worker serves it, and how far it was read."""

    executor_id: str
    log_type: str
    url: str  # the worker's /log/ endpoint with the application, executor and log type
    offset: int = 0
    reached: bool = True  # whether its worker answered the last time it was asked


def log_sources(executors: object) -> list[Source]:
    """The executors' log sources from the driver's `allexecutors` reply (the driver itself has none)."""
    sources = []
    for entry in executors if isinstance(executors, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or entry["id"] == "driver":
            continue
        if not re.fullmatch(r"[0-9]{1,9}", entry["id"]):
            continue
        logs = entry.get("executorLogs") if isinstance(entry.get("executorLogs"), dict) else {}
        for log_type in _LOG_TYPES:
            url = logs.get(log_type)
            parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
            if parsed is None or parsed.scheme != "http" or not parsed.netloc:
                continue
            # logPage/ is the page around the text; log/ is the text itself, by byte range
            path = parsed.path.replace("/logPage", "/log", 1)
            sources.append(Source(entry["id"], log_type, urllib.parse.urlunsplit(parsed._replace(path=path))))
    return sources


def application_id(applications: object) -> str:
    """The driver's one application, from its UI's `applications` reply ("" before it has one)."""
    first = applications[0] if isinstance(applications, list) and applications else None
    app = first.get("id") if isinstance(first, dict) else None
    return app if isinstance(app, str) and re.fullmatch(r"[0-9A-Za-z._\-]{1,200}", app) else ""


def parse_log_reply(reply: bytes) -> tuple[int, bytes] | None:
    """(the offset after the bytes served, the bytes) of a worker's /log/ reply; None if it is not one."""
    header = _HEADER.match(reply)
    if header is None:
        return None
    return int(header.group(2)), reply[header.end() :]


def _get(url: str, limit: int) -> bytes:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as reply:  # only http URLs reach here
        return bytes(reply.read(limit))


class ExecutorLogs:
    """Follows a job's executors' logs in a thread of the supervising process until `stop()`."""

    def __init__(self, folder: Path, ui: str, sink: Sink | None = None) -> None:
        self._folder = folder
        self._ui = ui  # the driver's UI, http://127.0.0.1:PORT (the driver runs here, in client mode)
        self._app = ""
        self._sink = sink
        self._sources: dict[tuple[str, str], Source] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-executor-logs", daemon=True)

    def start(self) -> ExecutorLogs:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Read what the executors wrote last (their workers still serve it), then end."""
        self._stopping.set()
        self._thread.join(timeout=4 * HTTP_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            self._pass()
        # The executors' last words: the driver has ended, and the workers end its executors and
        # copy what they wrote last into their files a moment later, so one pass that finds
        # nothing new is not the end: two in a row, LAST_WORDS_GAP_S apart, within LAST_WORDS_S.
        quiet, ends = 0, time.monotonic() + LAST_WORDS_S
        while time.monotonic() < ends:
            if self._pass(find=False):
                quiet = 0
                continue
            quiet += 1
            if quiet == 2:
                break
            time.sleep(LAST_WORDS_GAP_S)  # between two quiet passes only: nothing after the last

    def _pass(self, find: bool = True) -> bool:
        """One look at the driver (new executors) and at every source; whether anything was read."""
        if find:
            self._find_executors()
        read = False
        for source in list(self._sources.values()):
            if find or source.reached:  # the last reads ask only the workers that answer
                read = self._read(source) or read
        return read

    def _find_executors(self) -> None:
        try:
            if not self._app:
                self._app = application_id(json.loads(_get(f"{self._ui}/api/v1/applications", 1 << 20)))
            if not self._app:
                return
            listed = json.loads(_get(f"{self._ui}/api/v1/applications/{self._app}/allexecutors", 4 << 20))
        except (OSError, ValueError):
            return  # the UI is not up yet, or already gone: the sources found stay
        for source in log_sources(listed):
            self._sources.setdefault((source.executor_id, source.log_type), source)

    def _read(self, source: Source) -> bool:
        query = urllib.parse.urlencode({"offset": source.offset, "byteLength": READ_BYTES})
        try:
            parsed = parse_log_reply(_get(f"{source.url}&{query}", READ_BYTES + 4096))
        except OSError:
            source.reached = False  # a worker this machine does not reach: its lines stay there
            return False
        source.reached = True
        if parsed is None:
            return False
        end, data = parsed
        if end <= source.offset or not data:
            return False
        source.offset = end
        self._keep(source, data)
        return True

    def _keep(self, source: Source, data: bytes) -> None:
        keep_executor_output(self._folder, source.executor_id, source.log_type, data, self._sink)


def keep_executor_output(folder: Path, executor_id: str, log_type: str, data: bytes, sink: Sink | None) -> None:
    """Append what an executor wrote to its log in the job's user_logs (through the job folder's
    no-follow path), and hand it to the live stream's sink."""
    name = executor_log_name(executor_id)
    try:
        fd = open_append_beneath(folder, folder / "user_logs" / name)
    except OSError:
        return  # the job planted something under the name: it is not written through
    try:
        write_all(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)
    if sink is not None:
        sink(f"{name}:{log_type}", f"executor {executor_id}", data)
