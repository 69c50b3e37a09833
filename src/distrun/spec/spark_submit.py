"""A Spark job as the command job distrun supervises: `spark-submit` running its entry.

The driver is the job's one process (`spark-submit` in client mode: the JVM execs in place of
bash, and a Python entry's driver is its child), so its logs, cancel, `limits.timeout`,
`hang_timeout` and the no-orphan guarantees are those of every distrun job. `args` stay as
written: their `${{inputs.x}}`/`${{outputs.y}}` are substituted as a command's are, never
becoming shell syntax. Pure functions; the master and the settings distrun adds (the UI's port)
are given by who runs it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from distrun.spec import models
from distrun.spec.spark_models import SparkJobSpec

__all__ = ["ALLOCATION_MASTER", "SPARK_SUBMIT", "command_job", "submit_command"]

# bash expands SPARK_HOME, which distrun sets for the job once it found Spark on this machine.
SPARK_SUBMIT = '"$SPARK_HOME/bin/spark-submit"'
# Spark's event log, in the job's folder (bash expands DISTRUN_JOB_DIR, set for every process):
# the driver names its application id when it opens it (local mode logs it nowhere else), and
# the folder is what Spark's history server reads. A job whose conf sets spark.eventLog.* keeps it.
EVENT_LOG = "$DISTRUN_JOB_DIR/spark-events"
# The master of a standalone cluster distrun starts in the job's own allocation (Slurm): on its
# first node, at the port found free there, which bash expands when the driver starts.
ALLOCATION_MASTER = "spark://${MASTER_ADDR}:${MASTER_PORT}"
# Set on a Spark job's command job where the engine is to start the standalone cluster itself in
# the job's allocation (Slurm's node agents read it: its engine's `spark_cluster`).
SPARK_CLUSTER_VAR = "DISTRUN_SPARK_CLUSTER"
# One uncompressed file, not Spark 4's default (rolling files, zstd): Hadoop's local filesystem
# forks a `chmod` per file and folder it makes (7 for a rolling log, 1 for a single file), and
# zstd loads its native library, on every job's start; a job's event log is small.
EVENT_LOG_CONF = (
    "spark.eventLog.enabled=true",
    "spark.eventLog.compress=false",
    "spark.eventLog.rolling.enabled=false",
)


def _listed(option: str, items: list[str]) -> list[str]:
    return [option, shlex.quote(",".join(items))] if items else []


def submit_command(spark: SparkJobSpec, master: str, extra_conf: Mapping[str, str] = {}) -> str:
    """`exec spark-submit ...` with the job's master, conf (its own win over `extra_conf`), files and args."""
    master_word = f'"{master}"' if master == ALLOCATION_MASTER else shlex.quote(master)
    words = ["exec", SPARK_SUBMIT, "--master", master_word]
    for key, value in {**extra_conf, **spark.conf}.items():
        words += ["--conf", shlex.quote(f"{key}={value}")]
    if not any(key.startswith("spark.eventLog.") for key in spark.conf):
        words = ["mkdir", "-p", f'"{EVENT_LOG}"', "&&", *words]
        words += [word for setting in EVENT_LOG_CONF for word in ("--conf", setting)]
        words += ["--conf", f'"spark.eventLog.dir={EVENT_LOG}"']
    jars = list(spark.jars)
    if spark.entry.class_name:
        words += ["--class", shlex.quote(spark.entry.class_name)]
        primary = jars.pop(0) if not spark.entry.file and jars else spark.entry.file or ""
    else:
        primary = spark.entry.file or ""
    words += _listed("--py-files", spark.py_files) + _listed("--jars", jars)
    words += _listed("--files", spark.files) + _listed("--archives", spark.archives)
    words.append(shlex.quote(primary))
    command = " ".join(words)
    return f"{command} {spark.args.strip()}" if spark.args and spark.args.strip() else command


def command_job(spark: SparkJobSpec, master: str, extra_conf: Mapping[str, str] = {}) -> models.JobSpec:
    """The command job that runs the Spark job with `master`: its code, data, environment and limits."""
    return models.JobSpec(
        name=spark.name,
        display_name=spark.display_name,
        experiment_name=spark.experiment_name,
        description=spark.description,
        tags=spark.tags,
        properties=spark.properties,
        command=submit_command(spark, master, extra_conf),
        code=spark.code,
        environment=spark.environment,
        environment_variables=spark.environment_variables,
        inputs=spark.inputs,
        outputs=spark.outputs,
        compute=spark.compute,
        limits=spark.limits,
    )
