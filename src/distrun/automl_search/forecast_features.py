"""Forecasting several series at once (`time_series_id_column_names`), or one without a regular
frequency, which FLAML's own forecasting (one regular series) does not take: a regression over
the time's calendar features and the series' ids. The best model carries the same features
(`CalendarModel`), so the MLflow model scores a table with the training columns; this module is
pickled with it by value (the model loads without distrun)."""

from __future__ import annotations

from typing import Any

import pandas as pd

# The column of Azure ML's forecasting model's transformed table that holds the forecast.
FORECAST_COLUMN = "_automl_target_col"
PARTS = ("year", "month", "day", "dayofweek", "dayofyear", "hour")


def calendar_features(frame: pd.DataFrame, time_column: str, id_columns: list[str]) -> pd.DataFrame:
    """The frame with its time column replaced by calendar parts and its ids as categories."""
    frame = frame.copy()
    when = pd.to_datetime(frame.pop(time_column))
    for part in PARTS:
        frame[f"{time_column}_{part}"] = getattr(when.dt, part).astype(int)
    frame[f"{time_column}_days"] = (when - pd.Timestamp("1970-01-01")).dt.days.astype(int)
    for column in id_columns:
        if column in frame:
            frame[column] = frame[column].astype(str).astype("category")
    return frame


class CalendarModel:
    """FLAML's model of a calendar regression, scoring frames that still hold the time column."""

    def __init__(self, automl: Any, time_column: str, id_columns: list[str]) -> None:
        self.automl, self.time_column, self.id_columns = automl, time_column, id_columns

    def predict(self, frame: pd.DataFrame) -> Any:
        return self.automl.predict(calendar_features(frame, self.time_column, self.id_columns))

    def forecast(self, X_pred: pd.DataFrame, y_pred: Any = None, ignore_data_errors: bool = False) -> tuple[Any, Any]:
        """Azure ML's forecasting model call, as its notebooks make it on a loaded model: the
        forecasts and the table given with them as `_automl_target_col`. A regression over
        calendar features needs no history before the rows asked for, so `y_pred` (Azure's way
        to mark the rows to forecast) and `ignore_data_errors` change nothing here."""
        values = self.predict(X_pred)
        table = X_pred.copy()
        table[FORECAST_COLUMN] = values
        return values, table


def last_periods(frame: pd.DataFrame, time_column: str, periods: int) -> tuple[pd.Index, pd.Index]:
    """Rows before and within the last `periods` distinct times: Azure ML validates a forecast
    on the latest times, never on a random sample."""
    times = pd.to_datetime(frame[time_column])
    cut = sorted(times.unique())[-min(periods, max(1, times.nunique() - 1))]
    return frame.index[times < cut], frame.index[times >= cut]


def regular(times: pd.Series) -> bool:
    """A single series FLAML's forecasting takes: unique times at a frequency pandas can name."""
    ordered = pd.to_datetime(times).sort_values()
    return ordered.is_unique and len(ordered) >= 3 and pd.infer_freq(ordered) is not None
