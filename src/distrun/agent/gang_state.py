"""The plain data the node agent's gang and its parts share: its options, each started process, its stop.

`agent.gang` runs the loop; `agent.gang_hangs` (hangs and stack reads) and `agent.gang_signals`
(stop signals) read these without importing the loop.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from distrun.agent.containers import ContainerRun
from distrun.agent.outcome import ProcessOutcome, signal_name
from distrun.agent.peers import MainWorkPeers
from distrun.plan.model import ProcessSpec
from distrun.spec.defaults import DEFAULT_GRACE_PERIOD

if TYPE_CHECKING:  # MPI output handling is imported only by the jobs that start a launcher
    from distrun.agent.mpi_output import MpiOutput


@dataclass
class RunningProcess:
    spec: ProcessSpec
    proc: subprocess.Popen[bytes]
    outcome: ProcessOutcome
    log_fd: int
    pidfd: int
    pipe_open: bool = True
    signalled_at: float | None = None  # when distrun sent it a stop signal
    # Whether it was still alive when signalled: one that had already exited on its own (its
    # exit not yet read, e.g. two ranks failing in the same instant) was not stopped by distrun.
    signalled_alive: bool = False
    demux: MpiOutput | None = None  # splits an MPI launcher's output into per-rank logs

    def record_exit(self, code: int, after_ms: float) -> None:
        """Its exit (`code` as Popen gives it: negative for a signal), `after_ms` after the gang started."""
        self.outcome.after_ms = after_ms
        if code < 0:
            self.outcome.signal = signal_name(-code)
        else:
            self.outcome.exit_code = code
        if self.signalled_at is not None and self.signalled_alive:
            self.outcome.stopped_by_distrun = True

    def close_log(self) -> None:
        if self.log_fd >= 0:
            try:
                os.close(self.log_fd)
            except OSError:
                pass
            self.log_fd = -1


@dataclass
class GangStop:
    status: str
    reason: str
    root: RunningProcess | None = None
    root_cause: dict[str, Any] | None = None  # made before the stop (a hang's odd process out)


@dataclass
class GangOptions:
    grace_period: float = DEFAULT_GRACE_PERIOD
    timeout: float | None = None
    stream: BinaryIO | None = None
    color: bool = False
    base_env: Mapping[str, str] | None = None
    # 32 random hex digits, as uuid4().hex gave; the uuid module imports platform (2 ms a start).
    launch_id: str = field(default_factory=lambda: os.urandom(16).hex())
    on_started: Callable[[list[ProcessOutcome]], None] | None = None
    handle_signals: bool = True
    # Stop signals noted before the gang started (see agent.stop_signals); the gang adds the
    # ones it receives to the same list.
    signals: list[int] | None = None
    # Set when other agents run the job's other nodes: auxiliaries then wait for all of them.
    peers: MainWorkPeers | None = None
    # Says whether a stop signal is a preemption (stopped from outside, not `job cancel`): the
    # ranks get the grace period all the same, and the gang ends Preempted instead of Canceled.
    preempted_by: Callable[[int], bool] | None = None
    # limits.hang_timeout: with no output from any process and no metric logged for this long,
    # every process's stack is read into the job folder and the gang ends Failed (hung).
    hang_timeout: float | None = None
    # When the job last logged a metric (seconds since the epoch), or None: ranks that only log
    # metrics are making progress too.
    last_metric: Callable[[], float | None] | None = None
    # Answer `distrun job stacks` requests in the job folder (the folder above log_dir).
    stack_requests: bool = True
    # Whether the agents of the job's other nodes see this job folder's stack requests and
    # progress (shared or relayed): then a hang is judged, and its stacks read, job-wide.
    peers_share_job_folder: bool = True
    # Each process runs in a container of the job's image (`distrun.agent.containers`); None: here.
    container: ContainerRun | None = None


def why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
