"""`azure.ai.ml.automl` for distrun: AutoML jobs for tables, run with FLAML (docs/automl.md).

from distrun import automl
job = automl.classification(training_data=Input(type="mltable", path="./train"),
                            target_column_name="y", primary_metric="accuracy")
job.set_limits(timeout_minutes=5, max_trials=10)
ml_client.jobs.create_or_update(job)
"""

from distrun.sdk.automl_job import AutoMLJob, ColumnTransformer, classification, forecasting, regression
from distrun.sdk.automl_names import (
    ClassificationModels,
    ClassificationPrimaryMetrics,
    ForecastingModels,
    ForecastingPrimaryMetrics,
    RegressionModels,
    RegressionPrimaryMetrics,
)

ClassificationJob = RegressionJob = ForecastingJob = AutoMLJob

__all__ = [
    "AutoMLJob",
    "ClassificationJob",
    "ClassificationModels",
    "ClassificationPrimaryMetrics",
    "ColumnTransformer",
    "ForecastingJob",
    "ForecastingModels",
    "ForecastingPrimaryMetrics",
    "RegressionJob",
    "RegressionModels",
    "RegressionPrimaryMetrics",
    "classification",
    "forecasting",
    "regression",
]
