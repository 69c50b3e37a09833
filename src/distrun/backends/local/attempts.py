"""Local compute's hooks of the restart loop (`distrun.restarts.loop`): an attempt is one gang of
every simulated node, run to its end in the supervising process.

Between attempts every rank of the last one has ended (the gang returned), its logs move to
user_logs/attempt_<k>/, and ./outputs stays as it is, so checkpoints carry over. limits.timeout
is for the whole job: attempt 0 gets all of it, later ones what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO

from distrun.agent.containers import ContainerRun
from distrun.agent.gang import run_gang
from distrun.agent.outcome import GangResult
from distrun.agent.terminal_output import say
from distrun.backends.supervised import cancel_marker
from distrun.metrics.history import metric_clock
from distrun.metrics.rank_token import read_token, with_token
from distrun.plan.model import LaunchPlan
from distrun.prepare.submission import PreparedJob
from distrun.restarts.loop import Next
from distrun.restarts.policy import Attempt, Decision, RestartPolicy, keep_attempt
from distrun.store.index import JobIndex
from distrun.store.layout import JobFolder


class LocalAttempts:
    """The hooks: each attempt's plan (fresh ports), its gang, its record, the pause after it."""

    def __init__(
        self,
        prepared: PreparedJob,
        index: JobIndex,
        first_plan: LaunchPlan,
        replan: Callable[[int], LaunchPlan],  # the plan of attempt k > 0, written as the job's plan
        *,
        stream: BinaryIO | None,
        color: bool,
        stop_signals: list[int],
        container: ContainerRun | None,
        launch_id: str,
        on_started: Callable[[object], None],
    ) -> None:
        self.prepared = prepared
        self.index = index
        self.first_plan = first_plan
        self.replan = replan
        self.stream = stream
        self.color = color
        self.stop_signals = stop_signals
        self.container = container
        self.launch_id = launch_id
        self.on_started = on_started
        self.policy = RestartPolicy.of(prepared.spec.limits)
        timeout = prepared.spec.limits.timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.preempted_by = _preemption_test(self.policy, prepared.folder)
        self.started_at = 0.0

    def start(self, number: int) -> GangResult:
        limits = self.prepared.spec.limits
        plan = self.replan(number) if number else self.first_plan
        self.started_at = time.time()
        return run_gang(
            plan,
            [node.node_rank for node in plan.nodes],
            self.prepared.folder.user_logs,
            stream=self.stream,
            color=self.color,
            grace_period=limits.grace_seconds,
            timeout=self._time_left(number),
            on_started=self.on_started if number == 0 else None,
            launch_id=self.launch_id,
            signals=self.stop_signals,
            preempted_by=self.preempted_by,
            hang_timeout=limits.hang_timeout,
            last_metric=metric_clock(self.prepared.folder) if limits.hang_timeout else None,
            container=self.container,
            # The ranks' MLflow token is in no file others read (the plan is one): given here, in memory.
            base_env=with_token(os.environ, read_token(self.prepared.folder.root)),
        )

    def ended(self, number: int, result: GangResult) -> Attempt:
        timeout = self.prepared.spec.limits.timeout
        timed_out = result.root_cause is None and result.reason.startswith("timeout after")
        if number and self.deadline is not None and timed_out:
            result.reason = f"timeout after {timeout:g} s (limits.timeout counts every attempt)"
        return Attempt(number, result.status, result.reason, result.root_cause, self.started_at, time.time())

    def overrule(self, attempt: Attempt, decision: Decision) -> Decision:
        if decision.restart and self.deadline is not None and time.monotonic() >= self.deadline:
            return Decision(False, "not restarted: limits.timeout is reached")
        return decision

    def set_aside(self, attempt: Attempt) -> None:
        with contextlib.suppress(OSError):  # the logs stay in user_logs/ and the next attempt appends to them
            keep_attempt(attempt, self.prepared.folder.user_logs)

    def note(self, attempts: Sequence[Attempt]) -> None:
        self.index.update(self.prepared.name, attempts=[a.to_dict() for a in attempts])

    def between(self, number: int, follows: Next) -> None:
        if self.stream is not None:
            said = f"attempt {number} {follows.reason}: attempt {number + 1} starts in {follows.pause:g} s"
            say(self.stream, f"distrun: {said}")
        _pause(follows.pause, self.stop_signals)

    def _time_left(self, number: int) -> float | None:
        timeout = self.prepared.spec.limits.timeout
        if timeout is None or self.deadline is None or number == 0:
            return timeout
        return max(self.deadline - time.monotonic(), 0.001)


def _pause(seconds: float, stop_signals: list[int]) -> None:
    """Wait before a restart; a stop signal ends the wait (the next gang acts on it before starting)."""
    give_up = time.monotonic() + seconds
    while not stop_signals and time.monotonic() < give_up:
        time.sleep(0.05)


def _preemption_test(policy: RestartPolicy, folder: JobFolder) -> Callable[[int], bool] | None:
    """A SIGTERM without `job cancel`'s marker preempts a job that has restarts; without, it cancels as always."""
    if not policy.on:
        return None
    marker = cancel_marker(folder)
    return lambda signum: signum == signal.SIGTERM and not marker.exists()
