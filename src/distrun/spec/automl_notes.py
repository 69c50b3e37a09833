"""What distrun says once about an AutoML job's settings that FLAML cannot honour exactly, each
with what distrun does instead. The search prints them before its first trial."""

from __future__ import annotations

from distrun.spec.automl_models import AutoMLJob
from distrun.spec.automl_names import estimators

# Imputer strategies distrun applies before the search (`transformer_params.imputer`).
IMPUTER_STRATEGIES = ("mean", "median", "most_frequent", "constant", "ffill")
COLUMN_TYPES = ("categorical", "numeric", "text", "datetime")


def setting_notes(job: AutoMLJob, on_ray_cluster: bool = False) -> list[str]:
    """`on_ray_cluster`: the search runs in a Ray cluster, where max_concurrent_trials is honoured."""
    said = estimators(job)[1]
    training, limits, features = job.training, job.limits, job.featurization
    if training.enable_stack_ensemble or training.enable_vote_ensemble:
        said.append("ensembles are not built: the best model is the best single trial's")
    if training.enable_model_explainability:
        said.append("model explanations are not computed (enable_model_explainability)")
    if training.enable_onnx_compatible_models:
        said.append("the best model is saved as an MLflow model, not ONNX")
    if training.enable_dnn_training or features.enable_dnn_featurization:
        said.append("no deep learning models or featurizers: FLAML's table models only")
    if limits.max_concurrent_trials and limits.max_concurrent_trials > 1 and not on_ray_cluster:
        said.append(
            "max_concurrent_trials: trials run one at a time, each on the job's cores "
            "(on a Ray target: across its cluster)"
        )
    if limits.max_nodes and limits.max_nodes > 1:
        said.append("max_nodes: the search runs on one node")
    if features.mode == "off":
        said.append("featurization off: FLAML still encodes text columns as categories, as its models need")
    if features.blocked_transformers:
        said.append("blocked_transformers: FLAML does not use Azure ML's transformers, so none is added to block")
    said += _column_notes(job)
    if job.cv_split_column_names:
        said.append("cv_split_column_names is not honoured: folds are split as n_cross_validations says")
    for key in ("identity", "queue_settings", "resources"):
        if getattr(job, key) is not None:
            said.append(f"{key} is an Azure ML cloud setting: not used")
    said += _forecast_notes(job)
    return said


def _column_notes(job: AutoMLJob) -> list[str]:
    said = []
    for kind, transformers in (job.featurization.transformer_params or {}).items():
        if kind.lower() != "imputer":
            said.append(f"transformer_params.{kind} is not honoured: only imputer parameters are")
            continue
        for transformer in transformers:
            strategy = str(transformer.parameters.get("strategy", "mean"))
            if strategy not in IMPUTER_STRATEGIES:
                said.append(f"imputer strategy `{strategy}` is not one of {', '.join(IMPUTER_STRATEGIES)}: not applied")
    for column, kind in (job.featurization.column_name_and_types or {}).items():
        if kind.lower() not in COLUMN_TYPES:
            said.append(f"column type `{kind}` of `{column}` is not one of {', '.join(COLUMN_TYPES)}: left as read")
    return said


def _forecast_notes(job: AutoMLJob) -> list[str]:
    settings = job.forecasting
    if settings is None:
        return []
    said = []
    ignored = [
        key
        for key in (
            "target_lags",
            "target_rolling_window_size",
            "feature_lags",
            "country_or_region_for_holidays",
            "seasonality",
            "use_stl",
            "cv_step_size",
            "short_series_handling_config",
            "target_aggregate_function",
            "features_unknown_at_forecast_time",
        )
        if getattr(settings, key) not in (None, "auto", "none")
    ]
    if ignored:
        said.append(f"forecasting {', '.join(ignored)}: FLAML makes its own time features and lags")
    if settings.id_columns():
        said.append(
            "several series (time_series_id_column_names): forecast by a regression over calendar features and "
            "the series ids, validated on the last forecast_horizon times (FLAML's forecasting takes one series)"
        )
    if settings.forecast_horizon in (None, "auto"):
        said.append("forecast_horizon auto: distrun forecasts 1 period ahead")
    return said
