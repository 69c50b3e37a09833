"""The best trial's model as the job's `best_model` output: an MLflow model folder
(`mlflow.pyfunc.load_model(folder).predict(frame)` scores a table with the training columns),
holding FLAML's AutoML object, whose `predict` applies the featurization it learned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd


def save_best_model(automl: Any, folder: Path, example: pd.DataFrame) -> None:
    import mlflow.sklearn
    from mlflow.models import infer_signature

    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.iterdir():  # a restarted job's: the model is saved again whole
        if leftover.is_file() and not leftover.is_symlink():
            leftover.unlink()
    # mlflow warns that a pickled model runs code when loaded: any MLflow model of this flavour does.
    logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
    sample = example.head(5)
    signature = infer_signature(sample, automl.predict(sample))
    mlflow.sklearn.save_model(
        automl,
        str(folder),
        serialization_format=mlflow.sklearn.SERIALIZATION_FORMAT_CLOUDPICKLE,
        signature=signature,
        pip_requirements=["flaml[automl]>=2.7", "mlflow", "pandas", "scikit-learn"],
    )
