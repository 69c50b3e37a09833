"""One entry-script process of a parallel step, seen from distrun's worker: started with the
job's Python, sent `init`, `run` and `shutdown` requests, waited for with a timeout, killed and
started again when it hangs or dies (`distrun.agent.parallel_host` is what it runs)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.agent import parallel_host
from distrun.core.death_signal import setpriv_prefix


@dataclass
class Answer:
    ok: bool
    error: str = ""
    count: int = 0
    lines: list[str] | None = None


def job_python() -> str:
    """The `python` first on the rank's PATH (the job's environment), else distrun's own."""
    return shutil.which("python") or shutil.which("python3") or sys.executable


class EntryProcess:
    def __init__(self, entry: Path, argv: list[str], streams: tuple[int, int] | None = None) -> None:
        self.entry = entry
        self.argv = argv
        self.streams = streams  # where its stdout and stderr go (`parallel_logs`); None: the rank's
        self.process: subprocess.Popen[bytes] | None = None
        self.buffer = b""

    def start(self, timeout: float) -> Answer:
        """A new process with the entry script imported and its `init()` run."""
        self.close()
        to_child, from_us = os.pipe()
        to_us, from_child = os.pipe()
        env = dict(os.environ, **{parallel_host.FDS_VARIABLE: f"{to_child},{from_child}"})
        # Killed with this worker however it ends (its requests pipe closing ends it too).
        self.process = subprocess.Popen(
            [*setpriv_prefix("KILL"), job_python(), parallel_host.__file__],
            env=env,
            pass_fds=(to_child, from_child),
            stdin=subprocess.DEVNULL,
            stdout=None if self.streams is None else self.streams[0],
            stderr=None if self.streams is None else self.streams[1],
            start_new_session=True,  # its whole group is killed on a timeout
        )
        os.close(to_child)
        os.close(from_child)
        self.requests = os.fdopen(from_us, "w", encoding="utf-8")
        self.answers = to_us
        self.buffer = b""
        return self.ask({"op": "init", "entry": str(self.entry), "argv": self.argv}, timeout)

    def ask(self, request: dict[str, Any], timeout: float) -> Answer:
        """The answer to one request; a process that does not answer in `timeout` seconds is killed."""
        assert self.process is not None
        try:
            self.requests.write(json.dumps(request) + "\n")
            self.requests.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                return Answer(False, f"timed out after {timeout:g} s (retry_settings.timeout); the process was killed")
            ready, _, _ = select.select([self.answers], [], [], left)
            if ready:
                chunk = os.read(self.answers, 1 << 20)
                if not chunk:
                    return self._died()
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        found = json.loads(line)
        return Answer(found["ok"], found.get("error", ""), found.get("count", 0), found.get("lines"))

    def _died(self) -> Answer:
        assert self.process is not None
        code = self.process.wait()
        self.close()
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return Answer(False, f"the entry script's process ended ({how}) while running the mini-batch")

    def close(self) -> None:
        """Kill the process (and whatever it started) and forget it."""
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        self.requests.close()
        os.close(self.answers)
        self.process = None

    def shutdown(self, timeout: float) -> None:
        if self.process is not None and self.process.poll() is None:
            self.ask({"op": "shutdown"}, timeout)
        self.close()
