"""A sweep on Kubernetes (the API emulator and its kubelet, as in test_kubernetes_jobs.py): each
trial a 2 x 2 PyTorch job of its own JobSet, 2 pods, its score read from its MLflow run while it
runs (support/engine_sweeps.py). Pods reach distrun's MLflow server only where it listens on an
address they reach (DISTRUN_MLFLOW_HOST; test_kubernetes_mlflow.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.clusters.k8s_emulator import EmulatedCluster
from support.engine_sweeps import checked_trials, write_sweep
from support.mlflow_store import outbound_address

pytestmark = pytest.mark.slow
WAIT_S = 400


def test_a_sweep_runs_its_trials_as_kubernetes_jobs_and_names_the_best(
    k8s: EmulatedCluster, run_cli, distrun_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    sweep = write_sweep(tmp_path / "sweep")
    env = {"DISTRUN_MLFLOW_HOST": outbound_address()}
    result = run_cli("run", str(sweep), "--compute", "k8s", "--name", "tune", env=env, timeout=WAIT_S)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    trials = checked_trials(distrun_home, "tune", "k8s", result.stdout)
    for trial in trials.values():  # each trial its own JobSet: 2 pods of its own
        pods = {p["pod"] for p in trial["processes"]}
        assert len(pods) == 2 and all(pod.startswith(trial["name"].replace(".", "-").replace("_", "-")) for pod in pods)
