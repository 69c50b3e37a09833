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
from distrun.backends.kubernetes.state import PodOutcome, PodView, job_state, pod_view, unstarted_outcome
from distrun.cli.views import process_state

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


DDP = PodLayout("ddp", True, (PodRole("worker", 2, 0, "img"),))
PLANNED = [
    {"name": f"rank_{r}", "role": "rank", "index": r, "rank": r, "node_rank": r // 2, "label": f"{r // 2}/{r}"}
    | {"log_name": f"std_log_process_0{r}.txt"}
    for r in range(4)
]


def test_a_pod_stopped_before_its_agent_ran_lists_its_nodes_ranks_as_never_started() -> None:
    """Rank 1 failed on node 0 before node 1's pod ran: the record still names ranks 2 and 3."""
    deleted = {"deleting": True}
    failed = PodOutcome.kept(
        {
            "node_rank": 0,
            "status": "Failed",
            "failed_at": 5.0,
            "root_cause": {"name": "rank_1", "reason": "rank 1 exited with code 1"},
            "processes": [
                {"name": "rank_0", "rank": 0, "node_rank": 0, "signal": "SIGTERM", "stopped_by_distrun": True},
                {"name": "rank_1", "rank": 1, "node_rank": 0, "exit_code": 1},
            ],
        }
    )
    for pod in (
        PodView("ddp-worker-0-1-x", "worker", 1, "Pending", "n2", **deleted),  # deleted before it started
        PodView("ddp-worker-0-1-x", "worker", 1, "Failed", "n2", exit_code=143, **deleted),  # SIGTERM, no report
    ):
        kept = unstarted_outcome(DDP, pod, PLANNED, "/jobs/j/user_logs", 6.0)
        assert kept is not None
        unstarted = PodOutcome.kept(kept)
        assert (unstarted.status, unstarted.node_rank) == ("Canceled", 1)
        assert unstarted.reason.startswith("pod ddp-worker-0-1-x was stopped before its ")
        state = job_state(DDP, [], {"ddp-worker-0-0-x": failed, "ddp-worker-0-1-x": unstarted})
        assert state.status == "Failed" and state.root_cause is not None and state.root_cause["name"] == "rank_1"
        assert [(p["name"], process_state(p)) for p in state.processes] == [
            ("rank_0", "stopped"),
            ("rank_1", "failed"),
            ("rank_2", "not started"),
            ("rank_3", "not started"),
        ]
        rank_2 = state.processes[2]
        assert rank_2["log"] == "/jobs/j/user_logs/std_log_process_02.txt"
        assert rank_2["address"] == "ddp-worker-0-1.ddp" and rank_2["host"] == "n2"


def test_a_pod_that_ran_or_failed_on_its_own_gets_no_never_started_outcome() -> None:
    cases = [
        PodView("p", "worker", 1, "Pending", "n2"),  # not deleted: it may start yet
        PodView("p", "worker", 1, "Running", "n2", deleting=True),  # still stopping: it will report
        PodView("p", "worker", 1, "Failed", "n2", exit_code=137, deleting=True),  # killed: what ran is unknown
        PodView("p", "worker", 1, "Pending", "n2", waiting_reason="ImagePullBackOff", deleting=True),  # a failure
        PodView("p", "launcher-x", 0, "Pending", "n2", deleting=True),  # not a role of the job
    ]
    for pod in cases:
        assert unstarted_outcome(DDP, pod, PLANNED, "/jobs/j/user_logs", 6.0) is None, pod
    mpi = PodLayout(
        "mpi", False, (PodRole("launcher", 1, 0, "img"), PodRole("worker", 2, 0, "img", serves_remote_starts=True))
    )
    worker = PodView("mpi-worker-1-x", "worker", 1, "Pending", "n2", deleting=True)
    assert unstarted_outcome(mpi, worker, PLANNED, "/l", 6.0) is None  # mpirun on the launcher reports its ranks
    launcher = PodView("mpi-launcher-0-x", "launcher", 0, "Pending", "n1", deleting=True)
    kept = unstarted_outcome(mpi, launcher, PLANNED, "/l", 6.0)
    assert kept is not None and [p["name"] for p in kept["processes"]] == ["rank_0", "rank_1", "rank_2", "rank_3"]
