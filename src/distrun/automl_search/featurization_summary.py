"""The best model's featurization in the two files Azure ML's AutoML puts beside its model in the
best child run's `outputs/` and its notebooks print: `engineered_feature_names.json` (the
features the estimator was fit on) and `featurization_summary.json` (a record per raw column:
RawFeatureName, TypeDetected, Dropped, EngineeredFeatureCount, Transformations).

The featurization described is FLAML's (categories as ordinal codes, missing numbers by the
median, date-times split into parts) and, for a forecast of several series, distrun's calendar
features: the same layout, not Azure ML's own transformers."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

ENGINEERED_FILE = "engineered_feature_names.json"
SUMMARY_FILE = "featurization_summary.json"


def engineered_names(model: Any) -> list[str]:
    """The features the best estimator was fit on, as FLAML recorded them."""
    names = getattr(_automl(model), "feature_names_in_", None)
    return [str(name) for name in names] if names is not None else []


def files(model: Any, example: pd.DataFrame, time_column: str | None) -> dict[str, str]:
    """Both files' names and contents."""
    return {
        ENGINEERED_FILE: json.dumps(engineered_names(model)),
        SUMMARY_FILE: json.dumps(summary(model, example, time_column), indent=1),
    }


def summary(model: Any, example: pd.DataFrame, time_column: str | None = None) -> list[dict[str, Any]]:
    """A record per raw training column, in Azure ML's field names."""
    engineered = engineered_names(model)
    transformer = getattr(_automl(model), "feature_transformer", None)
    categorical = set(getattr(transformer, "_cat_columns", None) or [])
    numeric = set(getattr(transformer, "_num_columns", None) or [])
    dates = set(getattr(transformer, "_datetime_columns", None) or [])
    split = dates | ({time_column} if time_column else set())  # columns made into several features
    records = []
    for column in map(str, example.columns):
        count = sum(1 for name in engineered if name == column or (column in split and _part_of(name, column)))
        records.append(
            {
                "RawFeatureName": column,
                "TypeDetected": _type(example[column], column in categorical, column in split),
                "Dropped": "No" if count else "Yes",
                "EngineeredFeatureCount": count,
                "Transformations": ["CalendarFeatures"]
                if column == time_column
                else _transformations(column, count, categorical, numeric, dates),
            }
        )
    return records


def _automl(model: Any) -> Any:
    return getattr(model, "automl", model)  # a calendar regression's model holds FLAML's


def _part_of(name: str, column: str) -> bool:
    # FLAML names a date-time's parts `month_COL`; distrun's calendar features are `COL_month`.
    return name.startswith(f"{column}_") or name.endswith(f"_{column}")


def _type(values: pd.Series, categorical: bool, date: bool) -> str:
    if date or pd.api.types.is_datetime64_any_dtype(values):
        return "DateTime"
    if categorical or not pd.api.types.is_numeric_dtype(values):
        return "Categorical"
    return "Numeric"


def _transformations(column: str, count: int, categorical: set[str], numeric: set[str], dates: set[str]) -> list[str]:
    if not count:
        return []
    if column in dates:
        return ["DateTimeParts", "MedianImputer"]
    if column in categorical:
        return ["MissingAsCategory", "OrdinalEncoder"]
    if column in numeric:
        return ["MedianImputer"]
    return []
