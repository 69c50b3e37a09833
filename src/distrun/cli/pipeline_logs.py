"""`distrun logs PIPELINE` and `distrun stream PIPELINE`: every step's logs, each line prefixed
with its step (`[train] [1/3] ...`).

A pipeline's record runs no process; its steps' jobs have the logs (a sweep step's: its trials',
each line `[STEP] [trial_N] ...`). Without --follow each step
that has a job is shown in turn, in the pipeline's order. Following, each step's job is followed
from the moment it appears in the pipeline's record, side by side (one thread each, writing
whole lines only), until the pipeline ended and every step's log was read to its end.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
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
        self.unread = False  # a write failed: the reader went away (`| head`)

    def write(self, data: bytes) -> int:
        joined = self._pending + bytes(data)
        cut = joined.rfind(b"\n") + 1
        self._pending = joined[cut:]
        if cut:
            body = self._prefix + joined[:cut].replace(b"\n", b"\n" + self._prefix)
            with self._lock:
                self._shown(self._out.write, body[: len(body) - len(self._prefix)])
        return len(data)

    def flush(self) -> None:
        with self._lock:
            self._shown(self._out.flush)

    def _shown(self, call: Callable[..., object], *args: object) -> None:
        try:
            call(*args)
        except OSError:
            self.unread = True
            raise

    def close(self) -> None:
        if self._pending:
            self.write(b"\n")
        self.flush()

    def isatty(self) -> bool:
        return False


def show_pipeline_logs(
    layout: Layout,
    record: JobRecord,
    out: BinaryIO,
    *,
    follow: bool,
    tail: int | None,
    color: bool,
    lock: threading.Lock | None = None,
) -> JobRecord:
    """Every step's logs, prefixed by step; following, until the pipeline and its steps ended.
    `lock`: held for each whole line written to `out`, by whoever else writes lines to it too
    (`distrun run`'s event lines). Returns the pipeline's last record."""
    lock = lock or threading.Lock()
    shown: set[str] = set()
    threads: list[threading.Thread] = []
    failures: list[str] = []
    unread = threading.Event()  # the reader went away: stop following, say nothing more

    def note(text: str) -> None:
        with lock:
            out.write(neutral(text.encode()) + b"\n")
            out.flush()

    def show(step: str, job: str, sweep: bool = False) -> None:
        prefixed = StepPrefixed(out, step, lock)
        try:
            if sweep:  # a sweep step: its trials' logs, each line `[STEP] [trial_N] ...`
                trials = get_job(layout, job)
                show_pipeline_logs(layout, trials, prefixed, follow=follow, tail=tail, color=color)  # type: ignore[arg-type]
            else:
                show_logs(layout, job, rank=None, follow=follow, tail=tail, color=color, out=prefixed)
        except DistrunError as exc:
            failures.append(f"[{step}] {exc.message}")
        except OSError:
            if not prefixed.unread:
                raise
        finally:
            try:
                prefixed.close()
            except OSError:
                pass  # the reader went away (prefixed.unread)
            if prefixed.unread:
                unread.set()

    while True:
        ended = record.terminal  # read before the steps: a step started before the end is not missed
        for step, state in (record.steps or {}).items():
            if step in shown or never_ran(state) or not state.get("job"):
                continue
            shown.add(step)
            if state.get("reused"):
                note(f"[{step}] Reused: its logs are job {state['job']}'s (distrun logs {state['job']})")
                continue
            sweep = "sweep" in state  # a pipeline's sweep step
            if not follow:
                show(step, str(state["job"]), sweep)
                continue
            thread = threading.Thread(target=show, args=(step, str(state["job"]), sweep), daemon=True)
            thread.start()
            threads.append(thread)
        if ended or not follow or unread.is_set():
            break
        time.sleep(LOOK_SECONDS)
        record = get_job(layout, record.name)
    for thread in threads:
        while thread.is_alive() and not unread.is_set():
            thread.join(0.2)  # a bounded join: Ctrl-C is still taken
    if unread.is_set():  # the caller's `| head` took what it wanted (distrun.cli.stdout_reader)
        raise BrokenPipeError(errno.EPIPE, "the reader of the logs went away")
    out.flush()
    for failure in failures:
        note(failure)
    if not shown:
        note(f"{record.name}: no step has started yet")
    return record
