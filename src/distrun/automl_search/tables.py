"""The AutoML job's tables: read from their MLTable folders (distrun's one reader,
`distrun.data.mltable`), typed and imputed as `featurization` says, split into features, target and
weights, and the validation Azure ML would use for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from distrun.spec.automl_models import AutoMLJob
from distrun.spec.automl_notes import IMPUTER_STRATEGIES

# Azure ML's validation when neither validation_data, validation_data_size nor n_cross_validations
# is given: a 10% holdout above 20,000 rows, else cross-validation (10 folds below 1,000 rows, 3 above).
LARGE_TABLE_ROWS = 20_000
SMALL_TABLE_ROWS = 1_000


@dataclass
class Table:
    X: pd.DataFrame
    y: pd.Series
    weight: pd.Series | None = None


def read_table(folder: str) -> pd.DataFrame:
    from distrun.data.mltable import MLTableError, read_dataframe

    try:
        return read_dataframe(folder)
    except MLTableError as exc:
        raise SearchError(
            str(exc), "the job's data inputs are MLTable folders (an `MLTable` file and its data)"
        ) from None


def featurized(frame: pd.DataFrame, job: AutoMLJob) -> pd.DataFrame:
    """Columns typed as `column_name_and_types` says and gaps filled as its imputers say (with
    `mode: off` nothing is changed)."""
    features = job.featurization
    if features.mode == "off":
        return frame
    frame = frame.copy()
    for column, kind in (features.column_name_and_types or {}).items():
        if column in frame:
            frame[column] = _typed(frame[column], kind.lower())
    for kind, transformers in (features.transformer_params or {}).items():
        if kind.lower() != "imputer":
            continue
        for transformer in transformers:
            strategy = str(transformer.parameters.get("strategy", "mean"))
            for column in transformer.fields:
                if column in frame and strategy in IMPUTER_STRATEGIES:
                    frame[column] = _imputed(frame[column], strategy, transformer.parameters.get("fill_value"))
    return frame


def _typed(column: pd.Series, kind: str) -> pd.Series:
    if kind == "categorical":
        return column.astype(str).astype("category")
    if kind == "numeric":
        return pd.to_numeric(column, errors="coerce")
    if kind == "datetime":
        return pd.to_datetime(column, errors="coerce")
    if kind == "text":
        return column.astype(str)
    return column


def _imputed(column: pd.Series, strategy: str, fill_value: Any) -> pd.Series:
    if strategy == "ffill":
        return column.ffill()
    if strategy == "constant":
        return column.fillna(fill_value if fill_value is not None else 0)
    if strategy == "most_frequent":
        mode = column.mode()
        return column.fillna(mode.iloc[0]) if len(mode) else column
    if not pd.api.types.is_numeric_dtype(column):
        return column
    return column.fillna(column.median() if strategy == "median" else column.mean())


def split(frame: pd.DataFrame, job: AutoMLJob) -> Table:
    """Features, target and weights; a row without a target is dropped (it cannot be scored)."""
    if job.target_column_name not in frame:
        raise SearchError(
            f"the training data has no column `{job.target_column_name}` (target_column_name)",
            f"its columns: {', '.join(map(str, frame.columns))}",
        )
    frame = frame[frame[job.target_column_name].notna()]
    weight = None
    if job.weight_column_name:
        if job.weight_column_name not in frame:
            raise SearchError(f"the training data has no column `{job.weight_column_name}` (weight_column_name)", "")
        weight = frame[job.weight_column_name].astype(float)
    dropped = [job.target_column_name] + ([job.weight_column_name] if job.weight_column_name else [])
    X = frame.drop(columns=dropped)
    if job.task == "forecasting" and job.forecasting is not None:
        time_column = job.forecasting.time_column_name
        if time_column not in X:
            raise SearchError(f"the training data has no column `{time_column}` (forecasting.time_column_name)", "")
        # FLAML reads the time from the first column.
        X = X[[time_column, *[c for c in X.columns if c != time_column]]]
        X[time_column] = pd.to_datetime(X[time_column])
    y = frame[job.target_column_name]
    if job.task != "classification":
        y = y.astype(float)
    return Table(
        X.reset_index(drop=True), y.reset_index(drop=True), None if weight is None else weight.reset_index(drop=True)
    )


def held_out(frame: pd.DataFrame, fraction: float, job: AutoMLJob) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`test_data_size`: the last rows of a time series, else a random fraction (seeded)."""
    if job.task == "forecasting":
        cut = len(frame) - max(1, round(len(frame) * fraction))
        return frame.iloc[:cut], frame.iloc[cut:]
    test = frame.sample(frac=fraction, random_state=0)
    return frame.drop(index=test.index), test


def validation(job: AutoMLJob, rows: int, given: Table | None) -> dict[str, Any]:
    """FLAML's fit arguments for the validation Azure ML would use."""
    if given is not None:
        return {"eval_method": "holdout", "X_val": given.X, "y_val": given.y}
    folds = job.n_cross_validations
    if isinstance(folds, int):
        return {"eval_method": "cv", "n_splits": folds}
    if job.validation_data_size:
        return {"eval_method": "holdout", "split_ratio": job.validation_data_size}
    if rows > LARGE_TABLE_ROWS:
        return {"eval_method": "holdout", "split_ratio": 0.1}
    return {"eval_method": "cv", "n_splits": 10 if rows < SMALL_TABLE_ROWS else 3}


class SearchError(Exception):
    """What the search says instead of a traceback: the message and a hint."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint
