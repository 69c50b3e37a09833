"""A pipeline on the real Slurm cluster of 2 nodes (n1, n2): each step its own Slurm job,
submitted when the steps it reads from completed, reading their outputs by path on the
filesystem the nodes share."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from support.cli import REPO
from support.clusters.slurm_cluster import SlurmCluster
from support.jobs import record

PIPELINE = """\
type: pipeline
jobs:
  prepare:
    command: echo "rows from prepare on $SLURMD_NODENAME" > ${{outputs.data}}/rows.txt
    outputs:
      data: {type: uri_folder}
  train:
    command: python train.py ${{inputs.data}} ${{outputs.result}}
    code: ./src
    inputs:
      data: ${{parent.jobs.prepare.outputs.data}}
    outputs:
      result: {type: uri_folder}
    resources:
      instance_count: 2
    distribution:
      type: pytorch
      process_count_per_instance: 2
"""

# Every rank reads prepare's file and all-reduces its rank over gloo; rank 0 writes both (the
# training step of the Ray and Kubernetes pipeline tests too).
TRAIN = REPO / "tests" / "data" / "pipelines" / "ddp_after_prepare" / "src" / "train.py"


@pytest.mark.slow
def test_pipeline_steps_run_as_slurm_jobs_passing_outputs_by_path(
    run_cli, hpc, distrun_home, tmp_path: Path, slurm_cluster: SlurmCluster
) -> None:
    (tmp_path / "src").mkdir()
    shutil.copy(TRAIN, tmp_path / "src" / "train.py")
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(PIPELINE)
    lookups, started = slurm_cluster.job_lookups(), time.monotonic()
    result = run_cli("run", str(pipeline), "--compute", hpc, "--name", "nightly", timeout=300)
    took, lookups = time.monotonic() - started, slurm_cluster.job_lookups() - lookups
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Status: Completed" in out, out
    # The pipeline asks Slurm about a running step every 0.5 s, as `distrun run` asks about a job,
    # not at each 50 ms turn of its loop (20 RPCs a second to slurmctld).
    assert lookups <= 2.5 * took + 10, (lookups, took)

    parent = record(distrun_home, "nightly")
    assert parent["status"] == "Completed"
    assert {step: (s["status"], s["job"], s["compute"]) for step, s in parent["steps"].items()} == {
        "prepare": ("Completed", "nightly.prepare", hpc),
        "train": ("Completed", "nightly.train", hpc),
    }
    children = {step: record(distrun_home, f"nightly.{step}") for step in ("prepare", "train")}
    for child in children.values():
        assert (child["status"], child["parent"], child["compute"]) == ("Completed", "nightly", hpc)
    # Each step its own Slurm job, the second submitted only once the first had completed.
    ids = [children[step]["backend_id"] for step in ("prepare", "train")]
    assert all(ids) and ids[0] != ids[1], ids
    assert "[prepare] started as job nightly.prepare on hpc, 1 process\n" in out, out
    assert out.index("[prepare] Completed") < out.index("[train] started as job nightly.train on hpc, 4 processes")

    jobs = distrun_home / "jobs"
    rows = (jobs / "nightly.prepare" / "named-outputs" / "data" / "rows.txt").read_text().strip()
    assert rows in ("rows from prepare on n1", "rows from prepare on n2")  # run by a Slurm node
    train = children["train"]
    assert {p["rank"]: p["host"] for p in train["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}
    logs = jobs / "nightly.train" / "user_logs"
    assert sorted(p.name for p in logs.iterdir()) == [f"std_log_process_{i:02d}.txt" for i in range(4)]
    # Read by path where prepare wrote it, on the filesystem both nodes share: no copy.
    upstream = (jobs / "nightly.prepare" / "named-outputs" / "data").resolve()
    assert not (jobs / "nightly.train" / "inputs").exists()
    for rank in range(4):
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} read {rows!r} in {upstream}\n" in text and f"rank {rank} of 4 sum 6\n" in text, text
    result_file = jobs / "nightly.train" / "named-outputs" / "result" / "result.txt"
    assert result_file.read_text() == f"sum 6 of {rows}\n"
