"""Wheel folders of MLflow clients other than distrun's own, for jobs whose environment has them.

Each requirement (`mlflow-skinny==2.22.0`) gets a folder with its wheel and its dependencies',
downloaded from PyPI the first time and kept in $DISTRUN_WHEEL_CACHE (default
~/.cache/distrun-test-wheels, as the Horovod and DeepSpeed wheels), so later runs build the
job's environment with `--no-index --find-links FOLDER`: no package index, no network.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMPLETE = ".complete"  # written last: a folder without it is an interrupted download


def wheel_cache() -> Path:
    return Path(os.environ.get("DISTRUN_WHEEL_CACHE") or Path.home() / ".cache" / "distrun-test-wheels")


def client_wheels(requirement: str) -> Path:
    """The folder holding `requirement` and its dependencies as wheels for this Python."""
    root = wheel_cache() / "mlflow-clients"
    root.mkdir(parents=True, exist_ok=True)
    folder = root / requirement.replace("==", "-")
    with open(root / ".lock", "w") as lock:  # two test runs side by side download once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / COMPLETE).exists():
            _download(requirement, folder)
    return folder


def _download(requirement: str, folder: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is needed to fetch pip, which downloads the wheels of " + requirement)
    shutil.rmtree(folder, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        # The test environment has no pip; a throwaway one downloads (pip has `download`, uv not).
        venv = Path(scratch) / "pip"
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        subprocess.run([uv, "venv", "--seed", "--quiet", "--python", sys.executable, str(venv)], check=True)
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
            + ["--python-version", python, "-d", str(folder), requirement],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pip download {requirement} failed (PyPI unreachable?): {done.stderr[-2000:]}")
    (folder / COMPLETE).write_text(requirement + "\n")
