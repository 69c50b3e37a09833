"""The live stream shared by the gang's lines and the executors' (`distrun run` on a Spark target).

The gang writes the driver's lines from its loop and the executors' follower from its own
thread: one lock keeps each write whole, and the executors' lines get their `[executor N]`
prefix from a line stream of their own over the same output.
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO

from distrun.agent.line_stream import LineStream


class SharedOutput:
    """The stream's writer (a file or `agent.terminal_output.NonBlockingOutput`), one writer at a time."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def write(self, data: bytes) -> int:
        with self._lock:
            return self._out.write(data)

    def flush(self) -> None:
        with self._lock:
            self._out.flush()

    @property
    def backlog(self) -> int:
        return int(getattr(self._out, "backlog", 0))

    def pump(self) -> None:
        with self._lock:
            pump = getattr(self._out, "pump", None)
            if pump is not None:
                pump()

    def fileno(self) -> int:
        return self._out.fileno()

    def __getattr__(self, name: str) -> Any:  # what else a writer of the stream asks (isatty, ...)
        return getattr(self._out, name)


class ExecutorLines:
    """The sink of `executor_logs.ExecutorLogs`: each source's whole lines, prefixed with its role."""

    def __init__(self, out: SharedOutput, color: bool) -> None:
        self._lines = LineStream(out, color)  # type: ignore[arg-type]  (a writer like the stream's own)
        self._known: set[str] = set()

    def __call__(self, key: str, label: str, data: bytes) -> None:
        if key not in self._known:
            self._known.add(key)
            self._lines.add(key, label, len(self._known))
        self._lines.feed(key, data)

    def finish(self) -> None:
        for key in self._known:
            self._lines.finish(key)
