"""A pipeline whose steps run on the real 2-node Ray test cluster (see test_ray_jobs.py for the cluster).

Each step is a job of its own driven from a launcher on this machine, submitted when the steps it
reads from completed. No shared filesystem is assumed: a step's outputs, written in its node's
own copy of the job folder, come back into its job folder here when it ends, and the next step
gets them copied into its own job folder and shipped to each of its nodes with its code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.engine_pipelines import DDP_AFTER_PREPARE, completed_steps, every_rank_read, upstream_rows
from support.ray_jobs import node_job_dir, on_two_nodes, placed

pytestmark = pytest.mark.slow
TIMEOUT = 900  # a loaded machine starts Ray workers slowly


def test_a_ddp_step_on_ray_reads_the_step_before_shipped_to_its_nodes(ray_cli, ray_target, distrun_home: Path) -> None:
    proc = ray_cli("run", str(DDP_AFTER_PREPARE), "--compute", ray_target, "--name", "nightly")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    assert "Status: Completed" in out, out[-4000:]
    children = completed_steps(distrun_home, "nightly", ray_target, out)
    assert {p["rank"]: p["node_rank"] for p in children["train"]["processes"]} == {0: 0, 1: 0, 2: 1, 3: 1}
    jobs = distrun_home / "jobs"

    # prepare wrote its file in its Ray node's own copy of the job folder (removed since): the
    # file is here because the node's outputs were collected when the step ended.
    rows, written_in = upstream_rows(distrun_home, "nightly")
    prepared_on = placed(jobs / "nightly.prepare")["nodes"][0]
    assert written_in == f"{node_job_dir(prepared_on, 'nightly.prepare')}/named-outputs/data"
    assert not Path(written_in).exists()
    # Every train rank read it in its own node's copy of train's job folder, on both Ray nodes.
    where, _ = on_two_nodes(jobs / "nightly.train")
    every_rank_read(
        distrun_home,
        "nightly",
        rows,
        lambda rank: f"{node_job_dir(where['nodes'][rank // 2], 'nightly.train')}/inputs/data",
    )
