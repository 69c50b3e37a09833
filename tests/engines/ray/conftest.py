"""Pytest fixtures for a real Ray cluster of 2 nodes on this machine, in a network namespace with only `lo`.

For every test under tests/engines/ray/. The cluster starts once per test session, on first use
(tens of seconds on a loaded machine, ~1.5 GB), and is stopped as soon as the last test that uses
it on this worker has run: its daemons idle at about 7 % of a core, which the rest of the suite
would otherwise pay to its end. The tests that use it run one after another on one worker (their
xdist group, tests/conftest.py); were one to come later, it would start the cluster again. The
stop fails the test it follows if any process is left in the namespace. Commands that talk to the
cluster (the `distrun` under test included) run inside the namespace: `ray_cli` does that.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import SRC, cli_env, kill_left
from support.clusters.ray_cluster import RayCluster


class SharedCluster:
    """The cluster of this worker's Ray tests: started on first use, stopped after the last."""

    def __init__(self) -> None:
        self.cluster: RayCluster | None = None
        self.root: Path | None = None

    def get(self) -> RayCluster:
        if self.cluster is None:
            # Not under pytest's basetemp: Ray's socket paths must stay short (AF_UNIX limit).
            self.root = Path(tempfile.mkdtemp(prefix="distrun-ray-"))
            # The Ray nodes' Python must import this checkout's distrun (a real cluster has it installed).
            cluster = RayCluster(self.root, node_count=2, cpus_per_node=2, extra_env={"PYTHONPATH": str(SRC)})
            cluster.start()
            self.cluster = cluster
        return self.cluster

    def stop(self) -> None:
        cluster, root, self.cluster, self.root = self.cluster, self.root, None, None
        if cluster is not None:
            cluster.stop()  # raises if anything was left running in the namespace
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


SHARED = SharedCluster()


@pytest.fixture
def ray_cluster() -> RayCluster:
    return SHARED.get()


# trylast: after the test's own fixtures (`ray_cli` ends what it started) are torn down.
@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if "ray_cluster" in item.fixturenames and (nextitem is None or "ray_cluster" not in nextitem.fixturenames):
        SHARED.stop()


def pytest_sessionfinish() -> None:
    SHARED.stop()  # a session interrupted between two Ray tests


@pytest.fixture
def add_ray_target(distrun_home: Path, ray_cluster: RayCluster) -> Callable[..., str]:
    """Add a compute target for the test cluster to DISTRUN_HOME, as `distrun compute create --type
    ray` does (settings checked, then written), without a CLI process per test."""

    def add(name: str, **settings: Any) -> str:
        from distrun.backends.ray.backend import validate_settings
        from distrun.prepare.compute import add_target
        from distrun.store.layout import Layout

        settings = {"address": ray_cluster.address, **settings}
        validate_settings(name, settings)
        add_target(Layout(distrun_home).config_path, name, "ray", settings)
        return name

    return add


@pytest.fixture
def ray_target(add_ray_target: Callable[..., str]) -> str:
    """A compute target `rc` pointing at the test cluster (placement timeout kept short)."""
    return add_ray_target("rc", placement_timeout=20)


@pytest.fixture
def ray_cli(distrun_home: Path, ray_cluster: RayCluster) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `distrun ARGS` inside the cluster's namespace; whatever is left is killed at the end."""

    started: list[subprocess.Popen[str]] = []

    def start(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            ray_cluster.command([sys.executable, "-m", "distrun", *args]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=cli_env(distrun_home, {"RAY_USAGE_STATS_ENABLED": "0", **(extra_env or {})}),
        )
        started.append(proc)
        return proc

    yield start
    kill_left(started)
