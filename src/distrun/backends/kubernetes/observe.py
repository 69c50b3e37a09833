"""One look at a Kubernetes job: its pods, their logs and outcomes -> distrun's state (`observe_job`).

The logs land in the job folder on the way (`collect`), and an outcome read once is kept
there: pods are removed when their job ends, their reports must not go with them. Each pod
carries distrun's report finalizer, taken off here once its ended pod's log has been read, so a
pod deleted before that (a JobSet restart, a cancel) waits for this look. With
restarts (JobSet only), pods are told apart by their JobSet restart (`attempts`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.kubernetes.attempts import current_attempt, of_attempt, preemption_restarts, with_restarts
from distrun.backends.kubernetes.client import KubernetesClient
from distrun.backends.kubernetes.collect import collect_pod_log, collecting, keep_outcome, label_files, read_outcomes
from distrun.backends.kubernetes.job_files import (
    K8sPaths,
    kept_preemptions,
    planned_processes,
    show_attempt,
    shown_attempt,
)
from distrun.backends.kubernetes.manifests import JOB_LABEL, REPORT_FINALIZER
from distrun.backends.kubernetes.pods import PodLayout
from distrun.backends.kubernetes.state import (
    PodOutcome,
    job_state,
    pod_view,
    termination_outcome,
    unstarted_outcome,
)
from distrun.core.job_status import JobState, JobStatus
from distrun.restarts.attempt_logs import attempt_folder
from distrun.restarts.policy import Attempt, RestartPolicy, keep_logs
from distrun.store.layout import JobFolder


@dataclass(frozen=True)
class Seen:
    """What one look at the cluster found: the job's state, the outcomes of its current attempt,
    and (with restarts) every attempt so far."""

    state: JobState
    outcomes: dict[str, PodOutcome]
    attempts: list[Attempt] | None = None


def observe_job(
    client: KubernetesClient, folder: JobFolder, layout: PodLayout, policy: RestartPolicy | None = None
) -> Seen:
    """Pods, their logs and outcomes -> distrun's state; the logs land in the job folder on the way.

    An outcome read once (a pod's final log record, else its termination message) is kept in
    the job folder. With restarts (`policy`, JobSet only), the latest attempt's logs are in
    user_logs/, earlier ones' in user_logs/attempt_<k>/.
    """
    paths = K8sPaths(folder.root)
    pods = client.list("Pod", {JOB_LABEL: layout.object_name})
    labels = label_files(folder)
    views = [pod_view(p) for p in pods]
    restarts = policy is not None and policy.on and layout.jobset
    top = client.get("JobSet", layout.object_name) if restarts else None
    current = max(current_attempt(top, views), shown_attempt(paths)) if restarts else 0
    planned = planned_processes(folder)
    ending = paths.stopping.exists() or paths.cancel.exists()  # distrun is stopping the whole job
    with collecting(paths):
        if restarts:
            _next_attempt_logs(folder, paths, current)
        for pod, view in zip(pods, views, strict=True):
            # MPI's worker pods only start mpirun's daemons: their ranks' output is in the launcher's log.
            serves = any(r.serves_remote_starts and r.name == view.role for r in layout.roles)
            if not serves and not (view.phase == "Pending" and not view.deleting):
                logs = folder.user_logs if view.attempt >= current else attempt_folder(folder.user_logs, view.attempt)
                collect_pod_log(folder, paths, view.name, client.pod_log(view.name), labels, logs, view.attempt)
                from_status = termination_outcome(view)
                if from_status is None and ending:
                    from_status = unstarted_outcome(layout, view, planned, str(folder.user_logs), time.time())
                if from_status is not None and not (paths.outcomes / f"{view.name}.json").exists():
                    keep_outcome(paths, view.name, from_status, view.attempt)
            if view.held and view.ended:
                # Its whole log was read above (it had ended before the log was asked for) and its
                # report kept: the pod may go now.
                client.remove_finalizer(pod, REPORT_FINALIZER)
        outcomes = read_outcomes(paths)
    mine = of_attempt(outcomes, current)
    engine_failed = engine_failure(client, layout)
    state = job_state(
        layout,
        [v for v in views if v.attempt == current],
        mine,
        planned=planned,
        engine_failed=engine_failed,
        canceled=paths.cancel.exists(),
    )
    if not restarts or policy is None:
        return Seen(state, mine)
    active = top is not None and not engine_failed and not has_condition(top, "Completed")
    live = any(v.phase in ("Pending", "Running") for v in views)
    preemptions = kept_preemptions(paths, preemption_restarts(top))
    state, attempts = with_restarts(
        state, layout, policy, outcomes, current, jobset_active=active, live=live, preemptions=preemptions
    )
    return Seen(state, mine, attempts)


def _next_attempt_logs(folder: JobFolder, paths: K8sPaths, current: int) -> None:
    """JobSet restarted the job: the ended attempt's logs move to user_logs/attempt_<k>/ (under `collecting`)."""
    shown = shown_attempt(paths)
    if current <= shown:
        return
    keep_logs(folder.user_logs, shown)
    show_attempt(paths, current)


def engine_failure(client: KubernetesClient, layout: PodLayout) -> str:
    """The message of a Failed condition on the JobSet or one of the Jobs, if any."""
    if layout.jobset:
        tops = [client.get("JobSet", layout.object_name) or {}]
    else:
        tops = client.list("Job", {JOB_LABEL: layout.object_name})
    for top in tops:
        for cond in (top.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                return (
                    f"{top.get('kind', 'Job')} {top['metadata']['name']}: {cond.get('message') or cond.get('reason')}"
                )
    return ""


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def node_outcomes(state: JobState, outcomes: Mapping[str, PodOutcome]) -> tuple[NodeOutcome, ...]:
    """The record's node outcomes: the pods' reports, and one for the helpers stopped unreported."""
    out: list[NodeOutcome] = list(outcomes.values())
    known = {p.get("name") for o in out for p in o.processes}
    stopped = [p for p in state.processes if p.get("name") not in known]
    if stopped:  # helpers whose pods were removed before their last report came back
        now = time.time()
        out.append(
            NodeOutcome(-1, "", JobStatus.CANCELED, "stopped when the training completed", now, now, processes=stopped)
        )
    return tuple(out)
