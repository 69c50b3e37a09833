"""B13's rank: its first mlflow.log_metric, stamped before the call and when the call returned,
then its first mlflow.log_param and mlflow.set_tag, stamped so.

Writes <BENCH_OUT>/first_metric.json: {"called", "returned", "param_called", "param_returned"}
(each time.time()).
"""

from __future__ import annotations

import json
import os
import time

import mlflow

called = time.time()
mlflow.log_metric("loss", 0.5, step=0)
returned = time.time()
param_called = time.time()
mlflow.log_param("lr", "0.1")
mlflow.set_tag("stage", "first")
param_returned = time.time()
stamps = {"called": called, "returned": returned, "param_called": param_called, "param_returned": param_returned}
with open(os.path.join(os.environ["BENCH_OUT"], "first_metric.json"), "w") as handle:
    json.dump(stamps, handle)
