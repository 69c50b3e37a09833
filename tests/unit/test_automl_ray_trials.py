"""A search's trials on a Ray cluster come from Ray Tune's results as each trial ends: a result
read as FLAML's training log line would have it, said and recorded like a trial read from the log."""

from __future__ import annotations

from pathlib import Path

from distrun.automl_search.ray_trials import log_record
from distrun.automl_search.trials import Trials

# The keys FLAML's trial function reports to Ray Tune, and those Ray Tune adds (a few of them).
RESULT = {
    "config": {"n_estimators": 4, "num_leaves": 4, "learning_rate": 0.1, "learner": "lgbm"},
    "val_loss": 0.125,
    "metric_for_logging": {"accuracy": 0.875, "AUC_weighted": 0.9, "pred_time": 0.0002},
    "wall_clock_time": 3.5,
    "pred_time": 0.0002,
    "time_total_s": 0.75,
    "trial_id": "0d8c9279",
    "training_iteration": 1,
}


def test_a_ray_tune_result_reads_as_a_training_log_line() -> None:
    record = log_record(RESULT)
    assert record == {
        "learner": "lgbm",
        "validation_loss": 0.125,
        "logged_metric": RESULT["metric_for_logging"],
        "config": {"n_estimators": 4, "num_leaves": 4, "learning_rate": 0.1},
        "trial_time": 0.75,
    }
    # FLAML's nested form ({"ml": {...}}) and its sample size read the same way.
    nested = log_record({**RESULT, "config": {"ml": RESULT["config"], "FLAML_sample_size": 100}})
    assert nested is not None and nested["config"]["FLAML_sample_size"] == 100 and nested["learner"] == "lgbm"


def test_a_trial_flaml_did_not_fit_is_no_trial() -> None:
    # Over FLAML's memory limit: reported without a wall-clock time.
    assert log_record({**RESULT, "wall_clock_time": None}) is None
    assert log_record({"config": {}}) is None


def test_each_trial_taken_is_said_with_the_best_so_far(tmp_path: Path) -> None:
    said: list[str] = []
    trials = Trials("classification", "accuracy", True, tmp_path / "unused.log", said.append)
    for accuracy in (0.875, 0.75):
        record = log_record({**RESULT, "metric_for_logging": {"accuracy": accuracy}})
        assert record is not None
        trials.take(record)
    assert said == [
        "trial 0: LightGBM accuracy=0.8750  best so far 0.8750 (trial 0)",
        "trial 1: LightGBM accuracy=0.7500  best so far 0.8750 (trial 0)",
    ]
    assert trials.seen[1].hyperparameters == {"n_estimators": 4, "num_leaves": 4, "learning_rate": 0.1}
