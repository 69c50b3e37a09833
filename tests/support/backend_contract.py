"""What the backend conformance suite needs to watch a backend keep its contract, in this process.

The contract (`distrun.backends.base`) says render, validate_settings and the cancel of a job the
engine never got write nothing but what they must, start nothing and ask no engine. A test sees
the first by comparing DISTRUN_HOME before and after (`home_files`), and the other two by making
every way out of this process fail loudly while the call runs (`refuse_engines`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.backends.kubernetes.state import PodView


class EngineContacted(AssertionError):
    """A call that must stay in this process asked an engine, started a process or signalled one."""


def home_files(home: Path) -> dict[str, str]:
    """Every path under `home`, with its content's digest ("dir" for a folder), to compare whole.

    The job index is compared by its rows: SQLite's write-ahead log and shared-memory files
    come and go, and a checkpoint rewrites the database file, whenever a connection closes.
    """
    found: dict[str, str] = {}
    if not home.exists():
        return found
    for path in sorted(home.rglob("*")):
        key = str(path.relative_to(home))
        if path.name.endswith(SQLITE_SIDE_FILES):
            continue
        if path.is_dir():
            found[key] = "dir"
        elif path.suffix == ".db":
            found[key] = _rows(path)
        else:
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _rows(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {table: sorted(map(repr, conn.execute(f'SELECT * FROM "{table}"'))) for table in tables}
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def refuse_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make each engine's client, any network connection, a fork or a signal raise `EngineContacted`.

    tests/unit's own guard already refuses subprocess.Popen (Slurm's tools); these cover what
    does not go through it: the Kubernetes API client, Ray's connection (its core connects from
    C, out of reach of the socket patch, hence its own entry points), a watchdog's fork, and a
    cancel that would SIGTERM a supervisor.
    """
    from distrun.backends.kubernetes.client import KubernetesClient
    from distrun.backends.ray import driver as ray_driver
    from distrun.backends.slurm.client import SlurmClient

    def refuse(what: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise EngineContacted(f"{what} was called: this call must not leave the process")

        return refused

    monkeypatch.setattr(SlurmClient, "_run", refuse("a Slurm command"))
    monkeypatch.setattr(KubernetesClient, "__init__", refuse("the Kubernetes API client"))
    for name in ("import_ray", "check_reachable", "connect"):
        monkeypatch.setattr(ray_driver, name, refuse(f"Ray's {name}"))

    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise EngineContacted(f"a network connection to {address!r} was opened")
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise EngineContacted(f"a network connection to {address!r} was opened")
        return original_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    for name in ("fork", "posix_spawn", "posix_spawnp", "kill"):
        monkeypatch.setattr(os, name, refuse(f"os.{name}"))


def masked(shown: dict[str, Any], ports: list[int]) -> str:
    """`shown` as JSON with each of `ports` (values picked afresh at each render) as <port>."""
    text = json.dumps(shown, sort_keys=True, indent=1)
    for port in ports:
        text = re.sub(rf"(?<!\d){port}(?!\d)", "<port>", text)
    return text


def unborn_pid() -> int:
    """A pid no process has: Linux hands out pids below pid_max only."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


# ---------------------------------------------------------------- Kubernetes pods, as job_state reads them

POD_LAYOUT = PodLayout("job", True, (PodRole("worker", 2, 0, "img"),))


def pod(name: str, phase: str, **extra: Any) -> PodView:
    return PodView(name=name, role="worker", index=0, phase=phase, node_name="n1", **extra)
