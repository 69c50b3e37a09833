"""An AutoML job on the real 2-node Ray test cluster: with max_concurrent_trials > 1 its search
(one rank) runs FLAML's trials concurrently as Ray Tune trials of the cluster that rank runs in,
and says each trial as it ends."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from distrun.automl_search.trials import Trials
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
limits: {timeout_minutes: 0.5, max_trials: 2, max_concurrent_trials: 2}  # ends at 2 trials, run at once
training:
  allowed_training_algorithms: [light_gbm]
"""


def test_trials_run_concurrently_across_the_ray_cluster(
    ray_cli, ray_target: str, distrun_home: Path, tmp_path: Path
) -> None:
    write_mltable(tmp_path / "train", CUSTOMER_COLUMNS, customers(160, seed=1))
    write_mltable(tmp_path / "valid", CUSTOMER_COLUMNS, customers(60, seed=2))
    (tmp_path / "job.yml").write_text(JOB, encoding="utf-8")
    proc = ray_cli(
        "run", str(tmp_path / "job.yml"), "--compute", ray_target, "--name", "search", extra_env={"DISTRUN_MLFLOW": "1"}
    )
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    assert "trials run 2 at a time across the Ray cluster" in out
    # Each trial is said as it ends, as on local compute: before Ray Tune's run is over, not after.
    lines = out.splitlines()
    trial_lines = [i for i, line in enumerate(lines) if "] trial " in line]
    ended = [i for i, line in enumerate(lines) if "] search ended: " in line]
    assert len(trial_lines) >= 2 and len(ended) == 1, out[-4000:]
    assert max(trial_lines) < ended[0], out[-4000:]
    assert lines[ended[0]].endswith(f"search ended: {len(trial_lines)} trials")
    assert "max_concurrent_trials" not in out  # honoured here: not said as one at a time
    board = json.loads(
        (distrun_home / "jobs" / "search" / "named-outputs" / "leaderboard" / "leaderboard.json").read_text()
    )
    assert board["leaderboard"] and board["best"]["algorithm"] == "LightGBM"
    # Each trial recorded as a child run of the job's MLflow run when it was said.
    assert all(row["run_id"] for row in board["leaderboard"]), board["leaderboard"]


def test_the_exit_score_stops_ray_tunes_remaining_trials(tmp_path: Path) -> None:
    # Ray Tune asks its stopper after each result; no cluster needed to see it answer.
    from distrun.automl_search.ray_trials import tune_hooks
    from distrun.automl_search.search import _exit_score

    said: list[str] = []
    trials = Trials("classification", "accuracy", True, tmp_path / "unused.log", said.append)
    automl = SimpleNamespace(_state=SimpleNamespace(time_budget=60))
    trials.on_score = _exit_score(automl, trials, 0.8, greater_is_better=True)
    stopper = tune_hooks(trials)["stop"]
    trials.on_score(0.75)
    assert not stopper.stop_all() and automl._state.time_budget == 60
    trials.on_score(0.875)
    assert stopper.stop_all() and automl._state.time_budget == 0
    assert said == ["exit_score 0.8 reached (0.8750): no further trials"]
