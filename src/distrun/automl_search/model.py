"""The best trial's model as the job's `best_model` output: an MLflow model folder
(`mlflow.pyfunc.load_model(folder).predict(frame)` scores a table with the training columns),
holding FLAML's AutoML object, whose `predict` applies the featurization it learned. It loads
with FLAML, mlflow and scikit-learn installed, without distrun."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def save_best_model(model: Any, folder: Path, example: pd.DataFrame) -> None:
    import mlflow.sklearn

    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.iterdir():  # a restarted job's: the model is saved again whole
        if leftover.is_file() and not leftover.is_symlink():
            leftover.unlink()
    # mlflow warns that a pickled model runs code when loaded: any MLflow model of this flavour does.
    logging.getLogger("mlflow.sklearn").setLevel(logging.ERROR)
    # The model holds objects of this package (the metric FLAML ranked with, a forecast's calendar
    # features): pickled by value, so that it loads where distrun is not installed.
    import cloudpickle

    import distrun.automl_search

    cloudpickle.register_pickle_by_value(distrun.automl_search)
    # No signature: mlflow would refuse a time column read as text, which the model reads itself.
    model.predict(example.head(5))  # a model that cannot score its own columns fails here, not when loaded
    mlflow.sklearn.save_model(
        model,
        str(folder),
        serialization_format=mlflow.sklearn.SERIALIZATION_FORMAT_CLOUDPICKLE,
        pip_requirements=["flaml[automl]>=2.7", "mlflow", "pandas", "scikit-learn"],
    )


# Where Azure ML's AutoML puts the best child run's model among its artifacts; the notebooks
# download `outputs` and read `outputs/mlflow-model`.
OUTPUTS = "outputs"
MODEL_FILE = "model.pkl"
CONDA_FILE = "conda_env_v_1_0_0.yml"


def log_model_outputs(client: Any, run_id: str, folder: Path, described: dict[str, str]) -> None:
    """The saved model as the best child run's `outputs/` on Azure ML: `mlflow-model/` (the
    MLflow model folder as saved), `model.pkl`, the model's conda environment as
    `conda_env_v_1_0_0.yml`, and the files `described` (name: text) beside them."""
    client.log_artifacts(run_id, str(folder), f"{OUTPUTS}/mlflow-model")
    with tempfile.TemporaryDirectory(prefix="distrun-automl-") as scratch:
        outputs = Path(scratch)
        shutil.copyfile(folder / MODEL_FILE, outputs / MODEL_FILE)
        shutil.copyfile(folder / "conda.yaml", outputs / CONDA_FILE)
        for name, text in described.items():
            (outputs / name).write_text(text, encoding="utf-8")
        client.log_artifacts(run_id, scratch, OUTPUTS)
