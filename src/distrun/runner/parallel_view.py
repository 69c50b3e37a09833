"""What the faces say of a parallel step: `distrun plan` its mini-batch split (how many, how
big) and the processes that pull them; `distrun job show` its counts and failed mini-batches,
read from the queue its processes write in the job's folder (`distrun.agent.parallel_queue`).

The queue is written by the job's own processes: it is read through the safe path (no link
followed, bounded reads), and what cannot be read is left out rather than trusted.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from distrun.agent.parallel_batches import split_input
from distrun.agent.parallel_queue import DONE, FAILED
from distrun.agent.parallel_run import arguments
from distrun.core.errors import DistrunError
from distrun.core.safe_files import read_regular
from distrun.loading.parallel_step import WORKER_MODULE

LOG_LIMIT = 1 << 28  # a queue log: every row the mini-batches returned (done), or their tracebacks
SHOWN_FAILURES = 5


def worker_options(rendered: dict[str, Any]) -> Any:
    """The worker's options when the planned job is a parallel step's gang, else None."""
    nodes = rendered.get("plan", {}).get("nodes") or []
    if not nodes or not nodes[0].get("processes"):
        return None
    argv = nodes[0]["processes"][0].get("argv") or []
    try:
        words = shlex.split(argv[-1]) if argv else []
    except ValueError:
        return None
    if WORKER_MODULE not in words:
        return None
    return arguments(words[words.index(WORKER_MODULE) + 1 :])[0]


def parallel_plan(rendered: dict[str, Any]) -> dict[str, Any] | None:
    """The split `distrun plan` shows for a parallel step (None for any other job)."""
    options = worker_options(rendered)
    if options is None:
        return None
    processes = [
        f"{p['name']} (node {node['node_rank']})" for node in rendered["plan"]["nodes"] for p in node["processes"]
    ]
    found: dict[str, Any] = {"input": options.input_data, "processes": processes}
    if not Path(options.input_data).exists():
        return {**found, "later": True}
    try:
        keys = tuple(k for k in options.partition_keys.split(",") if k)
        split = split_input(
            Path(options.input_data), options.input_type, options.files_per_batch, options.bytes_per_batch, keys
        )
    except (DistrunError, ValueError, OSError) as exc:
        return {**found, "problem": str(exc)}
    sizes = [batch.size for batch in split.batches]
    return {
        **found,
        "mini_batches": len(sizes),
        "items": sum(sizes),
        "unit": split.kind,
        "smallest": min(sizes, default=0),
        "largest": max(sizes, default=0),
        "partition_keys": list(keys),
    }


def mini_batches(folder: Path) -> dict[str, Any] | None:
    """A parallel job's mini-batches as plain data (`job show -o json`): how many there are
    (None before process 0 split the input), ended, succeeded and failed, and each failure (the
    mini-batch, its process, its tries, its error); None when the job's folder has no queue."""
    queue = folder / "parallel"
    if not _is_folder(queue):
        return None
    done = {r.get("index") for r in _records(folder, queue / DONE)}
    failed = sorted(_records(folder, queue / FAILED), key=lambda r: r.get("mini_batch") or 0)
    failures = [{key: record.get(key) for key in ("mini_batch", "process", "tries", "error")} for record in failed]
    return {
        "total": _total(queue),
        "ended": len(done) + len(failed),
        "succeeded": len(done),
        "failed": len(failed),
        "failures": failures,
    }


def show_lines(folder: Path) -> list[str]:
    """`job show`'s lines for a parallel step's job: its counts and its failed mini-batches."""
    counts = mini_batches(folder)
    if counts is None:
        return []
    of = f"/{counts['total']}" if counts["total"] is not None else ""
    ended = f"{counts['ended']}{of} ended, {counts['succeeded']} succeeded, {counts['failed']} failed"
    lines = ["", f"Mini-batches: {ended}"]
    for failure in counts["failures"][:SHOWN_FAILURES]:
        last = (str(failure["error"] or "").strip().splitlines() or ["?"])[-1]
        lines.append(f"  mini-batch {failure['mini_batch']} in {failure['process']}, {failure['tries']} tries: {last}")
    if counts["failed"] > SHOWN_FAILURES:
        lines.append(f"  ... and {counts['failed'] - SHOWN_FAILURES} more: {folder}/code/logs/job_error.txt")
    return lines


def _records(folder: Path, path: Path) -> list[dict[str, Any]]:
    """The whole JSON lines of a queue log, read through the safe path (a job may have replaced it)."""
    try:
        text = read_regular(path, LOG_LIMIT, root=folder).decode("utf-8", "replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def progress_line(folder: Path) -> str | None:
    """The progress process 0 last wrote (`code/logs/job_progress_overview.txt`), for the web UI:
    one short file, read every few seconds while the job runs."""
    try:
        text = read_regular(folder / "code" / "logs" / "job_progress_overview.txt", 4096, root=folder)
    except OSError:
        return None
    line = text.decode("utf-8", "replace").strip()
    return line or None


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _total(queue: Path) -> int | None:
    try:
        found = json.loads(read_regular(queue / "plan.json", 4096, root=queue.parent))
    except (OSError, ValueError):
        return None
    total = found.get("mini_batches") if isinstance(found, dict) else None
    return total if isinstance(total, int) else None
