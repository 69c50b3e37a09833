"""Azure ML's AutoML job (`type: automl`) for tables, as distrun runs it with FLAML.

The keys are Azure ML's (azure-ai-docs `reference-automated-ml-forecasting.md` and its siblings
for classification and regression); a key the schema does not know is refused as in any job.
Image and NLP tasks are refused by the loader in one line (`REFUSED_TASKS`): their models are
downloaded from hubs at run time and need GPUs. What distrun does with each setting, and which it
cannot honour exactly, is `distrun.spec.automl_names`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from distrun.spec.models import DataInput, JobHeader, OutputSpec, StrictModel, Whole

# The job's settings, as JSON, for the search process (`distrun.automl_search`).
# The Ray cluster a rank runs in (its GCS address), set by the Ray backend: an AutoML search with
# max_concurrent_trials > 1 runs its trials across that cluster.
RAY_CLUSTER_VARIABLE = "DISTRUN_RAY_CLUSTER"
TASK_TAG = "distrun.automl.task"  # an AutoML job's record says its task
SETTINGS_VARIABLE = "AUTOML_JOB_SETTINGS"
TABLE_TASKS = ("classification", "regression", "forecasting")
# Azure ML's other AutoML tasks, refused in one line each: what they are.
REFUSED_TASKS = {
    "image_classification": "an image task",
    "image_classification_multilabel": "an image task",
    "image_object_detection": "an image task",
    "image_instance_segmentation": "an image task",
    "text_classification": "an NLP task",
    "text_classification_multilabel": "an NLP task",
    "text_ner": "an NLP task",
}
REFUSED_WHY = (
    "distrun runs AutoML for tables (classification, regression, forecasting) with FLAML; image and NLP "
    "tasks fine-tune models downloaded from model hubs at run time and need GPUs"
)


class AutoMLLimits(StrictModel):
    timeout_minutes: float | None = Field(None, gt=0, allow_inf_nan=False)
    trial_timeout_minutes: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_trials: Whole | None = Field(None, ge=1)
    max_concurrent_trials: Whole | None = Field(None, ge=1)
    max_cores_per_trial: int | None = None
    max_nodes: Whole | None = Field(None, ge=1)
    enable_early_termination: bool | None = None
    exit_score: float | None = Field(None, allow_inf_nan=False)


class StackEnsembleSettings(StrictModel):
    stack_meta_learner_type: str | None = None
    stack_meta_learner_train_percentage: float | None = None
    stack_meta_learner_kwargs: dict[str, Any] | None = None


class AutoMLTraining(StrictModel):
    allowed_training_algorithms: list[str] | None = None
    blocked_training_algorithms: list[str] | None = None
    enable_stack_ensemble: bool | None = None
    enable_vote_ensemble: bool | None = None
    enable_model_explainability: bool | None = None
    enable_onnx_compatible_models: bool | None = None
    enable_dnn_training: bool | None = None
    ensemble_model_download_timeout_minutes: float | None = None
    stack_ensemble_settings: StackEnsembleSettings | None = None
    training_mode: Literal["auto", "distributed", "non_distributed"] | None = None


class ColumnTransformer(StrictModel):
    fields: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)


class AutoMLFeaturization(StrictModel):
    mode: Literal["auto", "off", "custom"] = "auto"
    blocked_transformers: list[str] | None = None
    column_name_and_types: dict[str, str] | None = None
    transformer_params: dict[str, list[ColumnTransformer]] | None = None
    dataset_language: str | None = None
    enable_dnn_featurization: bool | None = None


class ForecastingSettings(StrictModel):
    time_column_name: str
    forecast_horizon: Whole | Literal["auto"] | None = None
    time_series_id_column_names: str | list[str] | None = None
    target_lags: Whole | list[Whole] | Literal["auto"] | None = None
    target_rolling_window_size: Whole | Literal["auto"] | None = None
    frequency: str | None = None
    feature_lags: Literal["auto", "none"] | None = None
    country_or_region_for_holidays: str | None = None
    seasonality: Whole | Literal["auto"] | None = None
    short_series_handling_config: Literal["auto", "pad", "drop"] | None = None
    target_aggregate_function: Literal["sum", "max", "min", "mean"] | None = None
    use_stl: Literal["season", "season_trend"] | None = None
    cv_step_size: Whole | Literal["auto"] | None = None
    features_unknown_at_forecast_time: str | list[str] | None = None

    def id_columns(self) -> list[str]:
        found = self.time_series_id_column_names
        return [found] if isinstance(found, str) else list(found or [])


class AutoMLJob(JobHeader):
    """An Azure ML AutoML job (`type: automl`) for a table."""

    type: Literal["automl"] = "automl"
    tags: dict[str, str] = Field(default_factory=dict)
    task: Literal["classification", "regression", "forecasting"]
    compute: str | None = None
    log_verbosity: str | None = None
    training_data: DataInput
    validation_data: DataInput | None = None
    test_data: DataInput | None = None
    target_column_name: str = Field(min_length=1)
    primary_metric: str | None = None
    positive_label: str | int | bool | None = None
    validation_data_size: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False)
    test_data_size: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False)
    n_cross_validations: Whole | Literal["auto"] | None = None
    cv_split_column_names: list[str] | None = None
    weight_column_name: str | None = None
    limits: AutoMLLimits = Field(default_factory=AutoMLLimits)
    training: AutoMLTraining = Field(default_factory=AutoMLTraining)
    featurization: AutoMLFeaturization = Field(default_factory=AutoMLFeaturization)
    forecasting: ForecastingSettings | None = None
    outputs: dict[str, OutputSpec | None] = Field(default_factory=dict)
    identity: dict[str, Any] | None = None
    queue_settings: dict[str, Any] | None = None
    resources: Any = None  # an Azure ML cloud setting (said, not used); the examples even write it as text
