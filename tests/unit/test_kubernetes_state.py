"""Pods and outcomes -> distrun's status, root cause and processes: the pure mapping.

Which status each plain pod phase (and a cancel) gives is in the state table of
tests/unit/test_backend_conformance.py; here, what only Kubernetes has: roles, reasons, root causes.
"""

from __future__ import annotations

import json

from distrun.backends.kubernetes.pod_agent import TERMINATION_LIMIT, compact
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.state import PodView, job_state, pod_view

TF = PodLayout(
    "tf",
    True,
    (
        PodRole("worker", 2, 0, "img"),
        PodRole("ps", 1, 2, "img", decides_success=False),
    ),
)


def view(name: str, role: str, phase: str, **extra: object) -> PodView:
    return PodView(name=name, role=role, index=0, phase=phase, node_name="n1", **extra)  # type: ignore[arg-type]


def test_unschedulable_pods_keep_the_job_queued_with_the_schedulers_message() -> None:
    pod = {
        "metadata": {"name": "tf-worker-0-0-x", "labels": {"distrun.io/role": "worker"}},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes: gpu"}
            ],
        },
    }
    state = job_state(TF, [pod_view(pod)], {})
    assert state.status == "Queued" and not state.terminal
    assert state.reason == "pod tf-worker-0-0-x cannot be scheduled: Unschedulable: 0/3 nodes: gpu"


def test_the_earliest_failure_is_the_root_cause_and_the_rest_is_stopped() -> None:
    early = {
        "status": "Failed",
        "failed_at": 10.0,
        "node_name": "n1",
        "root_cause": {"name": "worker_1", "reason": "r1"},
    }
    late = {
        "status": "Failed",
        "failed_at": 12.0,
        "node_name": "n2",
        "root_cause": {"name": "worker_0", "reason": "r0"},
    }
    pods = [view("w0", "worker", "Failed"), view("w1", "worker", "Failed"), view("ps", "ps", "Running")]
    state = job_state(TF, pods, {"w0": late, "w1": early})
    assert state.status == "Failed" and state.root_cause is not None
    assert state.root_cause["name"] == "worker_1" and state.root_cause["pod"] == "w1"
    assert state.stop_the_rest and not state.terminal  # the ps pod still runs: it is stopped first
    done = job_state(TF, pods[:2], {"w0": late, "w1": early})
    assert done.terminal and done.status == "Failed"


def test_a_pod_killed_for_memory_without_a_report_is_named() -> None:
    pods = [
        view("w0", "worker", "Failed", exit_code=137, terminated_reason="OOMKilled"),
        view("w1", "worker", "Running"),
    ]
    state = job_state(TF, pods, {})
    assert state.status == "Failed" and "OOMKilled" in state.reason and "w0" in state.reason


def test_success_of_the_training_roles_completes_and_parameter_servers_count_as_stopped() -> None:
    pods = [view("w0", "worker", "Succeeded"), view("w1", "worker", "Succeeded"), view("ps", "ps", "Running")]
    planned = [{"name": "ps_0", "role": "ps", "index": 0, "node_rank": 2, "rank": None, "label": "ps 0"}]
    state = job_state(TF, pods, {}, planned=planned)
    assert state.status == "Completed" and state.stop_the_rest and not state.terminal
    (ps,) = state.processes
    assert ps["name"] == "ps_0" and ps["stopped_by_distrun"] is True
    assert job_state(TF, pods[:2], {}, planned=planned).terminal


def test_termination_message_fits_kubernetes_limit_and_keeps_the_traceback_end() -> None:
    outcome = {
        "status": "Failed",
        "reason": "rank 3 exited with code 1",
        "root_cause": {"name": "rank_3", "traceback": "x" * 20000 + "\nValueError: the end"},
        "processes": [{"name": f"rank_{i}"} for i in range(1000)],
    }
    text = compact(outcome)
    assert len(text.encode()) <= TERMINATION_LIMIT
    data = json.loads(text)
    assert "processes" not in data and data["root_cause"]["traceback"].endswith("ValueError: the end")
