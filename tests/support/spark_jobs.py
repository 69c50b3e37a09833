"""Spark job files for the tests: a word count over a datastore's text, and a driver that waits.

The word count reads `azureml://datastores/store/paths/text.txt` and writes its counts (`mode:
direct`) to `azureml://datastores/store/paths/counts/`, the datastore `store` being a folder
named in DISTRUN_HOME's config.yaml (`spark_home`), as Microsoft's examples read theirs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

TEXT = "spark counts words\nwords count\n"
COUNTS = {"spark": 1, "counts": 1, "words": 2, "count": 1}

WORD_COUNT = """\
import argparse, os
from pyspark.sql import SparkSession
parser = argparse.ArgumentParser()
parser.add_argument("--text")
parser.add_argument("--counts")
args = parser.parse_args()
spark = SparkSession.builder.getOrCreate()
words = spark.sparkContext.textFile(args.text).flatMap(str.split)
counts = words.map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b)
spark.createDataFrame(counts, ["word", "n"]).coalesce(1).write.mode("overwrite").csv(args.counts)
print("executors", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1, flush=True)
# written by each executor's Python worker (on a cluster: into the executor's log, on its worker),
# one write a line (to stderr: a worker's stdout is Spark's): in local mode they share the driver's
spark.sparkContext.parallelize(range(2), 2).foreach(lambda i: os.write(2, f"marker of partition {i}\\n".encode()))
spark.stop()
"""

WAITS = """\
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("started", spark.sparkContext.parallelize(range(4), 2).sum(), flush=True)
spark.sparkContext.parallelize(range(2), 2).foreach(lambda _: time.sleep(600))
"""


# The tests' drivers and executors run for seconds: Java's optimizing compiler (C2) and parallel
# collector, made for long-lived JVMs, took a third of such a job's CPU (a local-mode job: 24 s
# of CPU with them, 15 s without), on a machine whose two cores the suite keeps busy. Spark passes
# these through as it would a user's; a user's job needs none of them.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_job(entry: str, executors: int = 8, extra: str = "") -> str:
    """A Spark job of `entry` in src/, its conf asking for more cores than a test machine has."""
    return (
        textwrap.dedent(f"""\
        $schema: https://azuremlschemas.azureedge.net/latest/sparkJob.schema.json
        type: spark
        code: ./src
        entry:
          file: {entry}
        conf:
          spark.driver.cores: 1
          spark.driver.memory: 512m
          spark.executor.cores: 1
          spark.executor.memory: 512m
          spark.driver.extraJavaOptions: {SHORT_LIVED_JVM}
          spark.executor.extraJavaOptions: {SHORT_LIVED_JVM}
          spark.executor.instances: {executors}
        inputs:
          text:
            type: uri_file
            path: azureml://datastores/store/paths/text.txt
            mode: direct
        outputs:
          counts:
            type: uri_folder
            path: azureml://datastores/store/paths/counts/
            mode: direct
        args: >-
          --text ${{{{inputs.text}}}}
          --counts ${{{{outputs.counts}}}}
        identity:
          type: user_identity
        """)
        + extra
    )


def spark_home(root: Path) -> tuple[Path, Path]:
    """A DISTRUN_HOME whose datastore `store` is a folder holding TEXT: (home, the store's folder)."""
    home, store = root / "home", root / "store"
    home.mkdir(parents=True)
    store.mkdir()
    (store / "text.txt").write_text(TEXT)
    (home / "config.yaml").write_text(f"datastores:\n  store: {store}\n")
    return home, store


def write_spark_job(folder: Path, entry: str, program: str, executors: int = 8, extra: str = "") -> Path:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / entry).write_text(program)
    path = folder / "job.yml"
    path.write_text(spark_job(entry, executors, extra))
    return path


def read_counts(folder: Path) -> dict[str, int]:
    """The word counts Spark wrote as CSV part files into `folder`."""
    counts: dict[str, int] = {}
    for part in sorted(folder.glob("part-*.csv")):
        for line in part.read_text().splitlines():
            word, n = line.split(",")
            counts[word] = int(n)
    return counts
