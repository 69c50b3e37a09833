"""Running the `distrun` command of this checkout in a private DISTRUN_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"


def with_src_first(python_path: str | None) -> str:
    """PYTHONPATH with this checkout's src first; no empty entry, which Python would read as the
    current folder (and which fails at start-up in a folder that was deleted)."""
    return os.pathsep.join([str(SRC), *(p for p in (python_path or "").split(os.pathsep) if p)])


def cli_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["DISTRUN_HOME"] = str(home)
    env["PYTHONPATH"] = with_src_first(env.get("PYTHONPATH"))
    env.pop("NO_COLOR", None)
    env.setdefault("DISTRUN_MLFLOW", "0")  # see distrun_home
    env.update(extra or {})
    return env


def distrun_cli(
    home: Path,
    *args: str,
    timeout: float = 180,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    text: bool = True,
    **popen: Any,
) -> subprocess.CompletedProcess[Any]:
    """`distrun <args>` run to its end in DISTRUN_HOME `home`, its output captured (as bytes: text=False)."""
    return subprocess.run(
        [sys.executable, "-m", "distrun", *args],
        capture_output=True,
        text=text,
        timeout=timeout,
        env=cli_env(home, env),
        cwd=cwd,
        **popen,
    )


def start_distrun_cli(home: Path, *args: str) -> subprocess.Popen[str]:
    """`distrun <args>` started in DISTRUN_HOME `home`, stdout and stderr together on a pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "distrun", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(home),
    )


def kill_left(started: list[subprocess.Popen[str]]) -> None:
    """Kill the CLI processes a test started and left running."""
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
