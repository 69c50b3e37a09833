"""What a parallel step says and leaves: its progress line ("mini-batches 120/400, 2 failed,
3.1 per s"), the thresholds that fail it, the rows appended to `append_row_to`, and Azure ML's
summary files in the job's `code/logs/` folder (its `./logs`; the others: `parallel_logs`):

    logs/job_progress_overview.txt   the progress, rewritten as it goes
    logs/job_result.txt              the counts once every mini-batch ended
    logs/job_error.txt               each failed mini-batch: its process, items and traceback
"""

from __future__ import annotations

import os
import sys
import time
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.agent.parallel_batches import Split
from distrun.agent.parallel_logs import LOGS, write_summaries
from distrun.agent.parallel_queue import Queue
from distrun.core.file_modes import write_beneath

PROGRESS_EVERY = 2.0  # seconds between two progress lines
WAIT_STEP = 0.05  # seconds between two looks while process 0 waits for the others


class Progress:
    def __init__(self, queue: Queue, total: int, job_dir: Path) -> None:
        self.queue = queue
        self.total = total
        self.job_dir = job_dir
        self.started = time.monotonic()
        self.last = self.started

    def line(self) -> str:
        done, failed = self.queue.counts()
        rate = (done + failed) / max(time.monotonic() - self.started, 1e-9)
        return f"mini-batches {done + failed}/{self.total}, {failed} failed, {rate:.1f} per s"

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        text = self.line()
        print(f"[distrun parallel] {text}", flush=True)
        _write(self.job_dir, "job_progress_overview.txt", text + "\n")


_UNWRITABLE: set[str] = set()  # what was already said to be unwritable


def _tolerant(what: str, write: Callable[[], None]) -> None:
    """Write a summary; one that cannot be written (a link on the way: a `code` folder in the
    image, or one the job planted) is said once, and the step goes on without it."""
    try:
        write()
    except OSError as exc:
        if what not in _UNWRITABLE:
            _UNWRITABLE.add(what)
            print(f"[distrun parallel] {what} not written: {exc}", file=sys.stderr, flush=True)


def _write(job_dir: Path, name: str, text: str) -> None:
    """A summary file in the job's logs folder, which its processes can write: whole, never
    through a link they planted (`write_beneath`)."""
    _tolerant(f"{LOGS}/{name}", lambda: write_beneath(job_dir, LOGS, name, text.encode()))


def threshold_passed(queue: Queue, options: Namespace, total: int) -> str | None:
    """Why the step fails now, or None while its failures are within its thresholds."""
    failures = queue.failures()
    if 0 <= options.mini_batch_error_threshold < len(failures):
        return (
            f"{len(failures)} mini-batches failed, more than mini_batch_error_threshold "
            f"({options.mini_batch_error_threshold})"
        )
    items = sum(int(f.get("failed_items", 0)) for f in failures) + queue.failed_items()
    if 0 <= options.error_threshold < items:
        return f"{items} items failed, more than error_threshold ({options.error_threshold})"
    percent = options.allowed_failed_percent
    if percent is not None and percent < 100 and len(failures) * 100 > percent * total:
        return f"{len(failures)} of {total} mini-batches failed, more than allowed_failed_percent ({percent:g}%)"
    return None


def error_summary(failures: list[dict[str, Any]]) -> str:
    parts = []
    for failure in failures:
        files = failure.get("files") or []
        shown = f" ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})" if files else ""
        parts.append(
            f"mini-batch {failure['mini_batch']}{shown}, {failure['items']} items, failed {failure['tries']} "
            f"tries in {failure['process']}:\n{failure['error'].rstrip()}"
        )
    return "\n\n".join(parts)


def say_stop(queue: Any, why: str | None = None) -> int:
    """The step stopped: say why, with every failed mini-batch, and end this process failed."""
    why = why or queue.stopped() or "stopped"
    try:
        summary = error_summary(queue.failures())
    except (OSError, ValueError):  # process 0, which holds the queue, is gone
        summary = ""
    text = f"parallel step failed: {why}" + (f"\n\n{summary}" if summary else "")
    print(f"[distrun parallel] {text}", file=sys.stderr, flush=True)
    return 1


def finish(queue: Queue, progress: Progress, split: Split, options: Namespace, others_gone: Callable[[], bool]) -> int:
    """Process 0, once it took nothing more: wait for the others, then the output and the summary."""
    total = len(split.batches)
    while (sum(queue.counts()) < total or not others_gone()) and queue.stopped() is None:
        progress.tick()
        time.sleep(WAIT_STEP)
    progress.tick(force=True)
    if queue.stopped() is not None:
        leave_summaries(queue, progress.job_dir, None, options.append_row_file_name)
        return say_stop(queue)
    target = Path(options.append_row_to) if options.append_row_to else None
    rows = leave_summaries(queue, progress.job_dir, target, options.append_row_file_name)
    failures = queue.failures()
    done, failed = queue.counts()
    result = (
        f"mini-batches: {total}, succeeded: {done}, failed: {failed}\n"
        f"rows appended: {rows}{f' to {options.append_row_to}' if options.append_row_to else ''}\n"
        f"items without a returned row: {queue.failed_items()}\n"
    )
    _write(progress.job_dir, "job_result.txt", result)
    for line in result.splitlines():
        print(f"[distrun parallel] {line}", flush=True)
    if failures:
        print(f"[distrun parallel] failed mini-batches (within the thresholds):\n{error_summary(failures)}", flush=True)
    return 0


def leave_summaries(queue: Queue, job_dir: Path, target: Path | None, file_name: str) -> int:
    """Process 0, once no mini-batch runs any more (the step ended or stopped): the error
    summaries and the report of the mini-batches that ended; the rows appended to `target`
    where there is one (how many)."""
    failures = queue.failures()
    summary = error_summary(failures)
    if failures:
        _write(job_dir, "job_error.txt", summary + "\n")
    ended, rows = _ended(queue, target, file_name)
    _tolerant(f"{LOGS}/user/error.txt", lambda: write_summaries(job_dir, ended, failures, summary))
    return rows


def _ended(queue: Queue, target: Path | None, file_name: str) -> tuple[list[dict[str, Any]], int]:
    """Each done mini-batch (without its rows), in order, and how many rows were appended: every
    returned row, in mini-batch order, to the output `target` (a uri_file output's file, or
    `file_name`, Azure ML's parallel_run_step.txt, in a uri_folder output), where there is one."""
    ended: list[dict[str, Any]] = []
    count = 0
    if target is not None and target.is_dir():
        target = target / file_name
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
    with open(target or os.devnull, "w", encoding="utf-8") as out:
        for result in queue.results():
            lines = result.pop("lines", [])
            ended.append(result)
            if target is not None:
                for line in lines:
                    out.write(line + "\n")
                    count += 1
    return ended, count
