"""`type: spark` on a Slurm target: a Spark standalone cluster started inside the job's allocation
(a master on node 0, a worker on each of the 2 nodes), the driver on node 0, and nothing of Spark
left once the job ended. One job run is shared by the assertions."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli import distrun_cli
from support.jobs import only_job, processes_of_job, record, wait_for
from support.spark_jobs import COUNTS, WAITS, WORD_COUNT, read_counts, spark_home, write_spark_job

# A word count whose tasks also say on which Slurm node their executor runs (the executors
# inherit their worker's environment, which the node's slurmd gave).
NODES = """\
nodes = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.environ.get("SLURMD_NODENAME", "?")).collect()
print("executor nodes", ",".join(sorted(set(nodes))), flush=True)
"""
COUNT_AND_NODES = WORD_COUNT.replace("spark.stop()", NODES + "spark.stop()")
# Both executors registered before the first task: each gets some of the 8 tasks.
EXTRA = "  spark.scheduler.minRegisteredResourcesRatio: 1.0\ncompute: azureml:hpc\n"


@pytest.fixture
def spark_on_slurm(
    tmp_path: Path, distrun_home: Path, add_slurm_target: Callable[..., str]
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    home, store = spark_home(tmp_path)
    assert home == distrun_home
    add_slurm_target("hpc", "partition=debug")
    job = write_spark_job(tmp_path / "job", "count.py", COUNT_AND_NODES, executors=2)
    job.write_text(
        job.read_text().replace("  spark.executor.instances: 2\n", "  spark.executor.instances: 2\n" + EXTRA)
    )
    return home, store, distrun_cli(home, "run", str(job), timeout=240)


@pytest.mark.slow
def test_a_spark_job_on_slurm_runs_on_a_cluster_in_its_allocation(spark_on_slurm) -> None:
    home, store, result = spark_on_slurm
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[driver] executors 2" in result.stdout  # as the driver's SparkContext counts them
    assert "[driver] executor nodes n1,n2" in result.stdout  # tasks ran on both nodes' executors
    assert "on Slurm the job starts a Spark standalone cluster in its allocation of 2 node(s)" in result.stdout
    assert read_counts(store / "counts") == COUNTS
    rec = record(home, only_job(home))
    assert (rec["status"], str(rec["kind"])) == ("Completed", "spark")
    assert processes_of_job(rec["name"], home) == []  # no JVM (master, worker, executor, driver) left
    cluster = Path(rec["folder"], "spark-cluster")
    for node in (0, 1):  # a worker per node, each registered, its log kept
        assert "Successfully registered with master" in (cluster / f"worker_{node:02d}.log").read_text()
    assert "Registering worker" in (cluster / "master.log").read_text()
    shown = json.loads(distrun_cli(home, "job", "show", rec["name"], "-o", "json").stdout)
    app_id = shown["spark_application_id"]  # stored in the record as data
    assert app_id.startswith("app-") and shown["spark"]["application_id"] == app_id
    assert len(list(cluster.glob(f"work_*/{app_id}/*/stderr"))) == 2  # one executor on each worker
    # Node 0's agent followed each executor's files into the job's logs: streamed and kept by role.
    streamed = re.findall(r"^\[executor ([0-9]+)\] marker of partition ([01])$", result.stdout, re.MULTILINE)
    assert sorted(partition for _, partition in streamed) == ["0", "1"], result.stdout[-3000:]
    logs = Path(rec["folder"], "user_logs")
    for executor, partition in streamed:
        assert f"marker of partition {partition}" in (logs / f"std_log_executor_{executor}.txt").read_text()
    shown = distrun_cli(home, "job", "show", rec["name"]).stdout
    assert f"from spark-cluster/work_NN/{app_id}/N/" in shown


@pytest.mark.slow
def test_cancel_leaves_no_spark_jvm_on_any_node(tmp_path: Path, distrun_home: Path, add_slurm_target) -> None:
    home, _ = spark_home(tmp_path)
    add_slurm_target("hpc", "partition=debug")
    job = write_spark_job(tmp_path / "job", "waits.py", WAITS, executors=2, extra="compute: azureml:hpc\n")
    started = distrun_cli(home, "run", "-d", "--name", "waits", str(job))
    assert started.returncode == 0, started.stdout + started.stderr
    driver_log = home / "jobs" / "waits" / "user_logs" / "std_log_process_00.txt"
    # Canceled as the master grants the application its executors: the workers are starting them.
    wait_for(lambda: driver_log.exists() and "Granted executor ID" in driver_log.read_text(), timeout=180)
    assert len(processes_of_job("waits", home)) >= 4  # the driver's JVM, the master, both workers at least
    canceled = distrun_cli(home, "job", "cancel", "waits")
    assert canceled.returncode == 0, canceled.stdout + canceled.stderr
    assert record(home, "waits")["status"] == "Canceled"
    wait_for(lambda: processes_of_job("waits", home) == [], timeout=30)
