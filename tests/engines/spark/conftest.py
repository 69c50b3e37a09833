"""A real Spark standalone cluster (one master, two workers on 127.0.0.1) for tests/engines/spark/.

Started once per test session, on first use (a JVM start is seconds each), and stopped by pid at
the end (`support.clusters.spark_cluster`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.clusters.spark_cluster import SparkCluster


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    root = Path(tempfile.mkdtemp(prefix="distrun-spark-"))
    # 2 cores a worker: the module's two jobs (one run, one created in the background) run side
    # by side, each with an executor on each worker.
    cluster = SparkCluster(root, workers=2, cores=2).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
