"""Reading a job's MLflow run back from the store distrun made for it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def run_status(home: Path, run_id: str) -> str:
    with sqlite3.connect(home / "mlflow.db") as conn:
        return conn.execute("SELECT status FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()[0]


def tracking_of(home: Path, name: str) -> dict[str, str]:
    return json.loads((home / "jobs" / name / "tracking.json").read_text())
