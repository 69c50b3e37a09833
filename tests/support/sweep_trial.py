"""A sweep trial whose metric costs no MLflow import: shared by the tests that run a pipeline's
sweep step (from YAML and from the SDK)."""

from __future__ import annotations

# Logs `loss` = |x - 2| to its MLflow run in the store the run is given (a SQLite file, written as
# MLflow writes a metric: no mlflow import, no server, each of which costs seconds), and writes what
# it trained on to its model output.
TRAIN = """
    import argparse, os, pathlib, sqlite3, time
    parser = argparse.ArgumentParser()
    for name in ("--data", "--x", "--model"):
        parser.add_argument(name)
    args = parser.parse_args()
    x = float(args.x)
    store = os.environ["MLFLOW_TRACKING_URI"].removeprefix("sqlite:///")
    with sqlite3.connect(store, timeout=60) as conn:
        conn.execute(
            "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, 0, 0)",
            ("loss", abs(x - 2), int(time.time() * 1000), os.environ["MLFLOW_RUN_ID"]),
        )
    base = pathlib.Path(args.data, "base.txt").read_text().strip()
    pathlib.Path(args.model, "model.txt").write_text(f"x={x:g} base={base}")
    print(f"trained x={x:g}")
"""

COMPONENT = """
    type: command
    command: python train.py --data ${{inputs.data}} --x ${{inputs.x}} --model ${{outputs.model}}
    code: ./src
    inputs: {data: {type: uri_folder}, x: {type: number, default: 0}}
    outputs: {model: {type: uri_folder}}
"""
