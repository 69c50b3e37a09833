"""The restart loop written once (`distrun.restarts.loop`), over an engine made of plain data: each
attempt's outcome is given in advance, and every hook call is written down. No processes; local
compute, Slurm and Kubernetes run it for real in tests/engines/*/ (their restart tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from distrun.core.job_status import JobStatus
from distrun.restarts.loop import AttemptLoop, Next, conclude, end_attempt
from distrun.restarts.policy import Attempt, Decision, RestartPolicy, backoff_seconds

FAILED = (JobStatus.FAILED, "rank 1 exited with code 3", {"exit_code": 3, "name": "rank_1"})
PREEMPTED = (JobStatus.PREEMPTED, "preempted (SIGTERM from outside)", None)
COMPLETED = (JobStatus.COMPLETED, "all processes completed", None)


@dataclass
class ScriptedEngine:
    """Hooks whose attempts end as `outcomes` says, one after the other; `calls` is what the loop asked."""

    outcomes: list[tuple[JobStatus, str, dict | None]]
    veto_after: int | None = None  # from this attempt on, the engine knows better: no restart
    calls: list[str] = field(default_factory=list)
    noted: list[list[dict]] = field(default_factory=list)

    def start(self, number: int) -> tuple[JobStatus, str, dict | None]:
        self.calls.append(f"start {number}")
        return self.outcomes[number]

    def ended(self, number: int, result: tuple[JobStatus, str, dict | None]) -> Attempt:
        status, reason, root = result
        return Attempt(number, status, reason, root, started_at=float(number), ended_at=number + 0.5)

    def overrule(self, attempt: Attempt, decision: Decision) -> Decision:
        if self.veto_after is not None and attempt.attempt >= self.veto_after and decision.restart:
            return Decision(False, "not restarted: the engine's deadline is reached")
        return decision

    def set_aside(self, attempt: Attempt) -> None:
        self.calls.append(f"set aside {attempt.attempt}")
        attempt.restarted = True

    def note(self, attempts: Sequence[Attempt]) -> None:
        self.calls.append(f"note {len(attempts)}")
        self.noted.append([a.to_dict() for a in attempts])

    def between(self, number: int, follows: Next) -> None:
        self.calls.append(f"pause {follows.pause:g} after {number}: {follows.reason}")


def test_a_failure_restarts_and_the_job_ends_with_the_attempt_that_completes() -> None:
    engine = ScriptedEngine([FAILED, COMPLETED])
    loop = AttemptLoop(RestartPolicy(max_restarts=2), engine)
    assert loop.run() == COMPLETED
    assert engine.calls == [
        "start 0",
        "set aside 0",
        "note 1",
        f"pause {backoff_seconds(1):g} after 0: failed: restart 1 of 2",
        "start 1",
    ]
    assert [(a.attempt, a.status, a.restarted) for a in loop.attempts] == [
        (0, JobStatus.FAILED, True),
        (1, JobStatus.COMPLETED, False),
    ]
    assert engine.noted == [[loop.attempts[0].to_dict()]]


def test_a_job_without_restarts_runs_once_and_lists_no_attempts() -> None:
    engine = ScriptedEngine([FAILED, COMPLETED])
    loop = AttemptLoop(RestartPolicy(), engine)
    assert loop.run() == FAILED
    assert engine.calls == ["start 0"]
    assert loop.attempts == []


def test_the_reason_that_ends_the_job_is_on_its_last_attempt_and_nothing_more_is_noted() -> None:
    engine = ScriptedEngine([FAILED, FAILED, FAILED])
    loop = AttemptLoop(RestartPolicy(max_restarts=1), engine)
    loop.run()
    assert engine.calls[-1] == "start 1"  # no set aside, note or pause after the last
    assert loop.attempts[-1].reason == "rank 1 exited with code 3; after 2 failed attempts (limits.max_restarts: 1)"
    assert loop.attempts[0].reason == "rank 1 exited with code 3"  # a restarted attempt keeps its own


def test_the_engine_may_overrule_a_restart() -> None:
    engine = ScriptedEngine([PREEMPTED, FAILED, COMPLETED], veto_after=1)
    loop = AttemptLoop(RestartPolicy(max_restarts=3), engine)
    assert loop.run() == FAILED
    assert loop.attempts[-1].reason == "rank 1 exited with code 3; not restarted: the engine's deadline is reached"
    assert [c for c in engine.calls if c.startswith("start")] == ["start 0", "start 1"]


def test_pauses_grow_with_every_restart_and_say_whether_a_preemption_came_before() -> None:
    engine = ScriptedEngine([FAILED, PREEMPTED, FAILED, COMPLETED])
    policy = RestartPolicy(max_restarts=5)
    attempts: list[Attempt] = []
    seen = [
        end_attempt(policy, attempts, engine.ended(k, engine.outcomes[k]), engine) for k in range(len(engine.outcomes))
    ]
    assert [(n.restart, n.after_preemption) for n in seen] == [
        (True, False),
        (True, True),
        (True, False),
        (False, False),
    ]
    assert [n.pause for n in seen[:3]] == [backoff_seconds(1), backoff_seconds(2), backoff_seconds(3)]
    assert seen[1].reason == "preempted: restart after preemption 1"
    assert [a.attempt for a in attempts] == [0, 1, 2, 3]


def test_a_loop_taken_over_goes_on_counting_from_the_attempts_read_back() -> None:
    engine = ScriptedEngine([FAILED, FAILED, COMPLETED])
    earlier = [Attempt(0, *FAILED, restarted=True)]
    loop = AttemptLoop(RestartPolicy(max_restarts=1), engine, earlier)
    follows = loop.end(engine.ended(1, FAILED))
    assert not follows.restart and follows.reason == "after 2 failed attempts (limits.max_restarts: 1)"


@pytest.mark.parametrize(
    ("outcome", "restart", "reason"),
    [
        (COMPLETED, False, "all processes completed"),
        (FAILED, True, "rank 1 exited with code 3"),  # restarted: nothing added
        ((JobStatus.FAILED, "", {"exit_code": 3}), True, ""),
    ],
)
def test_conclude_adds_a_reason_only_when_the_job_ends(outcome, restart, reason) -> None:
    attempt = Attempt(0, *outcome)
    assert conclude(RestartPolicy(max_restarts=1), [attempt]).restart is restart
    assert attempt.reason == reason


def test_conclude_with_an_overrule_that_ends_the_job_keeps_the_policys_reason() -> None:
    attempt = Attempt(0, *FAILED)
    decision = conclude(RestartPolicy(max_restarts=1), [attempt], lambda _a, d: Decision(False, d.reason))
    assert not decision.restart
    assert attempt.reason == "rank 1 exited with code 3; failed: restart 1 of 1"
