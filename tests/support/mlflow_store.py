"""Reading a job's MLflow run back from the store distrun made for it."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path


def run_status(home: Path, run_id: str) -> str:
    with sqlite3.connect(home / "mlflow.db") as conn:
        return conn.execute("SELECT status FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()[0]


def tracking_of(home: Path, name: str) -> dict[str, str]:
    return json.loads((home / "jobs" / name / "tracking.json").read_text())


def outbound_address() -> str:
    """This machine's address on its default route (a UDP socket's connect sends nothing): where
    the Kubernetes emulator's pods, which share this machine's network, reach distrun's MLflow
    server when it listens there (DISTRUN_MLFLOW_HOST)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        return str(probe.getsockname()[0])
