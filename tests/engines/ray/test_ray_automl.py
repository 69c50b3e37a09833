"""An AutoML job on the real 2-node Ray test cluster: with max_concurrent_trials > 1 its search
(one rank) runs FLAML's trials concurrently as Ray Tune trials of the cluster that rank runs in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.automl_data import CUSTOMER_COLUMNS, customers, write_mltable

pytestmark = pytest.mark.slow
TIMEOUT = 600  # a loaded machine starts Ray workers slowly

JOB = """\
type: automl
task: classification
primary_metric: accuracy
target_column_name: "y"
training_data: {path: ./train, type: mltable}
validation_data: {path: ./valid, type: mltable}
limits: {timeout_minutes: 0.25, max_trials: 4, max_concurrent_trials: 2}
training:
  allowed_training_algorithms: [light_gbm]
"""


def test_trials_run_concurrently_across_the_ray_cluster(
    ray_cli, ray_target: str, distrun_home: Path, tmp_path: Path
) -> None:
    write_mltable(tmp_path / "train", CUSTOMER_COLUMNS, customers(160, seed=1))
    write_mltable(tmp_path / "valid", CUSTOMER_COLUMNS, customers(60, seed=2))
    (tmp_path / "job.yml").write_text(JOB, encoding="utf-8")
    proc = ray_cli("run", str(tmp_path / "job.yml"), "--compute", ray_target, "--name", "search")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    assert "trials run 2 at a time across the Ray cluster" in out
    assert out.count("] trial ") >= 2  # each trial that ended is said, as on local compute
    assert "max_concurrent_trials" not in out  # honoured here: not said as one at a time
    board = json.loads(
        (distrun_home / "jobs" / "search" / "named-outputs" / "leaderboard" / "leaderboard.json").read_text()
    )
    assert board["leaderboard"] and board["best"]["algorithm"] == "LightGBM"
