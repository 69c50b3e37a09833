"""A sweep on the real 2-node Ray test cluster: each trial a 2 x 2 PyTorch job placed on both Ray
nodes, driven from a launcher here, its score read from its MLflow run while it runs
(support/engine_sweeps.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.engine_sweeps import checked_trials, write_sweep
from support.ray_jobs import on_two_nodes

pytestmark = pytest.mark.slow
TIMEOUT = 900  # a loaded machine starts Ray workers slowly


def test_a_sweep_runs_its_trials_as_ray_jobs_on_both_nodes_and_names_the_best(
    ray_cli, ray_target: str, distrun_home: Path, tmp_path: Path
) -> None:
    sweep = write_sweep(tmp_path / "sweep")
    proc = ray_cli("run", str(sweep), "--compute", ray_target, "--name", "tune", extra_env={"DISTRUN_MLFLOW": "1"})
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    checked_trials(distrun_home, "tune", ray_target, out)
    on_two_nodes(distrun_home / "jobs" / "tune.trial_0")  # placed on both Ray nodes
