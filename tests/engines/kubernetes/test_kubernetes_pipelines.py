"""A pipeline whose steps run on Kubernetes (the API emulator, as in test_kubernetes_jobs.py).

Each step is a job of its own (a JobSet), submitted when the steps it reads from completed. Pods
share no filesystem with the machine that runs `distrun`: a step's outputs, written inside its
pods, come back through the pods' logs into its job folder, and the next step gets them copied
into its own job folder and shipped in its ConfigMap with its code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.clusters.k8s_emulator import EmulatedCluster
from support.engine_pipelines import DDP_AFTER_PREPARE, completed_steps, every_rank_read, upstream_rows
from support.jobs import record

pytestmark = pytest.mark.slow
WAIT_S = 300


def test_a_ddp_step_on_kubernetes_reads_the_step_before_through_the_pods_logs_and_configmap(
    k8s: EmulatedCluster, run_cli, distrun_home: Path
) -> None:
    result = run_cli("run", str(DDP_AFTER_PREPARE), "--compute", "k8s", "--name", "nightly", timeout=WAIT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Status: Completed" in result.stdout, result.stdout
    children = completed_steps(distrun_home, "nightly", "k8s", result.stdout)
    assert sorted(p["rank"] for p in children["train"]["processes"]) == [0, 1, 2, 3]
    assert len({p["pod"] for p in children["train"]["processes"]}) == 2

    # prepare wrote its file in its pod's own job folder: it is here only because the pod's agent
    # sent it back in its log, whose copy here says so in place of the archive's records.
    rows, written_in = upstream_rows(distrun_home, "nightly")
    assert written_in == f"{k8s.work_dir}/nightly.prepare/named-outputs/data"
    system_logs = distrun_home / "jobs" / "nightly.prepare" / "system_logs"
    pod_logs = "".join(p.read_text() for p in system_logs.glob("pod_*.txt"))
    assert "were brought back into the job folder" in pod_logs and "distrun-outputs" not in pod_logs
    # Every train rank read it in its pod's own job folder, unpacked from the step's ConfigMap.
    every_rank_read(distrun_home, "nightly", rows, lambda rank: f"{k8s.work_dir}/nightly.train/inputs/data")


def test_a_failing_rank_in_a_kubernetes_step_fails_the_pipeline_naming_step_and_rank(
    k8s: EmulatedCluster, run_cli, distrun_home: Path
) -> None:
    result = run_cli(
        "run",
        str(DDP_AFTER_PREPARE),
        "--compute",
        "k8s",
        "--name",
        "broken",
        "--set",
        "jobs.train.distribution.process_count_per_instance=1",
        "--set",
        "jobs.train.environment_variables.FAIL_RANK=1",
        timeout=WAIT_S,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    parent = record(distrun_home, "broken")
    assert parent["status"] == "Failed"
    assert parent["reason"].startswith("step train failed: "), parent["reason"]
    root = parent["root_cause"]
    assert (root["step"], root["job"], root["name"], root["node_rank"]) == ("train", "broken.train", "rank_1", 1)
    assert "ValueError: bad rows on rank 1: rows written to " in root["traceback"]
    assert root["pod"].startswith("broken-train-")
    steps = parent["steps"]
    assert (steps["prepare"]["status"], steps["train"]["status"]) == ("Completed", "Failed")
    assert "Failed first: step train (job broken.train)" in result.stdout
