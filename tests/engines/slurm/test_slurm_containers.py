"""A job with `environment.image` on the Slurm cluster runs each rank in a podman container on its node.

The image is the test image (`support.container_image`); the submitter writes how to run it into
the job folder and each node's agent runs its ranks with the podman of its own machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.container_image import DDP_CHECK, DDP_JOB, MARKER, containers_of, use_test_image
from support.jobs import only_job, processes_of_job, record


@pytest.mark.slow
def test_ddp_on_two_slurm_nodes_runs_in_containers_of_the_image(run_cli, write_job, hpc, distrun_home):
    image = use_test_image(distrun_home)
    job = write_job(DDP_JOB.format(image=image), {"check.py": DDP_CHECK})
    planned = run_cli("plan", str(job), "--compute", hpc)
    assert planned.returncode == 0, planned.stderr
    assert f"a container of image {image} per process (podman on each node)" in planned.stdout
    result = run_cli("run", str(job), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        f"each Slurm node runs each process in a container of image {image} (podman)" in result.stdout + result.stderr
    )
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed" and rec["backend_id"]
    assert {p["rank"]: p["host"] for p in rec["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    folder = distrun_home / "jobs" / name
    master = None
    for rank in range(4):
        log = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} of 4 sum 6 in image True" in log
        written = folder / "code" / "outputs" / f"rank_{rank}.txt"
        master = master or written.read_text()
        assert written.read_text() == master  # every rank was given node 0's address
        assert (written.stat().st_uid, written.stat().st_gid) == (os.getuid(), os.getgid())
    assert not (Path("/") / MARKER).exists()
    assert containers_of(image) == []
    assert processes_of_job(name) == []
