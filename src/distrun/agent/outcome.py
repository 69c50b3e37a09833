"""What the agent reports: how each process ended and how the gang as a whole ended."""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.agent.traceback_finder import log_tail
from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.plan.model import ProcessSpec

COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
CANCELED = JobStatus.CANCELED
PREEMPTED = JobStatus.PREEMPTED


@dataclass
class ProcessOutcome:
    name: str
    role: str
    index: int
    rank: int | None
    node_rank: int
    host: str
    log: str  # path of its log file
    label: str
    pid: int | None = None
    exit_code: int | None = None  # None while running, or when ended by a signal
    signal: str | None = None  # e.g. "SIGKILL"
    after_ms: float | None = None  # milliseconds from gang start to its exit
    stopped_by_distrun: bool = False  # ended because distrun stopped it: not a failure
    # Planned but never started: the job was stopped (a cancel, another node's failure) or could
    # not prepare before this process's turn. Listed so the record names every planned process.
    never_started: bool = False

    @property
    def running(self) -> bool:
        return self.exit_code is None and self.signal is None and not self.never_started

    @property
    def failed(self) -> bool:
        return not self.running and not self.stopped_by_distrun and (self.exit_code != 0 or self.signal is not None)

    def describe_exit(self) -> str:
        if self.signal:
            text = f"was killed by {self.signal}"
            if self.signal == "SIGKILL":
                text += " (possibly out of memory)"
            return text
        return f"exited with code {self.exit_code}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.never_started:
            del data["never_started"]  # records of processes that ran keep their usual keys
        return data


def planned_outcome(spec: ProcessSpec, host: str, log_dir: Path) -> ProcessOutcome:
    """The outcome of the planned process `spec` on `host`, its log in `log_dir`, before it has one."""
    return ProcessOutcome(
        name=spec.name,
        role=spec.role,
        index=spec.index,
        rank=spec.rank,
        node_rank=spec.node_rank,
        host=host,
        log=str(log_dir / spec.log_name),
        label=spec.label,
    )


def never_started(spec: ProcessSpec, host: str, log_dir: Path) -> ProcessOutcome:
    """The outcome of a planned process that was never started (stopped by distrun before its turn)."""
    outcome = planned_outcome(spec, host, log_dir)
    outcome.stopped_by_distrun = outcome.never_started = True
    return outcome


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def who(outcome: ProcessOutcome) -> str:
    """How the user names a process: `rank 2`, `worker 1`, `ps 0`, `mpi launcher`."""
    if outcome.role == "rank":
        return f"rank {outcome.rank}"
    if outcome.role == "launcher":
        return "mpi launcher"
    return f"{outcome.role} {outcome.index}"


@dataclass
class GangResult:
    status: JobStatus  # Completed | Failed | Canceled | Preempted
    reason: str
    root_cause: dict[str, Any] | None
    processes: list[ProcessOutcome] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "root_cause": self.root_cause,
            "processes": [p.to_dict() for p in self.processes],
        }


def root_cause_of(outcome: ProcessOutcome, traceback: str) -> dict[str, Any]:
    return {
        "name": outcome.name,
        "role": outcome.role,
        "index": outcome.index,
        "rank": outcome.rank,
        "node_rank": outcome.node_rank,
        "host": outcome.host,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "after_ms": outcome.after_ms,
        "reason": f"{who(outcome)} on node {outcome.node_rank} {outcome.describe_exit()}",
        "traceback": traceback,
        # Without a traceback, what the process said last is the cause a user needs to see
        # (`python: can't open file 'trian.py'`, an argparse usage error, `sudo: command not found`).
        "log_tail": "" if traceback else log_tail(outcome.log),
        "log": outcome.log,
    }
