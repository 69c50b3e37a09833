"""B14's peer: FLAML called directly on the same tables, split and budget as the AutoML job.

    python flaml_direct.py TRAIN.csv VALID.csv TARGET BUDGET_S OUT.json

Reads the CSVs with pandas, runs `AutoML().fit` with the validation table as its holdout, the
estimators distrun runs for classification by default, accuracy, early stopping, seed 0 and
every core, pickles the refit best model, and writes the best validation accuracy and the trials.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time

import pandas as pd
from flaml import AutoML

ESTIMATORS = ["lgbm", "rf", "xgboost", "extra_tree", "xgb_limitdepth", "lrl1"]


def main(train_csv: str, valid_csv: str, target: str, budget: float, out: str) -> None:
    started = time.monotonic()
    train, valid = pd.read_csv(train_csv), pd.read_csv(valid_csv)
    automl = AutoML()
    automl.fit(
        X_train=train.drop(columns=[target]),
        y_train=train[target],
        X_val=valid.drop(columns=[target]),
        y_val=valid[target],
        task="classification",
        metric="accuracy",
        estimator_list=ESTIMATORS,
        time_budget=budget,
        eval_method="holdout",
        early_stop=True,
        seed=0,
        verbose=0,
        n_jobs=len(os.sched_getaffinity(0)),
    )
    with open(out + ".model.pkl", "wb") as handle:
        pickle.dump(automl, handle)
    found = {
        "best_accuracy": 1 - automl.best_loss,
        "best": automl.best_estimator,
        "seconds": time.monotonic() - started,
    }
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(found, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
