"""Restarts on Kubernetes, offline: the manifests (JobSet failurePolicy, validated against the CRD),
what is refused and why, the pod agent's restart count and exit code, and how distrun follows
JobSet's attempts (pure). The end-to-end runs are in test_kubernetes_jobs.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from distrun.agent.node_facts import NodeOutcome
from distrun.backends.kubernetes.attempts import current_attempt, preemption_restarts, with_restarts
from distrun.backends.kubernetes.backend import preview
from distrun.backends.kubernetes.pod_agent import pod_exit_code, restart_attempt, with_restart_count
from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.state import PodOutcome, PodView, job_state
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.loading.loader import load_job_file
from distrun.plan.plan_job import PlanJob
from distrun.prepare.compute import ComputeTarget
from distrun.restarts.policy import RestartPolicy
from distrun.store.layout import Layout
from support.cli import REPO
from support.k8s_schemas import validate_object

DDP = REPO / "examples" / "pytorch-ddp" / "job.yml"
RESTARTS = ("limits.max_restarts=2", "limits.no_restart_exit_codes=[3, 0]")


def render(home: Path, overrides: tuple[str, ...], jobset: str = "always") -> dict:
    target = ComputeTarget("cluster", "kubernetes", {"namespace": "ml", "jobset": jobset, "image": "reg/distrun:1"})
    return preview(load_job_file(str(DDP), overrides), Layout(home), target).show()


def test_max_restarts_becomes_the_jobsets_failure_policy_and_validates(tmp_path: Path) -> None:
    rendered = render(tmp_path, RESTARTS)
    (jobset,) = [o for o in rendered["objects"] if o["kind"] == "JobSet"]
    validate_object(jobset)  # the JobSet CRD's schema, defaults applied; its Jobs as core Jobs, strictly
    preempted = {
        "name": "preempted",
        "action": "RestartJobSetAndIgnoreMaxRestarts",
        "onJobFailureReasons": ["PodFailurePolicy"],
        "onJobFailureMessagePatterns": ["has condition DisruptionTarget"],
    }
    final = {"name": "noRestartExitCodes", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    assert jobset["spec"]["failurePolicy"] == {
        "maxRestarts": 2,
        "restartStrategy": "BlockingRecreate",
        "rules": [preempted, final],  # first match wins: a disrupted pod is a preemption, whatever its exit code
    }
    for rj in jobset["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        assert job["backoffLimit"] == 0  # a failed pod fails its Job: JobSet restarts the whole set
        # Only the codes a failed container can exit with (0 never fails; over 255 is a validation error).
        codes = {"containerName": "distrun", "operator": "In", "values": [3]}
        assert job["podFailurePolicy"] == {
            "rules": [
                {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {"action": "FailJob", "onExitCodes": codes},
            ]
        }
        env = {e["name"]: e for e in job["template"]["spec"]["containers"][0]["env"]}
        field = env["DISTRUN_K8S_RESTART_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"


def test_without_restarts_the_jobset_fails_at_the_first_failed_job(tmp_path: Path) -> None:
    (jobset,) = [o for o in render(tmp_path, ())["objects"] if o["kind"] == "JobSet"]
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 0}
    env = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "DISTRUN_K8S_RESTART_ATTEMPT" not in {e["name"] for e in env}
    (only_max,) = [o for o in render(tmp_path / "b", ("limits.max_restarts=1",))["objects"] if o["kind"] == "JobSet"]
    validate_object(only_max)
    assert [r["name"] for r in only_max["spec"]["failurePolicy"]["rules"]] == ["preempted"]


def test_restarts_on_indexed_jobs_or_max_preemptions_are_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(DistrunError) as indexed:
        render(tmp_path, ("limits.max_restarts=1",), jobset="never")
    text = indexed.value.render()
    assert "limits.max_restarts needs JobSet" in text and "install JobSet" in text and "run the job once" in text
    with pytest.raises(DistrunError) as preemptions:
        render(tmp_path, ("limits.max_restarts=1", "limits.max_preemptions=2"))
    text = preemptions.value.render()
    assert "cannot honour limits.max_preemptions" in text and "remove limits.max_preemptions" in text


# ---------------------------------------------------------------- the pod agent


def test_the_pod_agent_gives_every_process_the_jobset_restart_count(tmp_path: Path) -> None:
    assert restart_attempt({"DISTRUN_K8S_RESTART_ATTEMPT": "2"}) == 2
    assert restart_attempt({"DISTRUN_K8S_RESTART_ATTEMPT": ""}) == 0  # the label is missing: first attempt
    from distrun.runner.jobs import plan_job

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("compute:\n  k:\n    type: kubernetes\n    image: reg/distrun:1\n")
    launch = plan_job(load_job_file(str(DDP), ("limits.max_restarts=1",)), Layout(home), "k").plan
    again = with_restart_count(launch, 2)
    for proc in again.processes():
        assert proc.env["DISTRUN_RESTART_COUNT"] == proc.env["TORCHELASTIC_RESTART_COUNT"] == "2"
    assert all(p.env["DISTRUN_RESTART_COUNT"] == "0" for p in launch.processes())


def outcome(status: JobStatus, code: int | None) -> NodeOutcome:
    now = time.time()
    root = {"name": "rank_1", "exit_code": code} if code is not None else None
    return NodeOutcome(1, "pod", status, "why", now, now, root_cause=root)


def test_the_pod_agent_exits_with_a_no_restart_code_so_the_pod_failure_policy_sees_it() -> None:
    # The pod reads the restart policy as plain data, from the job.json that submitting the job writes.
    restarts = PlanJob.of(load_job_file(str(DDP), RESTARTS).spec).restarts
    assert pod_exit_code(outcome(JobStatus.FAILED, 3), restarts) == 3
    assert pod_exit_code(outcome(JobStatus.FAILED, 4), restarts) == 1
    assert pod_exit_code(outcome(JobStatus.COMPLETED, None), restarts) == 0
    assert pod_exit_code(outcome(JobStatus.FAILED, 3), PlanJob.of(load_job_file(str(DDP), ()).spec).restarts) == 1


# ---------------------------------------------------------------- following JobSet's attempts

LAYOUT = PodLayout("job", True, (PodRole("worker", 2, 0, "img"),))
POLICY = RestartPolicy(max_restarts=2, no_restart_exit_codes=frozenset({3}))


def failed(pod_attempt: int, code: int, at: float = 100.0) -> PodOutcome:
    root = {"name": "rank_1", "reason": f"rank_1 exited with code {code}", "exit_code": code}
    return PodOutcome.kept(
        {"status": "Failed", "failed_at": at, "root_cause": root, "attempt": pod_attempt, "started_at": at - 5}
    )


def ended(status: str, pod_attempt: int) -> PodOutcome:
    """An outcome as kept from a termination message: its status and attempt only."""
    return PodOutcome.kept({"status": status, "attempt": pod_attempt})


def pod(name: str, phase: str, attempt: int) -> PodView:
    return PodView(name=name, role="worker", index=0, phase=phase, node_name="n", attempt=attempt)


def follow(views: list[PodView], outcomes: dict[str, PodOutcome], current: int, active: bool = True):
    mine = {p: o for p, o in outcomes.items() if o.attempt == current}
    state = job_state(LAYOUT, [v for v in views if v.attempt == current], mine)
    live = any(v.phase in ("Pending", "Running") for v in views)
    return with_restarts(state, LAYOUT, POLICY, outcomes, current, jobset_active=active, live=live)


def test_a_failed_attempt_with_restarts_left_runs_on_while_jobset_restarts_it() -> None:
    views = [pod("a", "Failed", 0), pod("b", "Running", 0)]
    state, attempts = follow(views, {"a": failed(0, 1)}, 0)
    assert state.status == "Running" and not state.stop_the_rest and not state.terminal
    assert "attempt 0 failed" in state.reason and "restart 1 of 2" in state.reason
    assert attempts == []


def test_restarted_attempts_are_listed_with_their_root_cause_and_the_last_one_completes() -> None:
    jobset = {"status": {"restarts": 1}}
    views = [pod("c", "Succeeded", 1), pod("d", "Succeeded", 1)]
    assert current_attempt(jobset, views) == 1 and current_attempt(None, [pod("e", "Pending", 2)]) == 2
    outcomes = {
        "a": failed(0, 1),
        "b": ended("Canceled", 0),
        "c": ended("Completed", 1),
    }
    state, attempts = follow(views, outcomes, 1)
    assert state.status == "Completed"
    first, last = (a.to_dict() for a in attempts)
    assert first["attempt"] == 0 and first["status"] == "Failed" and first["restarted"] is True
    assert first["root_cause"]["exit_code"] == 1 and first["logs"] == "user_logs/attempt_0"
    assert last["attempt"] == 1 and last["status"] == "Completed" and last["logs"] == "user_logs"


def test_the_last_allowed_failure_or_a_no_restart_code_ends_the_job() -> None:
    outcomes = {"a": failed(0, 1), "b": failed(1, 1), "c": failed(2, 1)}
    state, attempts = follow([pod("c", "Failed", 2)], outcomes, 2, active=False)
    assert state.status == "Failed" and "after 3 failed attempts (limits.max_restarts: 2)" in state.reason
    assert [a.attempt for a in attempts] == [0, 1, 2]
    # JobSet restarted an attempt whose root cause must not be restarted (a peer's Job failed
    # first): distrun stops the job itself.
    views = [pod("x", "Running", 1)]
    state, attempts = follow(views, {"a": failed(0, 3)}, 1)
    assert state.status == "Failed" and state.stop_the_rest and "exit code 3" in state.reason
    assert [a.attempt for a in attempts] == [0] and attempts[0].restarted is False


def test_an_attempt_whose_pod_was_stopped_from_outside_is_a_preemption() -> None:
    stopped = {"a": ended("Canceled", 0)}  # its agent ended its ranks on SIGTERM
    state, attempts = follow([pod("b", "Running", 1)], stopped, 1)
    assert state.status == "Running" and state.reason.startswith("attempt 1")
    (first,) = attempts
    assert first.root_cause is None and first.status == "Preempted"
    assert "stopped from outside (evicted or deleted)" in first.reason


def test_an_attempt_without_reports_is_preempted_when_jobset_counted_a_restart_for_a_disrupted_pod() -> None:
    jobset = {"status": {"restarts": 2, "restartsCountTowardsMax": 1}}
    assert preemption_restarts(jobset) == 1 and preemption_restarts(None) is None
    views = [pod("c", "Running", 2)]
    mine = job_state(LAYOUT, views, {})
    # Attempt 0 failed (its report was read), attempt 1's pods went before anything was read.
    state, attempts = with_restarts(
        mine, LAYOUT, POLICY, {"a": failed(0, 1)}, 2, jobset_active=True, live=True, preemptions=1
    )
    assert [(a.attempt, str(a.status)) for a in attempts] == [(0, "Failed"), (1, "Preempted")]
    assert "disrupted" in attempts[1].reason and state.status == "Running"


def test_distrun_leaves_the_count_to_jobset_while_the_jobset_still_runs() -> None:
    # distrun counts 3 failures (of max_restarts 2), but JobSet, which may have restarted one of
    # them for a disrupted pod, has not failed the set: distrun neither stops it nor ends the job.
    outcomes = {"a": failed(0, 1), "b": failed(1, 1), "c": failed(2, 1)}
    state, _ = follow([pod("c", "Failed", 2), pod("d", "Running", 2)], outcomes, 2, active=True)
    assert state.status == "Running" and not state.stop_the_rest and "JobSet decides what follows" in state.reason
