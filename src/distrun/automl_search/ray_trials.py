"""The trials of a search on a Ray cluster, as each ends. There FLAML runs its trials through Ray
Tune and writes its training log only once Ray Tune's run is over, so the log says nothing while
the search runs. Ray Tune's own hooks, run in this process as each trial ends, give the trial's
result instead: one line per trial and its child run as it ends, as on local compute, and
`exit_score` stops the remaining trials."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distrun.automl_search.trials import Trials

# Keys of FLAML's trial config that are not hyperparameters of the estimator.
NOT_HYPERPARAMETERS = ("learner", "_choice_")


def log_record(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Ray Tune trial's last result in the shape of a FLAML training log line; None for a trial
    FLAML did not fit (its memory limit) or that reported nothing."""
    config = result.get("config") or {}
    chosen = dict(config.get("ml", config))
    learner = chosen.get("learner")
    loss = result.get("val_loss")
    if learner is None or loss is None or result.get("wall_clock_time") is None:
        return None
    for key in NOT_HYPERPARAMETERS:
        chosen.pop(key, None)
    if "FLAML_sample_size" in config:
        chosen["FLAML_sample_size"] = config["FLAML_sample_size"]
    return {
        "learner": learner,
        "validation_loss": float(loss),
        "logged_metric": result.get("metric_for_logging"),
        "config": chosen,
        "trial_time": result.get("time_total_s") or 0.0,
    }


def tune_hooks(search_trials: Trials) -> dict[str, Any]:
    """The arguments of `ray.tune.run` (through FLAML's `use_ray`) that report each trial as it
    ends and stop the search once `search_trials` asks to (its exit score). Ray Tune passes its
    hooks' arguments by name: theirs are Ray Tune's."""
    from ray.tune import Callback, Stopper

    class TrialEnded(Callback):  # type: ignore[misc]  # Ray's class, untyped
        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            record = log_record(trial.last_result or {})
            if record is not None:
                search_trials.take(record)

        def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
            search_trials.say(f"search ended: {len(search_trials.seen)} trials")

    class ExitScore(Stopper):  # type: ignore[misc]
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return search_trials.stopped

    return {"callbacks": [TrialEnded()], "stop": ExitScore()}
