"""Calling a piece of distrun in-process where it might hang or read without bound.

The call runs in a forked child (distrun is already imported: no interpreter start-up) with
its address space capped, so a read of /dev/zero ends in MemoryError in the child instead of
eating the machine, and a call blocked on a named pipe is killed when its time is up and
reported as a hang instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MEMORY_HEADROOM = 512 << 20  # beyond what the test process already maps


@dataclass(frozen=True)
class Outcome:
    hung: bool
    returned: str | None = None  # repr() of the value returned
    raised: str | None = None  # the exception's class name
    message: str = ""  # its text (or the traceback of an unexpected one)


def _mapped_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


def guarded(call: Callable[[], Any], timeout: float = 20) -> Outcome:
    """What `call()` did, run in a forked child with at most MEMORY_HEADROOM more memory."""
    read_end, write_end = os.pipe()
    limit = _mapped_bytes() + MEMORY_HEADROOM
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        os.close(read_end)
        report: dict[str, Any]
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            report = {"returned": repr(call())}
        except BaseException as exc:
            report = {"raised": type(exc).__name__, "message": str(exc)}
            if type(exc).__name__ not in ("DistrunError", "ValidationError", "UnsafeFileError"):
                report["message"] += "\n" + traceback.format_exc()
        try:
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout)
        if not ready:
            return Outcome(hung=True)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    data = json.loads(b"".join(chunks) or b"{}")
    return Outcome(False, data.get("returned"), data.get("raised"), data.get("message", ""))
