"""The restart loop, written once over an engine's hooks, as torch elastic's agent writes its own.

An engine says what an attempt is and how it is started and followed (`AttemptHooks`), and what
is done with one that ended (`Bookkeeping`); the loop does the rest, the same on every engine:
after each attempt, the policy's decision (`distrun.restarts.policy.decide`) as the engine may
overrule it, the ended attempt set aside and written down before a restart, the pause
(`backoff_seconds`), and the reason that ends the job put on its last attempt.

    AttemptLoop.run  attempt 0, then as many restarts as the policy allows, in one process: the
                     engine's `start` runs an attempt until every process of it has ended (local)
    end_attempt      the loop's body after an attempt ended, for an engine whose attempts
                     something else starts: Slurm's batch script runs srun, and asks in a new
                     process after each attempt (`distrun.backends.slurm.attempts`)
    conclude         the decision alone, for an engine that restarts by itself and is followed:
                     Kubernetes' JobSet (`distrun.backends.kubernetes.attempts`)

Pure but for what the hooks do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from distrun.core.job_status import JobStatus
from distrun.restarts.policy import Attempt, Decision, RestartPolicy, backoff_seconds, decide

Result = TypeVar("Result")
Overrule = Callable[[Attempt, Decision], Decision]


@dataclass(frozen=True)
class Next:
    """What follows an attempt that ended."""

    restart: bool
    reason: str  # the decision's: why it restarts ("failed: restart 1 of 3"), or what ends the job ("" for nothing)
    pause: float = 0.0  # seconds before the next attempt starts
    after_preemption: bool = False  # the attempt was preempted (its allocation may be going away)


class Bookkeeping(Protocol):
    """What one engine does after an attempt ended: whether it knows better than the policy, how the
    attempt is set aside and where the attempts are written down."""

    def overrule(self, attempt: Attempt, decision: Decision) -> Decision:
        """The policy's decision after `attempt`, or what this engine knows better (a cancel, a deadline)."""
        ...

    def set_aside(self, attempt: Attempt) -> None:
        """Before the next attempt starts: the ended one's logs (and this engine's files of it) out of
        the way; `distrun.restarts.policy.keep_attempt` marks it restarted and moves its logs."""
        ...

    def note(self, attempts: Sequence[Attempt]) -> None:
        """Write down every attempt so far, before the next one starts (the record, the engine's own file)."""
        ...


class AttemptHooks(Bookkeeping, Protocol[Result]):
    """All one engine does for the loop: what an attempt is, how it is started, followed and set aside."""

    def start(self, number: int) -> Result:
        """Start attempt `number` (0 for the first) and follow it until every process of it has ended.

        Stopping is the attempt's own, not a step of the loop (torch elastic's `_stop_workers`): the
        first failure, a stop signal or the timeout stops every other process with the grace period
        before `start` returns, so an attempt that ended has nothing left running."""
        ...

    def ended(self, number: int, result: Result) -> Attempt:
        """How attempt `number` ended (`result`: what `start` returned), as the record lists it."""
        ...

    def between(self, number: int, follows: Next) -> None:
        """After attempt `number` ended and before the next starts: say so, and pause `follows.pause`."""
        ...


def conclude(policy: RestartPolicy, attempts: Sequence[Attempt], overrule: Overrule | None = None) -> Decision:
    """After the last of `attempts` ended: does the job run again? The policy decides (`decide`),
    `overrule` may say otherwise; when the job ends, the last attempt's reason says why."""
    last = attempts[-1]
    decision = decide(policy, attempts)
    if overrule is not None:
        decision = overrule(last, decision)
    if not decision.restart and decision.reason:
        last.reason = f"{last.reason}; {decision.reason}" if last.reason else decision.reason
    return decision


class AttemptLoop(Generic[Result]):
    """One job's attempts under its restart policy, over one engine's hooks."""

    def __init__(self, policy: RestartPolicy, hooks: AttemptHooks[Result], attempts: Sequence[Attempt] = ()) -> None:
        self.policy = policy
        self.hooks = hooks
        self.attempts = list(attempts)  # those that ended before this loop took over (read back), then its own

    def run(self) -> Result:
        """Attempt after attempt until one is not restarted; what `start` returned for the last.

        A job without restarts runs once, and lists no attempts (`self.attempts` stays empty)."""
        while True:
            number = len(self.attempts)
            result = self.hooks.start(number)
            attempt = self.hooks.ended(number, result)
            if not self.policy.on:
                return result
            follows = self.end(attempt)
            if not follows.restart:
                return result
            self.hooks.between(number, follows)

    def end(self, attempt: Attempt) -> Next:
        """`attempt` ended (one `start` followed, or one read back when taking over): what follows."""
        return end_attempt(self.policy, self.attempts, attempt, self.hooks)


def end_attempt(policy: RestartPolicy, attempts: list[Attempt], attempt: Attempt, book: Bookkeeping) -> Next:
    """The loop's body after `attempt` ended (appended to `attempts`, every one so far): decide;
    before a restart, set it aside and note every attempt so far.

    When the job ends here, nothing is noted: the engine writes the job's end its own way.
    """
    attempts.append(attempt)
    decision = conclude(policy, attempts, book.overrule)
    if not decision.restart:
        return Next(False, decision.reason)
    book.set_aside(attempt)
    book.note(attempts)
    pause = backoff_seconds(len(attempts))  # restart number k follows the k attempts so far
    return Next(True, decision.reason, pause, after_preemption=attempt.status == JobStatus.PREEMPTED)
