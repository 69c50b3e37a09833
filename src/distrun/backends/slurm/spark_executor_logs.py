"""A Spark job's executors' logs on Slurm, followed from the workers' folders into the job's own.

The standalone cluster inside the allocation (`spark_cluster`) gives each node's worker a folder
in the job folder, `spark-cluster/work_NN/`, where each executor writes its stdout and stderr
(`APP_ID/N/stdout`, N: Spark's executor id). Node 0's agent follows those files while the job
runs and appends what they gain to `user_logs/std_log_executor_N.txt`, which `distrun run`
(and `job stream`) shows as `[executor N]`, as on a Spark target. The files are read from the
job folder, which every node sees, so the executors' last lines are read once they have all
ended, after the gang stopped the workers (no worker needs to answer).

Everything under the job folder is the job's to change: each folder and file is opened through
the no-follow path (`core.safe_files.open_beneath`), names must be what Spark writes, and each
read is bounded.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from distrun.backends.slurm.spark_cluster import CLUSTER_FOLDER
from distrun.backends.spark.executor_logs import READ_BYTES, keep_executor_output
from distrun.core.safe_files import open_beneath

POLL_SECONDS = 0.5
LAST_PASSES = 256  # once every process ended: the rest, READ_BYTES per file and pass, within bounds
_WORK = re.compile(r"work_[0-9]{2,6}")
_APP = re.compile(r"app-[0-9A-Za-z._\-]{1,200}")
_EXECUTOR = re.compile(r"[0-9]{1,9}")
_LOG_TYPES = ("stdout", "stderr")


class WorkFolderExecutorLogs:
    """Follows the executors' files under `spark-cluster/` in a thread of node 0's agent until `stop()`."""

    def __init__(self, job_dir: Path) -> None:
        self._root = job_dir
        self._offsets: dict[str, int] = {}  # a file's path in the job folder -> bytes read
        # What a file gained after its last newline: held until its line is whole, so that an
        # executor's stdout and stderr, appended to one log, never cut each other's lines.
        self._partial: dict[str, bytes] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-executor-files", daemon=True)

    def start(self) -> WorkFolderExecutorLogs:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Read what the executors wrote last (every process of the node has ended), then end."""
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            self._pass()
        for _ in range(LAST_PASSES):
            if not self._pass():
                break
        for relative, held in self._partial.items():  # a last line without its newline
            if held:
                _, _, _, executor_id, log_type = relative.split("/")
                keep_executor_output(self._root, executor_id, log_type, held + b"\n", None)

    def _pass(self) -> bool:
        """One look for new executors' files and at each one; whether anything was read."""
        read = False
        for relative, executor_id, log_type in self._files():
            read = self._read(relative, executor_id, log_type) or read
        return read

    def _files(self) -> list[tuple[str, str, str]]:
        found = []
        for work in self._names(CLUSTER_FOLDER, _WORK):
            for app in self._names(f"{CLUSTER_FOLDER}/{work}", _APP):
                for executor in self._names(f"{CLUSTER_FOLDER}/{work}/{app}", _EXECUTOR):
                    for log_type in _LOG_TYPES:
                        found.append((f"{CLUSTER_FOLDER}/{work}/{app}/{executor}/{log_type}", executor, log_type))
        return found

    def _names(self, relative: str, pattern: re.Pattern[str]) -> list[str]:
        """The names in a folder of the job's that are what Spark writes there (none if it is not a folder)."""
        try:
            fd = open_beneath(self._root, relative, directory=True)
        except OSError:
            return []
        try:
            return sorted(name for name in os.listdir(fd) if pattern.fullmatch(name))
        except OSError:
            return []
        finally:
            os.close(fd)

    def _read(self, relative: str, executor_id: str, log_type: str) -> bool:
        offset = self._offsets.get(relative, 0)
        try:
            fd = open_beneath(self._root, relative)
        except OSError:
            return False  # not yet there, or not a regular file (the job planted something)
        try:
            data = os.pread(fd, READ_BYTES, offset)
        except OSError:
            return False
        finally:
            os.close(fd)
        if not data:
            return False
        self._offsets[relative] = offset + len(data)
        data = self._partial.pop(relative, b"") + data
        cut = data.rfind(b"\n") + 1 if len(data) <= READ_BYTES else len(data)  # a line longer than that goes as it is
        self._partial[relative] = data[cut:]
        if cut:
            keep_executor_output(self._root, executor_id, log_type, data[:cut], None)
        return True
