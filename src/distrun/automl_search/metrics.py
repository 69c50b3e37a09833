"""Azure ML's AutoML metrics, computed with scikit-learn, and the FLAML metric that ranks trials by
the job's primary metric (`AzureMetric`: FLAML minimizes its loss, and logs every metric of the
task for each trial)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from sklearn import metrics as sk
from sklearn.preprocessing import label_binarize


def classification_metrics(y_true: Any, y_pred: Any, proba: Any, labels: Any) -> dict[str, float]:
    labels = list(labels)
    found = {
        "accuracy": sk.accuracy_score(y_true, y_pred),
        "precision_score_weighted": sk.precision_score(y_true, y_pred, average="weighted", zero_division=0),
        "recall_score_weighted": sk.recall_score(y_true, y_pred, average="weighted", zero_division=0),
        "f1_score_weighted": sk.f1_score(y_true, y_pred, average="weighted", zero_division=0),
    }
    chance = 1.0 / max(len(labels), 2)
    macro_recall = sk.recall_score(y_true, y_pred, average="macro", labels=labels, zero_division=0)
    found["norm_macro_recall"] = max(0.0, (macro_recall - chance) / (1 - chance))
    if proba is not None and len(set(np.asarray(y_true).tolist())) > 1:
        proba = np.asarray(proba)
        onehot = label_binarize(y_true, classes=labels)
        if len(labels) == 2:
            onehot = np.hstack([1 - onehot, onehot])
        found["AUC_weighted"] = sk.roc_auc_score(onehot, proba, average="weighted")
        found["average_precision_score_weighted"] = sk.average_precision_score(onehot, proba, average="weighted")
        found["log_loss"] = sk.log_loss(y_true, proba, labels=labels)
    return {key: float(value) for key, value in found.items()}


def regression_metrics(y_true: Any, y_pred: Any, target_range: float) -> dict[str, float]:
    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    span = target_range if target_range > 0 else 1.0
    rmse = float(np.sqrt(sk.mean_squared_error(y_true, y_pred)))
    mae = float(sk.mean_absolute_error(y_true, y_pred))
    spearman = spearmanr(y_true, y_pred).statistic if len(y_true) > 1 else 0.0
    return {
        "r2_score": float(sk.r2_score(y_true, y_pred)) if len(y_true) > 1 else 0.0,
        "spearman_correlation": 0.0 if np.isnan(spearman) else float(spearman),
        "root_mean_squared_error": rmse,
        "normalized_root_mean_squared_error": rmse / span,
        "mean_absolute_error": mae,
        "normalized_mean_absolute_error": mae / span,
    }


def task_metrics(task: str, y_true: Any, model: Any, X: Any, labels: Any, target_range: float) -> dict[str, float]:
    """Every metric of the task for `model` (FLAML's estimator or its AutoML) on `X`."""
    y_pred = model.predict(X)
    if task != "classification":
        y_pred = np.asarray(y_pred).ravel()
        return regression_metrics(y_true, y_pred, target_range)
    proba = model.predict_proba(X) if hasattr(model, "predict_proba") else None
    if labels is None or len(labels) == 0:  # FLAML gives none with a validation set of its own
        labels = getattr(model, "classes_", None)
    if labels is None:
        labels = np.unique(np.asarray(y_true))
    return classification_metrics(y_true, y_pred, proba, labels)


class AzureMetric:
    """FLAML's custom metric: the loss of Azure's primary metric (its negative when greater is
    better), with every metric of the task logged for the trial. A plain object: it is pickled
    with the best model (FLAML keeps it), by value (`distrun.automl_search.model`)."""

    def __init__(self, task: str, primary: str, greater_is_better: bool, target_range: float) -> None:
        self.task, self.primary, self.greater_is_better = task, primary, greater_is_better
        self.target_range = target_range

    def __call__(
        self, X_val: Any, y_val: Any, estimator: Any, labels: Any, *args: Any, **kwargs: Any
    ) -> tuple[float, dict[str, float]]:
        started = time.monotonic()
        if hasattr(X_val, "test_data") and hasattr(X_val, "target_names"):  # FLAML's time series split
            y_val = np.asarray(X_val.test_data[X_val.target_names]).ravel()
        found = task_metrics(self.task, y_val, estimator, X_val, labels, self.target_range)
        found["pred_time"] = (time.monotonic() - started) / max(len(y_val), 1)
        value = found.get(self.primary, float("nan"))
        if np.isnan(value):  # a metric this validation set cannot give (AUC of one class): the worst
            return float("inf"), found
        return (-value if self.greater_is_better else value), found
