"""B13's rank: its first mlflow.log_metric, stamped before the call and when the call returned.

Writes <BENCH_OUT>/first_metric.json: {"called": time.time(), "returned": time.time()}.
"""

from __future__ import annotations

import json
import os
import time

import mlflow

called = time.time()
mlflow.log_metric("loss", 0.5, step=0)
returned = time.time()
with open(os.path.join(os.environ["BENCH_OUT"], "first_metric.json"), "w") as handle:
    json.dump({"called": called, "returned": returned}, handle)
