"""Azure ML's AutoML names in FLAML's words: algorithms, primary metrics, and what distrun says
once about the settings it cannot honour exactly (docs/automl.md has the same tables).

Plain data and pure functions: the loader checks a job with them, the search (`distrun.automl_search`)
runs with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrun.spec.automl_models import AutoMLJob


@dataclass(frozen=True)
class Algorithm:
    azure: str  # Azure ML's name, as its leaderboard shows it
    flaml: tuple[str, ...]  # FLAML's estimators for it; () when FLAML has none
    tasks: tuple[str, ...]
    nearest: str = ""  # said when the FLAML estimator is only the nearest one


_CR = ("classification", "regression")
_RF = ("regression", "forecasting")
_ALL = ("classification", "regression", "forecasting")
ALGORITHMS = (
    Algorithm("LightGBM", ("lgbm",), _ALL),
    Algorithm("XGBoostClassifier", ("xgboost", "xgb_limitdepth"), ("classification",)),
    Algorithm("XGBoostRegressor", ("xgboost", "xgb_limitdepth"), _RF),
    Algorithm("RandomForest", ("rf",), _ALL),
    Algorithm("ExtremeRandomTrees", ("extra_tree",), _ALL),
    Algorithm("LogisticRegression", ("lrl1", "lrl2"), ("classification",)),
    Algorithm("KNN", ("kneighbor",), _CR),
    Algorithm("SGD", ("sgd",), _CR),
    Algorithm("LinearSVM", ("svc",), ("classification",)),
    Algorithm("SVM", ("svc",), ("classification",), "FLAML's linear SVC"),
    Algorithm("GradientBoosting", ("histgb",), _CR, "scikit-learn's histogram gradient boosting"),
    Algorithm("ElasticNet", ("enet",), ("regression",)),
    Algorithm("LassoLars", ("lassolars",), _RF),
    Algorithm("DecisionTree", (), _ALL),
    Algorithm("MultinomialNaiveBayes", (), ("classification",)),
    Algorithm("BernoulliNaiveBayes", (), ("classification",)),
    Algorithm("AutoArima", ("arima",), ("forecasting",), "ARIMA with FLAML's search over its orders"),
    Algorithm("Arimax", ("sarimax",), ("forecasting",)),
    Algorithm("Prophet", ("prophet",), ("forecasting",)),
    Algorithm("ExponentialSmoothing", ("holt-winters",), ("forecasting",)),
    Algorithm("Naive", ("naive",), ("forecasting",)),
    Algorithm("SeasonalNaive", ("snaive",), ("forecasting",)),
    Algorithm("Average", ("avg",), ("forecasting",)),
    Algorithm("SeasonalAverage", ("savg",), ("forecasting",)),
    Algorithm("TCNForecaster", (), ("forecasting",)),
)
# What runs when `allowed_training_algorithms` is not given (Azure ML's usual table models).
DEFAULT_ESTIMATORS = {
    "classification": ("lgbm", "rf", "xgboost", "extra_tree", "xgb_limitdepth", "lrl1"),
    "regression": ("lgbm", "rf", "xgboost", "extra_tree", "xgb_limitdepth"),
    "forecasting": ("lgbm", "rf", "xgboost", "extra_tree", "xgb_limitdepth"),
}


def _key(name: str) -> str:
    """`light_gbm`, `LightGBM`, `xg_boost_regressor` and `XGBoostRegressor` are one name each."""
    return name.replace("_", "").replace("-", "").lower()


_BY_KEY = {_key(a.azure): a for a in ALGORITHMS}


def algorithm(name: str) -> Algorithm | None:
    return _BY_KEY.get(_key(name))


def azure_name(estimator: str, task: str) -> str:
    """The Azure ML name a FLAML estimator is shown with."""
    for found in ALGORITHMS:
        if estimator in found.flaml and task in found.tasks and not found.nearest:
            return found.azure
    return next((found.azure for found in ALGORITHMS if estimator in found.flaml), estimator)


@dataclass(frozen=True)
class Metric:
    azure: str
    tasks: tuple[str, ...]
    greater_is_better: bool = True


METRICS = (
    Metric("accuracy", ("classification",)),
    Metric("AUC_weighted", ("classification",)),
    Metric("norm_macro_recall", ("classification",)),
    Metric("average_precision_score_weighted", ("classification",)),
    Metric("precision_score_weighted", ("classification",)),
    Metric("spearman_correlation", _RF),
    Metric("normalized_root_mean_squared_error", _RF, greater_is_better=False),
    Metric("r2_score", _RF),
    Metric("normalized_mean_absolute_error", _RF, greater_is_better=False),
)
DEFAULT_METRIC = {
    "classification": "accuracy",
    "regression": "normalized_root_mean_squared_error",
    "forecasting": "normalized_root_mean_squared_error",
}


def metric(name: str) -> Metric | None:
    """Azure ML's metric by its YAML name (`r2_score`) or its SDK's (`R2Score`, `AUCWeighted`)."""
    return next((found for found in METRICS if _key(found.azure) == _key(name)), None)


def primary_metric(job: AutoMLJob) -> Metric:
    """The job's primary metric (its task's default when not given); checked by `metric_problem` when loaded."""
    found = metric(job.primary_metric or DEFAULT_METRIC[job.task])
    assert found is not None, "checked by metric_problem when loaded"
    return found


def metric_problem(task: object, name: object) -> str | None:
    """Why `primary_metric` cannot be used for the task; None when it can (or either is not text:
    the schema says so)."""
    if not isinstance(name, str) or not isinstance(task, str):
        return None
    found = metric(name)
    if found is None or task not in found.tasks:
        names = ", ".join(m.azure for m in METRICS if task in m.tasks)
        return f"`{name}` is not a primary metric of {task}: {names}" if names else None
    return None


def estimators(job: AutoMLJob) -> tuple[list[str], list[str]]:
    """FLAML's estimators for the job, and what is said about the algorithms it names: one without
    an equivalent, or for another task, or only the nearest one."""
    said: list[str] = []
    allowed = job.training.allowed_training_algorithms
    chosen: list[str] = []
    if allowed:
        for name in allowed:
            found = _usable(name, job.task, said)
            chosen += [e for e in (found.flaml if found else ()) if e not in chosen]
    else:
        chosen = list(DEFAULT_ESTIMATORS[job.task])
    for name in job.training.blocked_training_algorithms or ():
        found = _usable(name, job.task, said)
        chosen = [e for e in chosen if not found or e not in found.flaml]
    return chosen, said


def _usable(name: str, task: str, said: list[str]) -> Algorithm | None:
    found = algorithm(name)
    if found is None:
        known = ", ".join(a.azure for a in ALGORITHMS if task in a.tasks)
        said.append(f"training algorithm `{name}` is not one of Azure ML's for {task} ({known}): skipped")
        return None
    if task not in found.tasks:
        said.append(f"training algorithm `{name}` is not one of Azure ML's for {task}: skipped")
        return None
    if not found.flaml:
        said.append(f"training algorithm `{name}` has no FLAML equivalent: skipped")
        return None
    if found.nearest:
        said.append(f"training algorithm `{name}` runs as {found.nearest} (FLAML `{'`, `'.join(found.flaml)}`)")
    return found
