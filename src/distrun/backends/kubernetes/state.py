"""Pods and the objects above them -> distrun's status, root cause and processes. Pure.

Pods come as plain dicts, as the API returns them. Outcomes come from each pod's distrun node
agent (its final log record, else its termination message), kept in the job folder as
`PodOutcome`s; a pod that failed without one (killed for memory, its image never ran) is
reported from its container status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.cluster import merged_processes
from distrun.backends.kubernetes.manifests import CONTAINER, REPORT_FINALIZER, RESTART_ATTEMPT_LABEL, ROLE_LABEL
from distrun.backends.kubernetes.pods import PodLayout
from distrun.core.job_status import JobState, JobStatus

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# Waiting reasons that will not clear by themselves: the job fails with them.
FATAL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"})
ATTEMPT_KEY = "attempt"  # stamped on each kept outcome: the attempt of the pod that reported it


@dataclass(frozen=True)
class PodView:
    name: str
    role: str
    index: int
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    node_name: str
    exit_code: int | None = None
    terminated_reason: str = ""  # OOMKilled, Error, ...
    message: str = ""  # termination message
    waiting_reason: str = ""
    unschedulable: str = ""  # the scheduler's message while it cannot place the pod
    deleting: bool = False
    attempt: int = 0  # the JobSet restart it belongs to (0: the first run, or no JobSet)
    held: bool = False  # it still carries distrun's report finalizer

    @property
    def ended(self) -> bool:
        """Its container will run no more: it exited, or it was deleted before it started."""
        return self.phase in ("Succeeded", "Failed") or (self.deleting and self.phase == "Pending")


def pod_view(pod: Mapping[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = meta.get("labels") or {}
    index = str((meta.get("annotations") or {}).get(COMPLETION_INDEX, "0"))
    unschedulable = ""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unschedulable = f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or ''}".rstrip(": ")
    exit_code, reason, message, waiting = None, "", "", ""
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != CONTAINER:
            continue
        state = cs.get("state") or {}
        if state.get("terminated"):
            term = state["terminated"]
            exit_code = term.get("exitCode")
            reason, message = term.get("reason") or "", term.get("message") or ""
        elif state.get("waiting"):
            waiting = state["waiting"].get("reason") or ""
    return PodView(
        name=meta.get("name", ""),
        role=labels.get(ROLE_LABEL, ""),
        index=int(index) if index.isdigit() else 0,
        phase=status.get("phase") or "Pending",
        node_name=spec.get("nodeName") or "",
        exit_code=exit_code,
        terminated_reason=reason,
        message=message,
        waiting_reason=waiting,
        unschedulable=unschedulable,
        deleting=bool(meta.get("deletionTimestamp")),
        held=REPORT_FINALIZER in (meta.get("finalizers") or []),
        attempt=int(attempt) if (attempt := str(labels.get(RESTART_ATTEMPT_LABEL, "0"))).isdigit() else 0,
    )


def termination_outcome(view: PodView) -> dict[str, Any] | None:
    try:
        data = json.loads(view.message)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "status" in data else None


@dataclass(frozen=True)
class PodOutcome(NodeOutcome):
    """A pod agent's `NodeOutcome`, as the job folder keeps it (k8s/outcomes/<pod>.json).

    The pod adds what its agent cannot know: the Kubernetes node it ran on (`node`) and the
    JobSet restart it belonged to (`attempt`, stamped when the outcome was kept).
    """

    node: str = ""
    attempt: int = 0

    @classmethod
    def kept(cls, data: Mapping[str, Any]) -> PodOutcome:
        """A kept outcome read back, as the agent reported it: without a node rank it reads -1 (not
        known), without an attempt (kept before restarts were followed) 0."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a pod outcome is a JSON object, not {type(data).__name__}")
        outcome = cls.from_dict({"node_rank": -1, **data})
        return replace(outcome, node=str(data.get("node") or ""), attempt=int(data.get(ATTEMPT_KEY) or 0))


SIGTERM_EXIT = 143  # a container's exit code when SIGTERM ended it (128 + 15)


def unstarted_outcome(
    layout: PodLayout, view: PodView, planned: Sequence[Mapping[str, Any]], user_logs: str, now: float
) -> dict[str, Any] | None:
    """The outcome of a pod distrun deleted before its agent could start a process; None for any other.

    Such a pod never reports: it was deleted while Pending, or SIGTERM ended its agent before
    the agent held the stop signals (from then on it reports whatever it ran). Its node's planned
    processes are listed as never started, so the job's record names every planned process.
    Only for a pod stopped because its job is ending (the caller knows): a pod evicted on its
    own stays a pod failure.
    """
    if not (view.deleting and view.ended):
        return None
    pending = view.phase == "Pending" and view.waiting_reason not in FATAL_WAITING
    if not (pending or (view.phase == "Failed" and view.exit_code == SIGTERM_EXIT)):
        return None
    role = next((r for r in layout.roles if r.name == view.role), None)
    if role is None or role.serves_remote_starts:
        return None  # MPI's worker pods: mpirun on the launcher starts (and reports) their ranks
    node_rank = role.first_node + view.index
    mine = [p for p in planned if role.name == "launcher" or p.get("node_rank") == node_rank]
    keys = ("name", "role", "index", "rank", "node_rank", "label")
    address = "" if role.name == "launcher" else layout.dns_name(role.name, view.index)
    processes = [
        {
            **{k: proc.get(k) for k in keys},
            "host": view.node_name,
            "address": address,
            "log": f"{user_logs}/{proc.get('log_name')}",
            "pid": None,
            "exit_code": None,
            "signal": None,
            "stopped_by_distrun": True,
            "never_started": True,
            "pod": view.name,
        }
        for proc in mine
    ]
    before = "its container started" if pending else "its agent started"
    return {
        "node_rank": node_rank,
        "node_name": view.name,
        "engine_job_id": view.name,
        "address": address,
        "status": JobStatus.CANCELED.value,
        "reason": f"pod {view.name} was stopped before {before}",
        "started_at": now,
        "ended_at": now,
        "processes": processes,
    }


