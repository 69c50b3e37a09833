"""The machine a run was taken on: what RESULTS.md records next to the figures."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.peers import Peers


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def _commit(repo: Path) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        # The report itself does not count: rewriting it is what a run does.
        status = ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]
        dirty = subprocess.run(
            [*status, "--", ".", ":!benchmarks/RESULTS.md"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def describe(peers: Peers, repo: Path) -> list[tuple[str, str]]:
    return [
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %z")),
        ("cpu", f"{os.cpu_count()} cores ({_cpu_model()})"),
        ("memory", _memory_gib()),
        ("os", f"{platform.system()} {platform.release()}"),
        ("python", f"{sys.version.split()[0]} ({platform.python_implementation()})"),
        ("torch", peers.torch_version),
        ("torchx", peers.torchx_version or "not installed"),
        ("distrun", _commit(repo)),
        ("load average at start (1, 5, 15 min)", load_average()),
    ]
