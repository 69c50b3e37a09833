"""Pytest fixtures for a real Slurm cluster of 2 nodes on this machine.

For every test under tests/engines/slurm/. The cluster
starts once per test session, on first use (about 1-2 s), and is stopped at the end; the
stop fails the session if any daemon or job process is left behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.clusters.slurm_cluster import SlurmCluster
from support.knobs import slurm_cred_expire


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    # Not under pytest's basetemp: munge's socket path must stay short (AF_UNIX limit).
    root = Path(tempfile.mkdtemp(prefix="distrun-slurm-"))
    cluster = SlurmCluster(root, node_count=2, cpus_per_node=2, cred_expire=slurm_cred_expire())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()  # raises, keeping the folder and its logs, if anything was left running
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm_env(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The test's environment pointed at the cluster (SLURM_CONF), for code that shells out to Slurm."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf_path))
    return slurm_cluster.env()


@pytest.fixture
def add_slurm_target(distrun_home: Path, slurm_cluster: SlurmCluster) -> Callable[..., str]:
    """Define a compute target on the cluster as `distrun compute create --name NAME --type slurm
    --set K=V ...` does (the same parsing, checks and config.yaml), without a process per test.
    The command itself runs in the tests of targets with other settings (a partition that does
    not exist, a controller that is down, every CPU of a node)."""
    from distrun.backends.registry import backend_for
    from distrun.prepare.compute import add_target
    from distrun.spec.overrides import parse_override
    from distrun.store.layout import Layout

    def add(name: str, *overrides: str) -> str:
        settings: dict[str, Any] = {}
        for text in (*overrides, f"slurm_conf={slurm_cluster.conf_path}"):
            path, value = parse_override(text)
            settings[".".join(map(str, path))] = value
        backend_for("slurm").validate_settings(name, settings)
        add_target(Layout(distrun_home).config_path, name, "slurm", settings)
        return name

    return add


@pytest.fixture
def hpc(add_slurm_target: Callable[..., str]) -> str:
    return add_slurm_target("hpc", "partition=debug")
