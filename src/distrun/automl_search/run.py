"""The search process: the job's settings and tables in, the trials, the best model, the
leaderboard and the test data's metrics out. Problems with the data are said in one line with a
hint (exit status 1), not as a traceback."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from distrun.automl_search.featurization_summary import files as featurization_files
from distrun.automl_search.forecast_features import CalendarModel, calendar_features, last_periods, regular
from distrun.automl_search.tables import SearchError, Table, featurized, held_out, read_table, split
from distrun.spec.automl_models import SETTINGS_VARIABLE, AutoMLJob
from distrun.spec.automl_names import primary_metric
from distrun.spec.automl_notes import setting_notes

LEADERBOARD_FILE = "leaderboard.json"


def say(line: str) -> None:
    print(line, flush=True)


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m distrun.automl_search")
    for name in ("training_data", "validation_data", "test_data", "best_model", "leaderboard"):
        parser.add_argument(f"--{name}", required=name in ("training_data", "best_model"))
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    try:
        job = AutoMLJob.model_validate(json.loads(os.environ[SETTINGS_VARIABLE]))
        result = run(job, args)
    except SearchError as exc:
        print(f"error: {exc.message}" + (f"\n    hint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 1
    except ImportError as exc:
        print(f"error: {exc}\n    hint: pip install 'distrun[automl]'", file=sys.stderr)
        return 1
    return 0 if result.get("best") else 1


def run(job: AutoMLJob, args: argparse.Namespace) -> dict[str, Any]:
    from distrun.automl_search.model import save_best_model
    from distrun.automl_search.search import on_ray_cluster, search

    for note in setting_notes(job, on_ray_cluster(job)):
        say(f"note: {note}")
    frame = featurized(read_table(args.training_data), job)
    test_frame = featurized(read_table(args.test_data), job) if args.test_data else None
    if test_frame is None and job.test_data_size:
        frame, test_frame = held_out(frame, job.test_data_size, job)
    train = split(frame, job)
    given = split(featurized(read_table(args.validation_data), job), job) if args.validation_data else None
    metric = primary_metric(job)
    say(f"AutoML {job.task}: {len(train.y)} training rows, primary metric {metric.azure}")
    example = train.X  # what the best model scores: the training columns as read
    calendar = by_calendar(job, train)
    if calendar:
        train, given = calendar_tables(job, train, given)
    searched = search(job, train, given, say, calendar)
    model = searched.automl
    if calendar and job.forecasting is not None:
        model = CalendarModel(searched.automl, job.forecasting.time_column_name, job.forecasting.id_columns())
    best = searched.trials.best()
    result: dict[str, Any] = {
        "task": job.task,
        "primary_metric": metric.azure,
        "best": best.row() if best else None,
        "leaderboard": searched.trials.leaderboard(),
    }
    saved, described = None, {}
    if best is None or searched.automl.model is None:
        say("no trial completed: no best model")
    else:
        saved = Path(args.best_model)
        save_best_model(model, saved, example)
        described = featurization_files(model, example, job.forecasting.time_column_name if job.forecasting else None)
        say(f"best: trial {best.number} {best.algorithm} {metric.azure}={best.score:.4f}")
    if best is not None and test_frame is not None:
        test = split(test_frame, job)
        result["test_metrics"] = _test_metrics(job, searched, model, test)
        value = result["test_metrics"].get(metric.azure, math.nan)
        say(f"test data: {metric.azure}={value:.4f}")
    if searched.trials.runs is not None:
        searched.trials.runs.finish(best, result["leaderboard"], saved, described)
    if args.leaderboard:
        Path(args.leaderboard).mkdir(parents=True, exist_ok=True)
        (Path(args.leaderboard) / LEADERBOARD_FILE).write_text(
            json.dumps(result, indent=1, default=str), encoding="utf-8"
        )
    return result


def _test_metrics(job: AutoMLJob, searched: Any, model: Any, test: Table) -> dict[str, float]:
    from distrun.automl_search.metrics import task_metrics

    return task_metrics(job.task, test.y, model, test.X, searched.labels, searched.target_range)


def by_calendar(job: AutoMLJob, train: Table) -> bool:
    """A forecast FLAML's own forecasting cannot make: several series, or irregular times."""
    settings = job.forecasting
    if job.task != "forecasting" or settings is None:
        return False
    if settings.id_columns():
        return True
    if regular(train.X[settings.time_column_name]):
        return False
    say("note: the times are not one regular series: forecasting by a regression over calendar features")
    return True


def calendar_tables(job: AutoMLJob, train: Table, given: Table | None) -> tuple[Table, Table]:
    """The tables of a calendar regression; without validation data, the last forecast_horizon
    times of the training data validate it."""
    assert job.forecasting is not None
    time_column, ids = job.forecasting.time_column_name, job.forecasting.id_columns()
    horizon = job.forecasting.forecast_horizon if isinstance(job.forecasting.forecast_horizon, int) else 1
    if given is None:
        before, after = last_periods(train.X, time_column, horizon)
        given = Table(train.X.loc[after], train.y.loc[after])
        weight = None if train.weight is None else train.weight.loc[before]
        train = Table(train.X.loc[before], train.y.loc[before], weight)
    return (
        Table(calendar_features(train.X, time_column, ids), train.y, train.weight),
        Table(calendar_features(given.X, time_column, ids), given.y),
    )
