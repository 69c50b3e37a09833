"""The restart decision (`distrun.restarts.policy.decide`), the pause between attempts and the attempts'
bookkeeping: no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.job_status import JobStatus
from distrun.restarts.policy import Attempt, RestartPolicy, backoff_seconds, decide, keep_attempt, kept_logs


def failed(attempt: int, code: int = 1) -> Attempt:
    return Attempt(attempt, JobStatus.FAILED, "rank 1 failed", {"exit_code": code, "name": "rank_1"})


def preempted(attempt: int) -> Attempt:
    return Attempt(attempt, JobStatus.PREEMPTED, "preempted (SIGTERM from outside)")


def test_failures_restart_up_to_max_restarts() -> None:
    policy = RestartPolicy(max_restarts=2)
    assert decide(policy, [failed(0)]).restart
    assert decide(policy, [failed(0), failed(1)]).restart
    last = decide(policy, [failed(0), failed(1), failed(2)])
    assert not last.restart and "limits.max_restarts: 2" in last.reason


def test_no_restarts_by_default() -> None:
    policy = RestartPolicy()
    assert not policy.on
    assert decide(policy, [failed(0)]) == decide(policy, [failed(0)])
    assert not decide(policy, [failed(0)]).restart
    assert not decide(policy, [preempted(0)]).restart


def test_a_no_restart_exit_code_is_final_at_once() -> None:
    policy = RestartPolicy(max_restarts=5, no_restart_exit_codes=frozenset({3}))
    decision = decide(policy, [failed(0, code=3)])
    assert not decision.restart and "exit code 3 is in limits.no_restart_exit_codes" in decision.reason
    assert decide(policy, [failed(0, code=4)]).restart


def test_preemptions_are_counted_apart_from_failures() -> None:
    policy = RestartPolicy(max_restarts=1)  # preemptions: unlimited
    history = [preempted(0), preempted(1), preempted(2), failed(3)]
    assert decide(policy, history[:3]).restart
    assert decide(policy, history).restart  # the first failure
    assert not decide(policy, [*history, failed(4)]).restart
    capped = RestartPolicy(max_restarts=1, max_preemptions=1)
    assert decide(capped, [preempted(0)]).restart
    assert not decide(capped, [preempted(0), preempted(1)]).restart
    only_preemptions = RestartPolicy(max_preemptions=2)
    assert only_preemptions.on and not decide(only_preemptions, [failed(0)]).restart


def test_completed_canceled_and_rootless_failures_are_not_restarted() -> None:
    policy = RestartPolicy(max_restarts=3)
    assert not decide(policy, [Attempt(0, JobStatus.COMPLETED, "")]).restart
    assert not decide(policy, [Attempt(0, JobStatus.CANCELED, "canceled (SIGINT)")]).restart
    assert not decide(policy, [Attempt(0, JobStatus.FAILED, "timeout after 5 s")]).restart


def test_backoff_is_short_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTRUN_RESTART_BACKOFF_SCALE", raising=False)
    assert [backoff_seconds(n) for n in (1, 2, 3, 4, 5, 9)] == [1, 2, 4, 8, 10, 10]


@pytest.mark.parametrize(("scale", "first"), [("0.1", 0.1), ("0", 0), ("7", 1), ("-1", 0), ("nan", 1), ("soon", 1)])
def test_the_test_suites_backoff_scale_only_shortens_the_pause(monkeypatch: pytest.MonkeyPatch, scale, first) -> None:
    monkeypatch.setenv("DISTRUN_RESTART_BACKOFF_SCALE", scale)
    assert backoff_seconds(1) == pytest.approx(first)
    assert backoff_seconds(9) == pytest.approx(10 * first)


def test_a_kept_attempt_points_at_its_moved_logs_and_reads_back_as_it_was(tmp_path: Path) -> None:
    user_logs = tmp_path / "user_logs"
    user_logs.mkdir()
    (user_logs / "std_log_process_01.txt").write_text("boom\n")
    attempt = failed(0)
    attempt.root_cause = {"exit_code": 1, "log": str(user_logs / "std_log_process_01.txt")}
    keep_attempt(attempt, user_logs)
    kept = user_logs / "attempt_0"
    assert attempt.restarted and attempt.logs == kept_logs(0) == "user_logs/attempt_0"
    assert attempt.root_cause["log"] == str(kept / "std_log_process_01.txt")
    assert (kept / "std_log_process_01.txt").read_text() == "boom\n"
    assert not any(entry.is_file() for entry in user_logs.iterdir())
    assert Attempt.from_dict(attempt.to_dict()) == attempt
    # Nothing was logged (no user_logs/): the attempt is still marked, its logs where they would be.
    other = failed(1)
    keep_attempt(other, tmp_path / "elsewhere" / "user_logs")
    assert other.restarted and other.logs == "user_logs"
