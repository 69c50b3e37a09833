"""Restarts on Kubernetes: the JobSet controller restarts the job, distrun follows its attempts. Pure.

With limits.max_restarts, the JobSet's `failurePolicy.maxRestarts` lets JobSet restart the whole
set after a failed Job: it deletes every Job, counts the restart in `status.restarts`, and
creates the Jobs again, their pods labelled `jobset.sigs.k8s.io/restart-attempt` with that
count. distrun groups pods and their agents' outcomes by that label: the current attempt (the
highest) decides the job's state, each earlier one becomes an entry of the record's `attempts`
with its root cause. distrun keeps the same rules as on every compute (`distrun.restarts.policy.decide`):
when an attempt must not be restarted (its root cause's exit code is in
limits.no_restart_exit_codes) but JobSet may restart it (a peer's Job failed first), it stops
the job itself; otherwise JobSet decides what follows a failure, and distrun records it.
Indexed Jobs cannot restart a whole job, and JobSet has no separate limit for preemptions:
`check_restarts` refuses what Kubernetes cannot honour before anything is submitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from distrun.backends.kubernetes.pods import PodLayout
from distrun.backends.kubernetes.state import PodOutcome, PodView, job_state
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobState, JobStatus
from distrun.restarts.loop import conclude
from distrun.restarts.policy import Attempt, Decision, RestartPolicy, kept_logs
from distrun.spec.models import JobSpec


def check_restarts(target_name: str, job: JobSpec, jobset: bool) -> None:
    """Restarts are JobSet's: refuse what Kubernetes cannot honour, before anything is submitted."""
    limits = job.limits
    if not RestartPolicy.of(limits).on:
        return
    if limits.max_preemptions is not None:
        raise DistrunError(
            f"compute target {target_name!r} (Kubernetes) cannot honour limits.max_preemptions: JobSet restarts "
            "a job for evicted or preempted pods without limit (or counts them against maxRestarts), never "
            "up to a separate limit",
            "remove limits.max_preemptions (preemptions are then unlimited, not counted against "
            "limits.max_restarts), or raise limits.max_restarts",
        )
    if not jobset:
        raise DistrunError(
            f"compute target {target_name!r} runs jobs as Indexed Jobs (no JobSet CRD, or jobset: never), which "
            "cannot restart a whole job: limits.max_restarts needs JobSet",
            "install JobSet in the cluster (https://jobset.sigs.k8s.io) and set jobset: auto or always, "
            "or remove limits.max_restarts (or --max-restarts) to run the job once",
        )


def preemption_restarts(jobset: Mapping[str, Any] | None) -> int | None:
    """How many of the JobSet's restarts were for disrupted pods (the `preempted` rule's action,
    RestartJobSetAndIgnoreMaxRestarts, does not count towards maxRestarts); None without a JobSet."""
    if jobset is None:
        return None
    status = jobset.get("status") or {}
    return int(status.get("restarts") or 0) - int(status.get("restartsCountTowardsMax") or 0)


def current_attempt(jobset: Mapping[str, Any] | None, views: Sequence[PodView]) -> int:
    """The JobSet's restart count, or a higher pod label (seen before the JobSet's status)."""
    restarts = ((jobset or {}).get("status") or {}).get("restarts") or 0
    return max([int(restarts), *(v.attempt for v in views)])


def of_attempt(outcomes: Mapping[str, PodOutcome], attempt: int) -> dict[str, PodOutcome]:
    return {pod: o for pod, o in outcomes.items() if o.attempt == attempt}


def _times(outcomes: Mapping[str, PodOutcome]) -> tuple[float | None, float | None]:
    # An outcome kept without its times reads them back as 0: not a time.
    starts = [float(o.started_at) for o in outcomes.values() if o.started_at]
    ends = [float(o.ended_at) for o in outcomes.values() if o.ended_at]
    return (min(starts) if starts else None, max(ends) if ends else None)


