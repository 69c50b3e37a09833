"""Restarts and preemptions: whether a job that ended runs again, as attempt k+1 under the same name.

Engine-free, shared by every backend (the local supervisor between gangs, a cluster backend's
node side or its observe): a backend runs attempts, and after each asks `decide` (pure) with
every attempt so far. The whole gang restarts, never one rank: every rank was stopped before an
attempt counts as ended. The attempts' bookkeeping is here too, the same on every engine:
`keep_attempt` sets an ended attempt aside before the next one starts (its logs to
user_logs/attempt_<k>/), and `Attempt.from_dict` reads one back as the record lists it.

    limits.max_restarts          restarts after a failure (default 0: none)
    limits.max_preemptions       restarts after a preemption; default unlimited when
                                 max_restarts is set, else 0. Counted separately.
    limits.no_restart_exit_codes a failure with one of these exit codes is final at once

Every process of attempt k sees DISTRUN_RESTART_COUNT=k, and TORCHELASTIC_RESTART_COUNT=k for
code written for torchrun's `--max-restarts` (e.g. to load the last checkpoint from ./outputs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.job_status import JobStatus
from distrun.restarts.attempt_logs import ATTEMPT_PREFIX, keep_attempt_logs, moved_root_cause

if TYPE_CHECKING:
    from distrun.spec.models import JobLimits

RESTART_COUNT_VARIABLES = ("DISTRUN_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
# Between attempts: 1 s, 2 s, 4 s ... at most 10 s. Long enough for ports and GPUs to be let go,
# short enough not to matter next to a training job's start-up.
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 10.0
# A factor on every pause, for distrun's own test suite, which restarts dozens of jobs and would
# otherwise spend minutes asleep (tests/README.md). Users have no reason to set it.
BACKOFF_SCALE_VARIABLE = "DISTRUN_RESTART_BACKOFF_SCALE"


def restart_env(count: int) -> dict[str, str]:
    return dict.fromkeys(RESTART_COUNT_VARIABLES, str(count))


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 0
    max_preemptions: int | None = None
    no_restart_exit_codes: frozenset[int] = frozenset()

    @classmethod
    def of(cls, limits: JobLimits) -> RestartPolicy:
        return cls(limits.max_restarts or 0, limits.max_preemptions, frozenset(limits.no_restart_exit_codes or ()))

    @property
    def on(self) -> bool:
        """The job may run more than once (a failure or a preemption can restart it)."""
        return self.max_restarts > 0 or bool(self.max_preemptions)

    @property
    def preemptions_allowed(self) -> float:
        if self.max_preemptions is not None:
            return self.max_preemptions
        return math.inf if self.max_restarts > 0 else 0


@dataclass
class Attempt:
    """How one attempt of a job ended, as the record lists it."""

    attempt: int  # 0 for the first run
    status: JobStatus  # Completed | Failed | Canceled | Preempted
    reason: str
    root_cause: dict[str, Any] | None = None
    started_at: float | None = None
    ended_at: float | None = None
    logs: str = "user_logs"  # job-relative folder holding its logs
    restarted: bool = False  # a next attempt followed
    processes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data.pop("processes")  # the record's `processes` are the last attempt's
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        """An attempt as `to_dict` wrote it (the record's `attempts`, slurm/attempts.json), read back."""
        return cls(
            attempt=int(data.get("attempt", 0)),
            status=JobStatus(data.get("status", JobStatus.FAILED)),
            reason=str(data.get("reason", "")),
            root_cause=data.get("root_cause"),
            started_at=data.get("started_at"),
            ended_at=data.get("ended_at"),
            logs=str(data.get("logs", "user_logs")),
            restarted=bool(data.get("restarted", False)),
        )


def kept_logs(attempt: int) -> str:
    """Where a restarted attempt's logs are, relative to the job folder (its `Attempt.logs`)."""
    return f"user_logs/{ATTEMPT_PREFIX}{attempt}"


def keep_logs(user_logs: Path, attempt: int) -> Path | None:
    """Attempt `attempt`'s logs out of the job folder's user_logs/ into `kept_logs(attempt)`, which
    is returned: the next attempt starts with an empty user_logs/. None when nothing is there:
    a link or a file the attempt's ranks left at its name is not followed but replaced
    (`keep_attempt_logs`), so the next attempt's logs are made in the job folder."""
    if not os.path.lexists(user_logs):
        return None
    return keep_attempt_logs(user_logs, attempt)


def keep_attempt(attempt: Attempt, user_logs: Path) -> None:
    """Before the next attempt starts: `attempt` is marked restarted, and its logs move aside
    (`keep_logs`), the record pointing at their new place (its root cause's log too).

    `user_logs` is the job folder's user_logs/. An OSError while moving the logs is raised with
    the attempt already marked restarted and its `logs` and root cause as they were.
    """
    attempt.restarted = True
    target = keep_logs(user_logs, attempt.attempt)
    if target is None:
        return
    attempt.logs = kept_logs(attempt.attempt)
    attempt.root_cause = moved_root_cause(attempt.root_cause, user_logs, target)


@dataclass(frozen=True)
class Decision:
    restart: bool
    reason: str  # restart: why ("rank 1 failed, restart 1 of 3"); else what ends it ("" when nothing to add)


def decide(policy: RestartPolicy, attempts: Sequence[Attempt]) -> Decision:
    """After the last of `attempts` ended: does the job run again?"""
    last = attempts[-1]
    if last.status == JobStatus.PREEMPTED:
        used = sum(1 for a in attempts if a.status == JobStatus.PREEMPTED)
        allowed = policy.preemptions_allowed
        if used <= allowed:
            of = "" if math.isinf(allowed) else f" of {int(allowed)}"
            return Decision(True, f"preempted: restart after preemption {used}{of}")
        return Decision(False, f"preempted {used} time(s); limits.max_preemptions is {int(allowed)}")
    if last.status != JobStatus.FAILED or policy.max_restarts == 0:
        return Decision(False, "")
    if last.root_cause is None:
        return Decision(False, "not restarted: no process of the job failed (a timeout or distrun's own error)")
    code = last.root_cause.get("exit_code")
    if code is not None and code in policy.no_restart_exit_codes:
        return Decision(False, f"not restarted: exit code {code} is in limits.no_restart_exit_codes")
    failures = sum(1 for a in attempts if a.status == JobStatus.FAILED)
    if failures <= policy.max_restarts:
        return Decision(True, f"failed: restart {failures} of {policy.max_restarts}")
    return Decision(False, f"after {failures} failed attempts (limits.max_restarts: {policy.max_restarts})")


def backoff_seconds(restart: int) -> float:
    """The pause before restart number `restart` (1 for the first)."""
    # The exponent is capped before the power: 2 ** 1024 is past what a float holds, and a job
    # with unlimited preemptions may well restart that often.
    doublings = min(max(restart - 1, 0), math.ceil(math.log2(BACKOFF_MAX_S / BACKOFF_FIRST_S)))
    return min(BACKOFF_FIRST_S * 2**doublings, BACKOFF_MAX_S) * backoff_scale()


def backoff_scale() -> float:
    """DISTRUN_RESTART_BACKOFF_SCALE as a factor in [0, 1]; 1 when unset or not a number."""
    try:
        scale = float(os.environ.get(BACKOFF_SCALE_VARIABLE, "1"))
    except ValueError:
        return 1.0
    return min(max(scale, 0.0), 1.0) if math.isfinite(scale) else 1.0
