"""Pytest fixtures for a real Slurm cluster of 2 nodes on this machine.

For every test under tests/engines/slurm/. The cluster
starts once per test session, on first use (about 1-2 s), and is stopped at the end; the
stop fails the session if any daemon or job process is left behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
def hpc(run_cli, slurm_cluster: SlurmCluster) -> str:
    result = run_cli(
        "compute",
        "create",
        "--name",
        "hpc",
        "--type",
        "slurm",
        "--set",
        "partition=debug",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert result.returncode == 0, result.stderr
    return "hpc"