def ended_attempt(layout: PodLayout, attempt: int, outcomes: Mapping[str, PodOutcome]) -> Attempt:
    """An attempt JobSet restarted: Failed, with its root cause from its pods' outcomes; or
    Preempted when no rank failed and a pod's agent was stopped from outside (its pod evicted,
    preempted or deleted: Kubernetes sends SIGTERM, the agent stops its ranks and reports)."""
    state = job_state(layout, [], outcomes)
    root = state.root_cause if state.status == JobStatus.FAILED else None
    status, reason = JobStatus.FAILED, state.reason
    if root is None and any(o.status == JobStatus.CANCELED for o in outcomes.values()):
        status, reason = JobStatus.PREEMPTED, "preempted: a pod was stopped from outside (evicted or deleted)"
    elif root is None:
        reason = "a pod of this attempt failed (no report of it came back)"
    started, ended = _times(outcomes)
    return Attempt(attempt, status, reason, root, started, ended, kept_logs(attempt), restarted=True)


def _preempted_without_report(ended: list[Attempt], preemptions: int) -> None:
    """Attempts whose pods went before any report was read are Preempted as far as JobSet counted
    restarts for disrupted pods that no report explains."""
    left = preemptions - sum(1 for a in ended if a.status == JobStatus.PREEMPTED)
    for attempt in ended:
        if left <= 0:
            return
        if attempt.status == JobStatus.FAILED and attempt.root_cause is None:
            attempt.status = JobStatus.PREEMPTED
            attempt.reason = "preempted: JobSet restarted it for a disrupted (evicted or preempted) pod"
            left -= 1


def _no_restart_code(policy: RestartPolicy, attempt: Attempt) -> int | None:
    code = (attempt.root_cause or {}).get("exit_code")
    return code if code is not None and code in policy.no_restart_exit_codes else None


def _ends_here(attempt: Attempt, decision: Decision) -> Decision:
    """The restart loop's overrule where JobSet restarts no more: the job ends, with the policy's reason."""
    return Decision(False, decision.reason)


def with_restarts(
    state: JobState,
    layout: PodLayout,
    policy: RestartPolicy,
    outcomes: Mapping[str, PodOutcome],  # every attempt's
    current: int,
    *,
    jobset_active: bool,  # the JobSet exists and has not ended: it may still restart the job
    live: bool,  # some pod of the job still runs
    preemptions: int = 0,  # the JobSet's restarts for disrupted pods (`preemption_restarts`)
) -> tuple[JobState, list[Attempt]]:
    """The job's state and its attempts, given `state`, the current attempt's own state."""
    ended = [ended_attempt(layout, k, of_attempt(outcomes, k)) for k in range(current)]
    _preempted_without_report(ended, preemptions)
    for attempt in ended:
        code = _no_restart_code(policy, attempt)
        if code is not None:  # JobSet restarted it (a peer's Job failed first): distrun ends it here
            reason = f"{attempt.reason}; not restarted: exit code {code} is in limits.no_restart_exit_codes"
            stop = live or jobset_active
            final = JobState(JobStatus.FAILED, reason, attempt.root_cause, stop_the_rest=stop)
            return final, ended[: attempt.attempt] + [replace(attempt, restarted=False)]
    started, ended_at = _times(of_attempt(outcomes, current))
    this = Attempt(current, state.status, state.reason, state.root_cause, started, ended_at)
    if state.status == JobStatus.FAILED:
        if jobset_active and _no_restart_code(policy, this) is None:
            # JobSet restarts it, or fails the set once its restarts are used (it counts them, a
            # restart for a disrupted pod excepted): distrun follows.
            decision = conclude(policy, [*ended, replace(this)])
            then = f"{decision.reason}: JobSet runs it again" if decision.restart else "JobSet decides what follows"
            reason = f"attempt {current} failed ({state.reason}); {then}"
            return JobState(JobStatus.RUNNING, reason, processes=state.processes), ended
        # The job ends here, whatever the policy would say: JobSet has ended, or the exit code must
        # not be restarted while the JobSet may restart (a peer's Job failed first, or a code no
        # container can exit with), and distrun stops the job itself.
        conclude(policy, [*ended, this], _ends_here)
        stop = state.stop_the_rest or jobset_active
        final = replace(state, reason=this.reason, stop_the_rest=stop)
        return final, [*ended, this]
    if state.terminal or state.status in (JobStatus.COMPLETED, JobStatus.CANCELED):
        return state, [*ended, this]
    if current:
        state = replace(state, reason=f"attempt {current}" + (f": {state.reason}" if state.reason else ""))
    return state, ended
