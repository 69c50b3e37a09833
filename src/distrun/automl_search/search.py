"""One AutoML search with FLAML, as the job's settings say: the estimators and metric in FLAML's
words (`distrun.spec.automl_names`), the limits (time budget, trials, per-trial time, exit score,
early termination), the validation Azure ML would use, and the job's cores: one trial at a time,
or `max_concurrent_trials` at a time across the Ray cluster the search runs in."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.automl_search.metrics import AzureMetric
from distrun.automl_search.tables import Table, validation
from distrun.automl_search.trials import Follower, Trials, child_runs
from distrun.spec.automl_models import RAY_CLUSTER_VARIABLE, AutoMLJob
from distrun.spec.automl_names import estimators, primary_metric

FLAML_TASKS = {"classification": "classification", "regression": "regression", "forecasting": "ts_forecast"}
# Azure ML's max_trials when none is given.
DEFAULT_MAX_TRIALS = 1000


@dataclass
class Searched:
    automl: Any  # FLAML's AutoML, its best model refit
    trials: Trials
    target_range: float
    labels: list[Any]


def cores() -> int:
    """The cores this process may use (the job's, where its compute limits them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def on_ray_cluster(job: AutoMLJob) -> bool:
    """Whether the trials run concurrently across the Ray cluster this process runs in."""
    concurrent = job.limits.max_concurrent_trials
    return bool(concurrent and concurrent > 1 and os.environ.get(RAY_CLUSTER_VARIABLE))


def fit_settings(
    job: AutoMLJob, train: Table, given_validation: Table | None, calendar: bool = False
) -> dict[str, Any]:
    """FLAML's `fit` arguments for the job (the data aside)."""
    limits = job.limits
    metric = primary_metric(job)
    span = float(train.y.max() - train.y.min()) if job.task != "classification" else 1.0
    chosen, _ = estimators(job)
    settings: dict[str, Any] = {
        "task": "regression" if calendar else FLAML_TASKS[job.task],
        "metric": AzureMetric(job.task, metric.azure, metric.greater_is_better, span),
        "estimator_list": chosen,
        "time_budget": limits.timeout_minutes * 60 if limits.timeout_minutes else -1,
        "max_iter": limits.max_trials or DEFAULT_MAX_TRIALS,
        "early_stop": limits.enable_early_termination is not False,
        "seed": 0,
        # FLAML's own log of each iteration only when asked for: distrun says a line per trial.
        "verbose": 3 if job.log_verbosity == "debug" else 0,
        "retrain_full": True,
        "mlflow_logging": False,  # distrun records each trial as a child run itself (trials.py)
        "log_type": "all",  # every trial in the training log (FLAML's default keeps only the improving ones)
        **validation(job, len(train.y), given_validation),
    }
    if limits.trial_timeout_minutes:
        settings["train_time_limit"] = limits.trial_timeout_minutes * 60
    per_trial = limits.max_cores_per_trial
    settings["n_jobs"] = per_trial if per_trial and per_trial > 0 else cores()
    if on_ray_cluster(job):  # trials spread over the Ray cluster, each on one core unless said
        settings.update(n_concurrent_trials=limits.max_concurrent_trials, use_ray=True)
        settings["n_jobs"] = per_trial if per_trial and per_trial > 0 else 1
    if train.weight is not None:
        settings["sample_weight"] = train.weight
    if job.task == "forecasting" and job.forecasting is not None and not calendar:
        horizon = job.forecasting.forecast_horizon
        settings["period"] = horizon if isinstance(horizon, int) else 1
        if job.forecasting.frequency:
            settings["freq"] = job.forecasting.frequency
    return settings


def search(
    job: AutoMLJob,
    train: Table,
    given_validation: Table | None,
    say: Callable[[str], None],
    calendar: bool = False,
) -> Searched:
    from flaml import AutoML

    settings = fit_settings(job, train, given_validation, calendar)
    metric = primary_metric(job)
    automl = AutoML()
    if settings.get("use_ray"):
        import ray

        ray.init(address=os.environ[RAY_CLUSTER_VARIABLE], ignore_reinit_error=True, log_to_driver=False)
        say(f"trials run {settings['n_concurrent_trials']} at a time across the Ray cluster")
    with tempfile.TemporaryDirectory(prefix="distrun-automl-") as folder:
        log = Path(folder) / "trials.log"
        trials = Trials(job.task, metric.azure, metric.greater_is_better, log, say, runs=child_runs(metric.azure))
        if job.limits.exit_score is not None:
            trials.on_score = _exit_score(automl, trials, job.limits.exit_score, metric.greater_is_better)
        if settings.get("use_ray"):
            from distrun.automl_search.ray_trials import tune_hooks

            # Ray Tune's results here, not in the user's ~/ray_results; each trial said as it ends
            # by Ray Tune's hooks (FLAML writes its log only when Ray Tune's run is over).
            settings["use_ray"] = {"storage_path": str(Path(folder) / "ray"), **tune_hooks(trials)}
            automl.fit(X_train=train.X, y_train=train.y, log_file_name=str(log), **settings)
        else:
            follower = Follower(trials)
            follower.start()
            try:
                automl.fit(X_train=train.X, y_train=train.y, log_file_name=str(log), **settings)
            finally:
                follower.stop()
        if trials.runs is not None:
            trials.runs.drain()
    classes = getattr(automl, "classes_", None) if job.task == "classification" else None
    labels = [] if classes is None else list(classes)
    return Searched(automl, trials, float(settings["metric"].target_range), labels)


def _exit_score(automl: Any, trials: Trials, exit_score: float, greater_is_better: bool) -> Callable[[float], None]:
    """`limits.exit_score`: once the best trial reaches it, FLAML's search loop ends after the
    trial in progress (its time budget is spent: FLAML has no stop call of its own); on a Ray
    cluster, Ray Tune stops the trials still running (`ray_trials`)."""

    def reached(best: float) -> None:
        if trials.stopped or not (best >= exit_score if greater_is_better else best <= exit_score):
            return
        trials.stopped = True
        trials.say(f"exit_score {exit_score} reached ({best:.4f}): no further trials")
        automl._state.time_budget = 0  # the loop's own end: time_from_start >= time_budget >= 0

    return reached
