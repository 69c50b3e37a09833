"""azure-ai-ml's AutoML jobs for tables: `automl.classification(...)`, `regression`, `forecasting`,
with `set_limits`, `set_training`, `set_featurization` and `set_forecast_settings`.

The job holds what the user gave as Azure ML's entity does and becomes the `type: automl`
document a job file would hold when it is submitted (`ml_client.jobs.create_or_update`) or is a
step of an `@pipeline` function; it is checked and run as that file would be
(`distrun.loading.automl_loader`).
"""

from __future__ import annotations

import copy
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.job_header import JobHeader
from distrun.sdk.notices import caller_position
from distrun.sdk.operations import JobSource, python_source
from distrun.sdk.plain import AttrDict, path_text, to_data

DATA_KEYS = ("training_data", "validation_data", "test_data")
_SETTINGS = (
    "compute",
    "log_verbosity",
    "target_column_name",
    "primary_metric",
    "positive_label",
    "validation_data_size",
    "test_data_size",
    "n_cross_validations",
    "cv_split_column_names",
    "weight_column_name",
)
# set_training's arguments that azure-ai-ml also takes when the job is made.
_TRAINING = ("enable_model_explainability", "enable_onnx_compatible_models", "enable_dnn_training")


class AutoMLSource(JobSource):
    """An AutoML job as plain data: loaded as a `type: automl` file is."""

    def load(self, overrides: list[str] | tuple[str, ...] = ()) -> Any:
        from distrun.loading.automl_loader import load_automl_data
        from distrun.spec.source_map import SourceMap

        smap = SourceMap(self.source, dict(self.positions))
        return load_automl_data(copy.deepcopy(self.data), self.base_dir, self.source, overrides, smap)


class AutoMLJob(JobHeader):
    """An AutoML job for a table (`azure.ai.ml.automl` ClassificationJob, RegressionJob, ForecastingJob)."""

    type = "automl"

    def __init__(self, task: str, **settings: Any) -> None:
        self.task = task
        self._set_header(
            name=settings.pop("name", None),
            display_name=settings.pop("display_name", None),
            experiment_name=settings.pop("experiment_name", None),
            description=settings.pop("description", None),
            tags=settings.pop("tags", None),
            properties=settings.pop("properties", None),
        )
        self.inputs: dict[str, Any] = {key: settings.pop(key) for key in DATA_KEYS if settings.get(key) is not None}
        self.outputs: Any = dict(settings.pop("outputs", None) or {"best_model": {"type": "mlflow_model"}})
        self.limits: dict[str, Any] = {}
        self.training: dict[str, Any] = {key: settings.pop(key) for key in _TRAINING if key in settings}
        self.featurization: dict[str, Any] = {}
        self.forecasting: dict[str, Any] = {}
        self.settings = {key: settings.pop(key) for key in _SETTINGS if settings.get(key) is not None}
        self._unknown = settings  # said when the job is checked, as a file's unknown keys are
        self._base_dir = current_folder()
        self._source_where = caller_position()
        self._join_pipeline()

    # ------------------------------------------------------------ azure-ai-ml's setters

    def set_limits(self, **limits: Any) -> None:
        """timeout_minutes, trial_timeout_minutes, max_trials, max_concurrent_trials,
        max_cores_per_trial, max_nodes, enable_early_termination, exit_score."""
        self.limits.update({key: value for key, value in limits.items() if value is not None})

    def set_training(self, **training: Any) -> None:
        """allowed_training_algorithms, blocked_training_algorithms, enable_stack_ensemble,
        enable_vote_ensemble, enable_model_explainability, ..."""
        self.training.update({key: _names(value) for key, value in training.items() if value is not None})

    def set_featurization(self, **featurization: Any) -> None:
        """mode, blocked_transformers, column_name_and_types, transformer_params, ..."""
        self.featurization.update({key: value for key, value in featurization.items() if value is not None})

    def set_forecast_settings(self, **forecasting: Any) -> None:
        """time_column_name, forecast_horizon, time_series_id_column_names, target_lags,
        target_rolling_window_size, frequency, ..."""
        self.forecasting.update({key: value for key, value in forecasting.items() if value is not None})

    def set_data(self, **data: Any) -> None:
        """training_data, target_column_name, validation_data, ..., as the constructor takes them."""
        self.inputs.update({key: data.pop(key) for key in DATA_KEYS if data.get(key) is not None})
        self.settings.update({key: value for key, value in data.items() if value is not None})

    # ------------------------------------------------------------ as plain data

    def _to_data(self) -> dict[str, Any]:
        data = {**self._step_keys(), **{key: _data_input(value) for key, value in self.inputs.items()}}
        data["outputs"] = {key: None if value is None else to_data(value) for key, value in self.outputs.items()}
        return data

    def _step_keys(self) -> dict[str, Any]:
        """The job's keys but its data (a pipeline step binds that as its inputs)."""
        data: dict[str, Any] = {"type": "automl", "task": self.task}
        header = ("name", "display_name", "experiment_name", "description")
        data.update({key: getattr(self, key) for key in header if getattr(self, key) is not None})
        if self.tags:
            data["tags"] = dict(self.tags)
        data.update(self.settings)
        for key in ("limits", "training", "featurization", "forecasting"):
            if getattr(self, key):
                data[key] = to_data(getattr(self, key))
        data.update(self._unknown)
        return data

    def _job_source(self) -> AutoMLSource:
        source = python_source(self._to_data(), self._base_dir, self._source_where)
        return AutoMLSource(source.data, source.base_dir, source.source, source.positions)

    def _join_pipeline(self) -> None:
        """Made inside an `@pipeline` function: a step of it, whose `outputs.best_model` later steps read."""
        from distrun.sdk.pipeline_nodes import NodeOutputs, building

        pipeline = building()
        if pipeline is None:
            return
        self.outputs = NodeOutputs(self, {k: None if v is None else to_data(v) for k, v in self.outputs.items()})
        pipeline.add(self)

    def _name_hint(self) -> str:
        return f"{self.task}_automl"

    def __repr__(self) -> str:
        return f"AutoMLJob(task={self.task!r}, name={self.name!r}, status={self.status!r})"


def _data_input(value: Any) -> Any:
    data = to_data(value)
    if isinstance(data, dict) and "path" in data:
        data = {**data, "path": path_text(data["path"])}
    return data


def _names(value: Any) -> Any:
    """Algorithm names given as azure-ai-ml's enums (`ClassificationModels.LOGISTIC_REGRESSION`) or text."""
    if isinstance(value, (list, tuple)):
        return [str(getattr(item, "value", item)) for item in value]
    return value


class ColumnTransformer(AttrDict):
    """`azure.ai.ml.automl.ColumnTransformer`: a transformer's `fields` and `parameters`."""

    def __init__(self, *, fields: list[str] | None = None, parameters: dict[str, Any] | None = None) -> None:
        super().__init__(fields=list(fields or []), parameters=dict(parameters or {}))


def classification(**settings: Any) -> AutoMLJob:
    return AutoMLJob("classification", **settings)


def regression(**settings: Any) -> AutoMLJob:
    return AutoMLJob("regression", **settings)


def forecasting(*, forecasting_settings: dict[str, Any] | None = None, **settings: Any) -> AutoMLJob:
    job = AutoMLJob("forecasting", **settings)
    if forecasting_settings:
        job.set_forecast_settings(**dict(forecasting_settings))
    return job