def _pod_failure(view: PodView) -> dict[str, Any]:
    if view.terminated_reason == "OOMKilled":
        why = "killed for exceeding its memory limit (OOMKilled)"
    elif view.waiting_reason:
        why = f"could not start its container ({view.waiting_reason})"
    else:
        why = f"exited with code {view.exit_code}" + (f" ({view.terminated_reason})" if view.terminated_reason else "")
    return {
        "name": view.name,
        "role": view.role,
        "pod": view.name,
        "host": view.node_name,
        "reason": f"pod {view.name} {why}",
    }


def _first_failure(failures: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    return min(failures, key=lambda item: item[0])[1]


def job_state(
    layout: PodLayout,
    pods: Sequence[PodView],
    outcomes: Mapping[str, PodOutcome],  # pod name -> its agent's outcome (kept after the pod is gone)
    *,
    planned: Sequence[Mapping[str, Any]] = (),  # the plan's processes
    engine_failed: str = "",  # a JobSet/Job Failed condition's message
    canceled: bool = False,
) -> JobState:
    deciding = {r.name: r.count for r in layout.roles if r.decides_success}
    live = [v for v in pods if v.phase in ("Pending", "Running")]
    processes = merged_processes(list(outcomes.values()))
    if canceled:
        return JobState(JobStatus.CANCELED, "canceled by the user", stop_the_rest=bool(live), processes=processes)

    failures: list[tuple[float, dict[str, Any]]] = []
    for pod, out in outcomes.items():
        if out.status == JobStatus.FAILED:
            root = out.root_cause or {"reason": out.reason}
            failures.append(
                (
                    float(out.failed_at or 0),
                    {**root, "pod": pod, "host": out.node or root.get("host") or out.node_name},
                )
            )
    for view in pods:
        if view.name in outcomes:
            continue
        if view.phase == "Failed" or (view.phase == "Pending" and view.waiting_reason in FATAL_WAITING):
            failures.append((float("inf"), _pod_failure(view)))
    if failures:
        root = _first_failure(failures)
        return JobState(
            JobStatus.FAILED, root.get("reason", "a pod failed"), root, stop_the_rest=bool(live), processes=processes
        )
    if engine_failed:
        return JobState(JobStatus.FAILED, engine_failed, None, stop_the_rest=bool(live), processes=processes)

    succeeded: dict[str, int] = {}
    for view in pods:
        if view.phase == "Succeeded":
            succeeded[view.role] = succeeded.get(view.role, 0) + 1
    if deciding and all(succeeded.get(role, 0) >= count for role, count in deciding.items()):
        return JobState(
            JobStatus.COMPLETED,
            "",
            None,
            stop_the_rest=bool(live),
            processes=stopped_helpers(processes, planned, deciding),
        )

    waiting = [v for v in pods if v.phase == "Pending" and v.unschedulable]
    if waiting:
        return JobState(
            JobStatus.QUEUED,
            f"pod {waiting[0].name} cannot be scheduled: {waiting[0].unschedulable}",
            processes=processes,
        )
    if any(v.phase == "Running" for v in pods):
        return JobState(JobStatus.RUNNING, processes=processes)
    expected = sum(r.count for r in layout.roles)
    return JobState(JobStatus.QUEUED, f"waiting for pods ({len(pods)} of {expected} created)", processes=processes)


def stopped_helpers(
    processes: list[dict[str, Any]], planned: Sequence[Mapping[str, Any]], deciding: Mapping[str, int]
) -> list[dict[str, Any]]:
    """After success: helper processes (parameter servers) were stopped on purpose, never failures.

    A helper whose pod was removed before its last report came back is listed from the plan.
    """
    out = []
    for proc in processes:
        if proc.get("role") not in deciding and proc.get("exit_code") != 0:
            proc = {**proc, "stopped_by_distrun": True}
        out.append(proc)
    known = {p.get("name") for p in out}
    for proc in planned:
        if proc.get("name") not in known and proc.get("role") not in deciding:
            keys = ("name", "role", "index", "rank", "node_rank", "label")
            out.append(
                {**{k: proc.get(k) for k in keys}, "stopped_by_distrun": True, "exit_code": None, "signal": "SIGTERM"}
            )
    return sorted(out, key=lambda p: (p.get("node_rank", 0), p.get("rank") if p.get("rank") is not None else -1))
