"""Fixtures for the Kubernetes tests: an emulated cluster per test and a compute target for it.

`cluster` runs the JobSet form (the JobSet CRD installed) unless a test asks for the other with
`@pytest.mark.parametrize("cluster", [False], indirect=True)`: Indexed Jobs and a headless Service.
"""

from __future__ import annotations

import fcntl
import random
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from support.clusters.k8s_emulator import EmulatedCluster

# Port ranges in use by an emulated cluster of any test run on this machine: a second suite run
# side by side scans the same ranges, and two clusters' pods on one port base find each other's
# rank 0 (their pod names, and so their loopback addresses, are the same too).
PORT_LOCKS = Path(tempfile.gettempdir()) / "distrun-test-k8s-ports"


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default if unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def reserve_port_base(count: int = 16) -> tuple[int, IO[bytes]]:
    """A base port with `count` free ports after it, held for this test (the returned file's lock)
    against every other test run on this machine: the pods start only later, so a port that is
    free now proves nothing to a second run looking at the same moment."""
    PORT_LOCKS.mkdir(mode=0o700, exist_ok=True)
    # Below the kernel's ephemeral range: a port of it that is free now can be any process's
    # outgoing connection by the time the pods bind it (seen: a DDP rank 0's EADDRINUSE while a
    # second suite ran). The Ray test cluster's ports (20100-20199) are in a namespace of its own.
    bases = list(range(21000, ephemeral_ports()[0] - count, 97))
    start = random.randrange(len(bases))  # runs started together do not queue on the same locks
    for base in bases[start:] + bases[:start]:
        lock = open(PORT_LOCKS / str(base), "ab")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("", port))
        except OSError:
            lock.close()
            continue
        return base, lock
    raise RuntimeError("no free port range")


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmulatedCluster]:
    jobset = getattr(request, "param", True)
    emulated = EmulatedCluster(tmp_path / "cluster", jobset_crd=jobset).start()
    # The image has no distrun: its pods run the modules their job's ConfigMap carries.
    emulated.kubelet.base_env.pop("PYTHONPATH", None)
    try:
        yield emulated
    finally:
        left = emulated.stop()
        assert not left, f"pods still running at the end: {left}"
        assert not emulated.errors, emulated.errors[:3]


@pytest.fixture
def k8s(cluster: EmulatedCluster, distrun_home: Path) -> Iterator[EmulatedCluster]:
    """The compute target `k8s` for the cluster, defined as `distrun compute create` does it (in
    process: that command itself is tested in tests/surfaces/test_kubernetes_plan_command.py)."""
    from distrun.backends.registry import backend_for
    from distrun.prepare.compute import add_target
    from distrun.store.layout import Layout

    port_base, lock = reserve_port_base()
    with lock:
        settings = cluster.settings(port_base=port_base, image="reg/distrun:test")
        backend_for("kubernetes").validate_settings("k8s", settings)
        add_target(Layout(distrun_home).config_path, "k8s", "kubernetes", settings)
        yield cluster
