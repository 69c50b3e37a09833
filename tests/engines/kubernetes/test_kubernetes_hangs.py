"""A real hang across two pods of the emulated cluster: node 0's pod agent relays progress and
stack requests between the pods (its exchange port, the job's token), `job stacks` reaches it
through the API's pod proxy, and the hang watchdog judges the whole job's progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.clusters.k8s_emulator import EmulatedCluster
from support.hang_jobs import QUIET_NODE, check_shown_then_ended_hung, stalling_job
from support.jobs import four_rank_job, record, recorded_job, wait_for

pytestmark = pytest.mark.slow
HANG_TIMEOUT = 6


def test_a_hung_two_pod_job_is_shown_then_ended_with_every_pods_stacks(
    k8s: EmulatedCluster, start_cli, write_job, distrun_home: Path
) -> None:
    job = stalling_job(write_job, "k8s")
    started = start_cli("run", str(job), "--name", "hung", "--hang-timeout", str(HANG_TIMEOUT))
    wait_for(lambda: recorded_job(distrun_home) == "hung", timeout=120)
    wait_for(lambda: record(distrun_home, "hung")["status"] == "Running", timeout=180)
    pods = k8s.pods()  # py-spy reads the ranks inside them with ptrace
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["containers"][0]["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]}}
    check_shown_then_ended_hung(distrun_home, "hung", HANG_TIMEOUT, lambda: started.wait(timeout=240))


def test_a_silent_pod_is_not_hung_while_another_pod_prints(
    k8s: EmulatedCluster, run_cli, write_job, distrun_home: Path
) -> None:
    job = write_job(four_rank_job("python quiet.py", grace=1) + "    compute: k8s\n", {"quiet.py": QUIET_NODE})
    done = run_cli("run", str(job), "--name", "quiet", "--hang-timeout", "2", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert record(distrun_home, "quiet")["status"] == "Completed"
