"""`type: spark` on a Spark standalone cluster target: the driver supervised here in client mode,
two executors on the cluster's two workers. One job, created in the background (the Spark
target's own launcher supervises it) and followed with `distrun job stream` until it ends, is
shared by the assertions: a Spark application on the cluster is tens of seconds of JVMs' CPU.
The foreground `distrun run` streams the same kept lines (tests/engines/slurm/test_slurm_spark.py
and tests/engines/local/test_local_spark.py), and B16 of `python -m benchmarks` runs it here."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.clusters.spark_cluster import SparkCluster
from support.jobs import only_job, record
from support.spark_jobs import COUNTS, WORD_COUNT, read_counts, spark_home, write_spark_job

# Both executors registered before the first task, however slowly their JVMs start (Spark's
# default wait is 30 s): the driver then counts both, and each runs one of the markers' partitions.
WAIT_FOR_BOTH = (
    "  spark.scheduler.minRegisteredResourcesRatio: 1.0\n  spark.scheduler.maxRegisteredResourcesWaitingTime: 180s\n"
)


@dataclass(frozen=True)
class OnCluster:
    home: Path
    store: Path
    result: subprocess.CompletedProcess[str]  # `distrun job stream` of the word count, to its end


def with_pool(root: Path, master: str) -> tuple[Path, Path, Path]:
    """A DISTRUN_HOME with the cluster as compute `pool`, and the word count's job file on it."""
    home, store = spark_home(root)
    created = distrun_cli(
        home, "compute", "create", "--name", "pool", "--type", "spark",
        "--set", f"master={master}", "--set", "driver_host=127.0.0.1",
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    job = write_spark_job(root / "job", "count.py", WORD_COUNT, executors=2, extra="compute: azureml:pool\n")
    text = job.read_text().replace("  spark.executor.instances: 2\n", "  spark.executor.instances: 2\n" + WAIT_FOR_BOTH)
    job.write_text(text)
    return home, store, job


@pytest.fixture(scope="module")
def on_cluster(tmp_path_factory: pytest.TempPathFactory, spark_cluster: SparkCluster) -> OnCluster:
    """The word count created on the cluster in the background, and streamed until it ends."""
    root = tmp_path_factory.mktemp("spark_standalone")
    home, store, job = with_pool(root, spark_cluster.master)
    created = distrun_cli(home, "job", "create", "--name", "wordcount", "--file", str(job))
    assert created.returncode == 0, created.stdout + created.stderr
    return OnCluster(home, store, distrun_cli(home, "job", "stream", "wordcount", timeout=240))


def test_the_job_runs_on_the_clusters_two_executors(on_cluster: OnCluster, spark_cluster: SparkCluster) -> None:
    home, store, result = on_cluster.home, on_cluster.store, on_cluster.result
    assert result.returncode == 0, result.stdout + result.stderr
    assert "executors 2" in result.stdout
    assert read_counts(store / "counts") == COUNTS
    rec = record(home, only_job(home))
    assert (rec["name"], rec["status"]) == ("wordcount", "Completed")
    assert (str(rec["kind"]), rec["compute"]) == ("spark", "pool")
    shown = json.loads(distrun_cli(home, "job", "show", rec["name"], "-o", "json").stdout)
    app_id = shown["spark"]["application_id"]  # the cluster's id, as the driver registered
    assert app_id.startswith("app-")
    ran = [log for log in spark_cluster.executor_logs() if log.parent.parent.name == app_id]
    assert len(ran) >= 2  # each worker ran one of the job's executors
    shown = distrun_cli(home, "job", "show", rec["name"]).stdout
    where = f"user_logs/std_log_executor_N.txt (N: the executor), from each worker's SPARK_WORKER_DIR/{app_id}/N/"
    assert f"Executors' logs:   {where}" in shown


def test_the_executors_logs_are_streamed_and_kept_with_their_roles(on_cluster: OnCluster) -> None:
    home, result = on_cluster.home, on_cluster.result
    # each executor's Python worker printed one marker, in its worker's work folder on the cluster
    streamed = re.findall(r"^\[executor ([0-9]+)\] marker of partition ([01])$", result.stdout, re.MULTILINE)
    assert sorted(partition for _, partition in streamed) == ["0", "1"], result.stdout[-3000:]
    assert "[driver] marker of partition" not in result.stdout
    name = only_job(home)
    logs = Path(record(home, name)["folder"], "user_logs")
    for executor, partition in streamed:
        assert f"marker of partition {partition}" in (logs / f"std_log_executor_{executor}.txt").read_text()
    kept = distrun_cli(home, "job", "stream", name).stdout  # read back from the job's folder, by role
    assert all(f"[executor {executor}] marker of partition {partition}" in kept for executor, partition in streamed)


def test_a_wrong_master_and_a_command_job_on_the_cluster_are_refused(on_cluster: OnCluster, tmp_path: Path) -> None:
    home = on_cluster.home
    wrong = distrun_cli(home, "compute", "create", "--name", "bad", "--type", "spark", "--set", "master=10.0.0.5:7077")
    assert wrong.returncode != 0 and "'10.0.0.5:7077' is not a Spark master's URL" in wrong.stderr
    job = tmp_path / "job.yml"
    job.write_text("command: echo hi\ncompute: pool\n")
    refused = distrun_cli(home, "run", str(job))
    assert refused.returncode != 0
    assert "compute target 'pool' is a spark target: it runs spark jobs (`type: spark`) only" in refused.stderr
