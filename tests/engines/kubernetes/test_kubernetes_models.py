"""A registered model as the input of a 2-node job on Kubernetes (the API emulator, as in
test_kubernetes_jobs.py): pods share no filesystem with the machine that runs `distrun`, so the
model's files travel in the job's ConfigMap with its code, as another job's output does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from support.clusters.k8s_emulator import EmulatedCluster

pytestmark = pytest.mark.slow
WAIT_S = 300


def test_a_two_node_job_on_kubernetes_reads_a_registered_model(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path
) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.txt").write_text("registered weights\n")
    made = run_cli("model", "create", "--name", "clf", "--path", str(tmp_path / "model"))
    assert made.returncode == 0, made.stderr
    job = tmp_path / "job.yml"
    job.write_text(
        textwrap.dedent(
            """
            command: echo "read $(cat ${{inputs.model}}/weights.txt) at ${{inputs.model}}"
            inputs:
              model: {type: custom_model, path: azureml:clf@latest}
            resources: {instance_count: 2}
            """
        )
    )
    result = run_cli("run", str(job), "--compute", "k8s", "--name", "reads_model", timeout=WAIT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    shipped = f"{k8s.work_dir}/reads_model/inputs/model"
    for node in (0, 1):  # [node/rank]: one process on each of the two pods
        assert f"[{node}/{node}] read registered weights at {shipped}" in result.stdout, result.stdout
