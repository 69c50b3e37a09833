"""Fixtures for the Kubernetes tests: an emulated cluster per test and a compute target for it.

`cluster` runs the JobSet form (the JobSet CRD installed) unless a test asks for the other with
`@pytest.mark.parametrize("cluster", [False], indirect=True)`: Indexed Jobs and a headless Service.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import SRC
from support.clusters.k8s_emulator import EmulatedCluster


def free_port_base(count: int = 16) -> int:
    """A base port with `count` free ports after it (pods of one test share this machine's ports)."""
    for base in range(31000, 60000, 97):
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range")


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmulatedCluster]:
    jobset = getattr(request, "param", True)
    emulated = EmulatedCluster(tmp_path / "cluster", jobset_crd=jobset).start()
    emulated.kubelet.base_env["PYTHONPATH"] = str(SRC)  # "the image has distrun installed"
    try:
        yield emulated
    finally:
        left = emulated.stop()
        assert not left, f"pods still running at the end: {left}"
        assert not emulated.errors, emulated.errors[:3]


@pytest.fixture
def k8s(cluster: EmulatedCluster, distrun_home: Path) -> EmulatedCluster:
    """The compute target `k8s` for the cluster, defined as `distrun compute create` does it (in
    process: that command itself is tested in tests/surfaces/test_kubernetes_plan_command.py)."""
    from distrun.backends.registry import backend_for
    from distrun.backends.targets import add_target
    from distrun.store.layout import Layout

    settings = cluster.settings(python=sys.executable, port_base=free_port_base(), image="reg/distrun:test")
    backend_for("kubernetes").validate_settings("k8s", settings)
    add_target(Layout(distrun_home).config_path, "k8s", "kubernetes", settings)
    return cluster
