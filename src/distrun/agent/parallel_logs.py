"""A parallel step's logs as Azure ML lays them out, in the job's `code/logs/` folder (its
`./logs`), beside distrun's own per-rank logs (`user_logs/std_log_process_NN.txt`), which stay
as they are:

    logs/user/stdout/<node>/processNNN.stdout.txt   what the entry script printed in that process
    logs/user/stderr/<node>/processNNN.stderr.txt   what it wrote to stderr
    logs/user/error/<node>/processNNN.txt           each failed try of a mini-batch: its traceback
    logs/user/error.txt                             the failed mini-batches, summed up (process 0)
    logs/sys/job_report/processed_mini-batches.csv  one row per mini-batch that ended (process 0)

`<node>` is `node<NODE_RANK>`, `processNNN` the process's index on its node (LOCAL_RANK). The
entry script's output is read from pipes and written both to the rank's own output (so `distrun
run` streams it and the rank's log keeps it) and to its file here. The job's processes can write
this folder, so every file is opened beneath the job folder without following a link
(`distrun.core.file_modes`), and each file stops growing at MAX_LOG_BYTES (the rank's log still
gets everything).
"""

from __future__ import annotations

import csv
import io
import os
import threading
from pathlib import Path
from typing import Any

from distrun.core.file_modes import open_append_beneath, write_all, write_beneath

LOGS = "code/logs"  # the job's ./logs, where Azure ML's summary files are
MAX_LOG_BYTES = 16 << 20  # one entry-script log file, at most
CHUNK = 1 << 16
CUT_NOTE = b"\n[distrun parallel] this log stops here (%d MB); the rest is in the rank's log, user_logs/\n"
REPORT_COLUMNS = ("Mini-batch Id", "Process", "Total", "Succeeded", "Failed", "Status", "Error Message")


def process_folder_names() -> tuple[str, str]:
    """(`node<N>`, `processNNN`) of this process, from the gang's variables."""
    node = os.environ.get("NODE_RANK", "0")
    local = os.environ.get("LOCAL_RANK") or os.environ.get("RANK", "0")
    return f"node{int(node)}", f"process{int(local):03d}"


class BoundedLog:
    """One log file beneath the job folder, appended to up to MAX_LOG_BYTES, then left as it is;
    `lazy`: made at its first write only (an error log, there only where something failed)."""

    def __init__(self, job_dir: Path, relative: str, lazy: bool = False) -> None:
        self.path = job_dir / relative
        self.job_dir = job_dir
        self.fd: int | None = None
        self.size = 0
        self.opened = False
        self.lock = threading.Lock()
        if not lazy:
            self._open()

    def _open(self) -> None:
        self.opened = True
        try:
            self.fd = open_append_beneath(self.job_dir, self.path)
            self.size = os.fstat(self.fd).st_size
        except OSError:  # a link or a pipe planted there: the rank's log still has everything
            self.fd = None

    def write(self, data: bytes) -> None:
        with self.lock:
            if not self.opened:
                self._open()
            if self.fd is None:
                return
            room = MAX_LOG_BYTES - self.size
            try:
                write_all(self.fd, data[: max(room, 0)])
                if len(data) > room:
                    write_all(self.fd, CUT_NOTE % (MAX_LOG_BYTES >> 20))
                    self.close()
            except OSError:
                self.close()
            self.size += len(data)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _copy(source: int, rank_stream: int, log: BoundedLog) -> None:
    """Everything read from `source` to the rank's stream and to `log`, until the pipe closes."""
    while chunk := os.read(source, CHUNK):
        try:
            write_all(rank_stream, chunk)
        except OSError:  # the rank's output went away: the file still gets it
            pass
        log.write(chunk)
    os.close(source)
    log.close()


class EntryLogs:
    """The pipes an entry-script process writes its stdout and stderr to (the same two for each
    entry-script process this worker starts), copied to the rank's output and to Azure ML's files."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.node, self.process = process_folder_names()
        self.streams: list[int] = []
        self.threads: list[threading.Thread] = []
        for kind, rank_stream in (("stdout", 1), ("stderr", 2)):
            log = BoundedLog(job_dir, f"{LOGS}/user/{kind}/{self.node}/{self.process}.{kind}.txt")
            read_end, write_end = os.pipe()
            thread = threading.Thread(target=_copy, args=(read_end, rank_stream, log), daemon=True)
            thread.start()
            self.streams.append(write_end)
            self.threads.append(thread)
        self.errors = BoundedLog(job_dir, f"{LOGS}/user/error/{self.node}/{self.process}.txt", lazy=True)

    def streams_pair(self) -> tuple[int, int]:
        """(stdout, stderr) for an entry-script process."""
        return self.streams[0], self.streams[1]

    def error(self, what: str, error: str) -> None:
        """A failed init() or try of a mini-batch (`what`), with its traceback."""
        self.errors.write(f"{what}:\n{error.rstrip()}\n\n".encode())

    def close(self, wait: float = 5.0) -> None:
        """No more entry-script processes: the copies end once what they wrote is read."""
        for fd in self.streams:
            os.close(fd)
        self.streams = []
        for thread in self.threads:
            thread.join(wait)  # a process the script left behind may hold a pipe: not forever
        self.errors.close()


def write_summaries(job_dir: Path, results: list[dict[str, Any]], failures: list[dict[str, Any]], summary: str) -> None:
    """Process 0, at the end: the error summary and the processed mini-batches' report."""
    if summary:
        write_beneath(job_dir, f"{LOGS}/user", "error.txt", summary.encode() + b"\n")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(REPORT_COLUMNS)
    rows: list[tuple[Any, ...]] = []
    for r in results:
        short = int(r.get("failed_items", 0))
        rows.append((r["index"], r["process"], r["items"], int(r["items"]) - short, short, "DONE", ""))
    rows += [
        (f["mini_batch"], f["process"], f["items"], 0, f["items"], "FAILED", _last_line(f.get("error", "")))
        for f in failures
    ]
    writer.writerows(sorted(rows, key=lambda row: int(row[0])))
    write_beneath(job_dir, f"{LOGS}/sys/job_report", "processed_mini-batches.csv", out.getvalue().encode())


def _last_line(error: str) -> str:
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""
