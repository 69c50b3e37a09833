"""AutoML forecasting, its search run in this process (what the job's one process runs): several
series as a calendar regression validated on the latest times, one regular series with FLAML's
own forecasting; each best model an MLflow model that forecasts the test rows."""

from __future__ import annotations

import argparse
import datetime
import math
from pathlib import Path

import pytest

from distrun.automl_search.run import run
from distrun.spec.automl_models import AutoMLJob
from support.automl_data import write_mltable

START = datetime.date(2024, 1, 1)


def _sales(days: int, stores: int, offset: int = 0) -> list[list[object]]:
    """Rows of (day, store, price, sales): weekly seasonality per store, sales falling with price."""
    rows = []
    for day in range(offset, offset + days):
        for store in range(stores):
            price = 2 + (day % 3) * 0.5
            sales = 100 + 30 * store + 20 * math.sin(day * 2 * math.pi / 7) - 10 * price
            rows.append([(START + datetime.timedelta(days=day)).isoformat(), store, price, round(sales, 2)])
    return rows


def _forecast(tmp_path: Path, stores: int, ids: list[str]) -> dict:
    columns = ["day", "store", "price", "sales"]
    train = write_mltable(tmp_path / "train", columns, _sales(60, stores))
    test = write_mltable(tmp_path / "test", columns, _sales(7, stores, offset=60))
    job = AutoMLJob.model_validate(
        {
            "task": "forecasting",
            "target_column_name": "sales",
            "training_data": {"path": str(train), "type": "mltable"},
            "test_data": {"path": str(test), "type": "mltable"},
            "forecasting": {"time_column_name": "day", "forecast_horizon": 7, "time_series_id_column_names": ids},
            "limits": {"timeout_minutes": 0.05, "max_trials": 2},
            "training": {"allowed_training_algorithms": ["light_gbm", "random_forest"]},
        }
    )
    args = argparse.Namespace(
        training_data=str(train),
        validation_data=None,
        test_data=str(test),
        best_model=str(tmp_path / "model"),
        leaderboard=str(tmp_path / "board"),
    )
    return run(job, args)


@pytest.mark.slow
def test_several_series_are_forecast_by_a_calendar_regression_whose_model_scores_the_test_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _forecast(tmp_path, stores=3, ids=["store"])
    assert "several series (time_series_id_column_names)" in capsys.readouterr().out
    assert result["best"]["algorithm"] in ("LightGBM", "RandomForest")
    assert 0 <= result["test_metrics"]["normalized_root_mean_squared_error"] < 1
    import mlflow.pyfunc
    import pandas as pd

    test = pd.read_csv(tmp_path / "test" / "data.csv")
    forecast = mlflow.pyfunc.load_model(str(tmp_path / "model")).predict(test.drop(columns=["sales"]))
    assert len(forecast) == len(test) and all(math.isfinite(value) for value in forecast)
    # Azure ML's notebooks call the loaded model's forecast(): the same forecasts, and as a column.
    import mlflow.sklearn

    values, table = mlflow.sklearn.load_model(str(tmp_path / "model")).forecast(
        test.drop(columns=["sales"]), ignore_data_errors=True
    )
    assert list(values) == list(forecast) and list(table["_automl_target_col"]) == list(forecast)


@pytest.mark.slow
def test_one_regular_series_is_forecast_by_flamls_own_forecasting(tmp_path: Path) -> None:
    result = _forecast(tmp_path, stores=1, ids=[])
    # FLAML's forecasting adds its own lags to a trial's hyperparameters; a regression has none.
    assert "lags" in result["best"]["hyperparameters"]
    assert math.isfinite(result["test_metrics"]["normalized_root_mean_squared_error"])
