"""`distrun logs PIPELINE` and `distrun stream PIPELINE`: every step's logs, each line prefixed
with its step (`[train] [1/3] ...`).

A pipeline's record runs no process; its steps' jobs have the logs. Without --follow each step
that has a job is shown in turn, in the pipeline's order. Following, each step's job is followed
from the moment it appears in the pipeline's record, side by side (one thread each, writing
whole lines only), until the pipeline ended and every step's log was read to its end.
"""

from __future__ import annotations

import threading
import time
from typing import BinaryIO

from distrun.cli.logs_view import show_logs
from distrun.core.errors import DistrunError
from distrun.core.terminal_text import neutral
from distrun.runner.jobs import get_job
from distrun.runner.pipelines import never_ran
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

LOOK_SECONDS = 0.2  # how often the pipeline's record is read for steps that started


class StepPrefixed:
    """A binary output that puts `[step] ` before every line, and hands only whole lines to the
    shared output (under its lock): steps followed side by side never mix within a line."""

    def __init__(self, out: BinaryIO, step: str, lock: threading.Lock) -> None:
        self._out = out
        self._prefix = neutral(f"[{step}] ".encode())
        self._lock = lock
        self._pending = b""

    def write(self, data: bytes) -> int:
        joined = self._pending + bytes(data)
        cut = joined.rfind(b"\n") + 1
        self._pending = joined[cut:]
        if cut:
            body = self._prefix + joined[:cut].replace(b"\n", b"\n" + self._prefix)
            with self._lock:
                self._out.write(body[: len(body) - len(self._prefix)])
        return len(data)

    def flush(self) -> None:
        with self._lock:
            self._out.flush()

    def close(self) -> None:
        if self._pending:
            self.write(b"\n")
        self.flush()

    def isatty(self) -> bool:
        return False


def show_pipeline_logs(
    layout: Layout, record: JobRecord, out: BinaryIO, *, follow: bool, tail: int | None, color: bool
) -> JobRecord:
    """Every step's logs, prefixed by step; following, until the pipeline and its steps ended.
    Returns the pipeline's last record."""
    lock = threading.Lock()
    shown: set[str] = set()
    threads: list[threading.Thread] = []
    failures: list[str] = []

    def note(text: str) -> None:
        with lock:
            out.write(neutral(text.encode()) + b"\n")
            out.flush()

    def show(step: str, job: str) -> None:
        prefixed = StepPrefixed(out, step, lock)
        try:
            show_logs(layout, job, rank=None, follow=follow, tail=tail, color=color, out=prefixed)
        except DistrunError as exc:
            failures.append(f"[{step}] {exc.message}")
        finally:
            prefixed.close()

    while True:
        ended = record.terminal  # read before the steps: a step started before the end is not missed
        for step, state in (record.steps or {}).items():
            if step in shown or never_ran(state) or not state.get("job"):
                continue
            shown.add(step)
            if state.get("reused"):
                note(f"[{step}] Reused: its logs are job {state['job']}'s (distrun logs {state['job']})")
                continue
            if not follow:
                show(step, str(state["job"]))
                continue
            thread = threading.Thread(target=show, args=(step, str(state["job"])), daemon=True)
            thread.start()
            threads.append(thread)
        if ended or not follow:
            break
        time.sleep(LOOK_SECONDS)
        record = get_job(layout, record.name)
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # a bounded join: Ctrl-C is still taken
    out.flush()
    for failure in failures:
        note(failure)
    if not shown:
        note(f"{record.name}: no step has started yet")
    return record
