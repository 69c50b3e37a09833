"""azure-ai-ml's AutoML enums (`ClassificationModels.LIGHT_GBM`, `RegressionPrimaryMetrics.R2_SCORE`,
...): text enums whose values are Azure ML's names, as `distrun.spec.automl_names` reads them."""

from __future__ import annotations

import re
from enum import Enum

from distrun.spec.automl_names import ALGORITHMS, METRICS

# Where azure-ai-ml splits a name otherwise than at its capitals.
_SPELLED = {"LightGBM": "LIGHT_GBM", "KNN": "KNN", "SGD": "SGD", "SVM": "SVM", "LinearSVM": "LINEAR_SVM"}
_SPELLED.update({"TCNForecaster": "TCN_FORECASTER", "XGBoostClassifier": "XG_BOOST_CLASSIFIER"})
_SPELLED.update({"XGBoostRegressor": "XG_BOOST_REGRESSOR", "AUC_weighted": "AUC_WEIGHTED"})


def _member(name: str) -> str:
    return _SPELLED.get(name) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def _enum(title: str, names: list[str]) -> type[Enum]:
    return Enum(title, {_member(name): name for name in names}, type=str)  # type: ignore[return-value]


def _models(task: str) -> list[str]:
    return [algorithm.azure for algorithm in ALGORITHMS if task in algorithm.tasks]


def _metrics(task: str) -> list[str]:
    return [found.azure for found in METRICS if task in found.tasks]


ClassificationModels = _enum("ClassificationModels", _models("classification"))
RegressionModels = _enum("RegressionModels", _models("regression"))
ForecastingModels = _enum("ForecastingModels", _models("forecasting"))
ClassificationPrimaryMetrics = _enum("ClassificationPrimaryMetrics", _metrics("classification"))
RegressionPrimaryMetrics = _enum("RegressionPrimaryMetrics", _metrics("regression"))
ForecastingPrimaryMetrics = _enum("ForecastingPrimaryMetrics", _metrics("forecasting"))
