"""Reading a job's MLflow run back from the store distrun made for it."""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import shutil
import socket
import sqlite3
import tempfile
from pathlib import Path

import pytest


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


def store_template_cache() -> Path:
    return Path(os.environ.get("DISTRUN_MLFLOW_STORE_CACHE") or Path.home() / ".cache" / "distrun-test-mlflow-store")


def fresh_store(home: Path) -> None:
    """Put in `home` the store mlflow makes for a new DISTRUN_HOME, registry tables included: a
    copy of one made by this mlflow release and kept in $DISTRUN_MLFLOW_STORE_CACHE, since
    making it runs every schema migration (10-25 s on a loaded 2-core machine)."""
    from distrun.metrics.model_registry import ensure_registry

    folder = store_template_cache() / importlib.metadata.version("mlflow")
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / "mlflow.db"
    with open(folder / ".lock", "w") as lock:  # two test runs side by side make it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            with tempfile.TemporaryDirectory(dir=folder) as made:
                with pytest.MonkeyPatch.context() as patch:
                    patch.setenv("DISTRUN_MLFLOW", "1")
                    ensure_registry(Path(made))
                os.replace(Path(made) / "mlflow.db", template)
    home.mkdir(mode=0o755, parents=True, exist_ok=True)
    shutil.copyfile(template, home / "mlflow.db")
