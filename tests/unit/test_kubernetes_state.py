"""Pods and outcomes -> distrun's status, root cause and processes: the pure mapping.

Which status each plain pod phase (and a cancel) gives is in the state table of
tests/unit/test_backend_conformance.py; here, what only Kubernetes has: roles, reasons, root causes.
"""

from __future__ import annotations

import json
from pathlib import Path

from distrun.backends.kubernetes.collect import keep_outcome, read_outcomes
from distrun.backends.kubernetes.job_files import K8sPaths
from distrun.backends.kubernetes.pod_agent import TERMINATION_LIMIT, compact
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.state import PodOutcome, PodView, job_state, pod_view

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
    early = PodOutcome.kept(
        {"status": "Failed", "failed_at": 10.0, "node_name": "n1", "root_cause": {"name": "worker_1", "reason": "r1"}}
    )
    late = PodOutcome.kept(
        {"status": "Failed", "failed_at": 12.0, "node_name": "n2", "root_cause": {"name": "worker_0", "reason": "r0"}}
    )
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


def test_kept_outcomes_read_back_as_node_outcomes_with_their_pods_node_and_attempt(tmp_path: Path) -> None:
    paths = K8sPaths(tmp_path)
    report = {"node_rank": 1, "status": "Failed", "reason": "rank 3 failed", "pod": "w1", "node": "gpu-7"}
    keep_outcome(paths, "w1", report, attempt=2)
    keep_outcome(paths, "w0", {"status": "Completed"})  # a report without a node rank
    (paths.outcomes / "broken.json").write_text("[1, 2]")
    on_disk = json.loads((paths.outcomes / "w1.json").read_text())
    assert on_disk == {**report, "attempt": 2}  # the file keeps the report as it came, plus its attempt
    outcomes = read_outcomes(paths)
    assert sorted(outcomes) == ["w0", "w1"]
    w1, w0 = outcomes["w1"], outcomes["w0"]
    assert (w1.node_rank, w1.status, w1.node, w1.attempt) == (1, "Failed", "gpu-7", 2)
    assert (w0.node_rank, w0.status, w0.node, w0.attempt) == (-1, "Completed", "", 0)
