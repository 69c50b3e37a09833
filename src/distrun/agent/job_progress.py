"""Job-wide progress for the hang watchdog: each node agent says when its node last made progress.

A node agent sees only its own node's output. On a job of several nodes, a node whose ranks are
silent while another node's rank prints is not hung, so each agent publishes the wall-clock
time of its node's last output as `progress/node<k>` in the job folder (a few bytes, at most
every PUBLISH_SECONDS), and reads the other nodes' files only when its own node has been silent
for most of the timeout. Where nodes share the job folder (local, Slurm) the files are the
channel; where they do not (Ray), the backend carries `progress/` between the nodes' copies of
the job folder.

The job's processes can write these files: a rank that forges one only delays its own job's
hang verdict, and every read goes through the safe read path.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from distrun.agent.folder_writes import listed_beneath, write_beneath
from distrun.core.safe_files import read_beneath

PROGRESS = "progress"
PUBLISH_SECONDS = 1.0
_LIMIT = 64
_NAME = re.compile(r"node(\d{1,6})")


def progress_name(node_rank: int) -> str:
    return f"node{node_rank}"


def publish_interval(timeout: float) -> float:
    """Often enough that a peer's verdict is at most a quarter of the timeout behind."""
    return min(PUBLISH_SECONDS, timeout / 4)


class ProgressBoard:
    """This node's published progress, and the latest of the other nodes'."""

    def __init__(self, job_root: Path, node_ranks: Sequence[int]) -> None:
        self.job_root = job_root
        self.mine = set(node_ranks)

    def publish(self, wall_time: float) -> None:
        for rank in sorted(self.mine):
            try:
                write_beneath(self.job_root, PROGRESS, progress_name(rank), f"{wall_time:.3f}".encode())
            except OSError:
                return  # a job folder that refuses it: the other nodes judge by what they see

    def latest_elsewhere(self) -> float | None:
        """The latest progress another node published (seconds since the epoch), or None."""
        latest = None
        for name in listed_beneath(self.job_root, PROGRESS):
            match = _NAME.fullmatch(name)
            if match is None or int(match.group(1)) in self.mine:
                continue
            try:
                stamp = float(read_beneath(self.job_root, f"{PROGRESS}/{name}", _LIMIT))
            except (OSError, ValueError):
                continue
            # A stamp from the future (another clock, or a forged file) counts as now, not later.
            stamp = min(stamp, time.time())
            latest = stamp if latest is None else max(latest, stamp)
        return latest
