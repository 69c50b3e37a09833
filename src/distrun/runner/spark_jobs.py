"""A Spark job made ready to run on its compute target: Spark found, its master and UI chosen.

On local compute the driver runs `spark-submit` in local mode (`local[N]`, N sized at load from
`conf`). On a Spark standalone cluster (`distrun compute create --type spark --set
master=spark://HOST:PORT`) it runs in **client** deploy mode: the driver stays the one process
distrun supervises on this machine (its logs, cancel, timeouts and no-orphan guarantees hold,
and the executors end with it), and Spark's standalone cluster mode does not run Python
applications. On a Slurm target the job starts a standalone cluster in its own allocation and
runs its driver there (`on_allocation`; the Slurm engine's `spark_cluster` starts it). Without pyspark
or without Java the error says what to install.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.prepare.compute import LOCAL, ComputeTarget
from distrun.spec import models
from distrun.spec.loaded_spark import LoadedSparkJob
from distrun.spec.spark_conf import (
    EXECUTOR_CORES,
    EXECUTOR_INSTANCES,
    EXECUTOR_MEMORY,
    MAX_EXECUTORS,
    dynamic_allocation,
)
from distrun.spec.spark_submit import ALLOCATION_MASTER, SPARK_CLUSTER_VAR, command_job

__all__ = ["INSTALL_JAVA", "INSTALL_SPARK", "SparkRun", "ready_to_run", "spark_home"]

INSTALL_SPARK = "pip install 'distrun[spark]'  (pyspark, which carries spark-submit)"
INSTALL_JAVA = "install Java 17 or later, e.g. `sudo apt-get install openjdk-17-jre-headless`, or set JAVA_HOME to one"
SPARK_TARGET = "spark"
SLURM_TARGET = "slurm"  # a standalone cluster in the job's allocation (the Slurm engine's `spark_cluster`)
SPARK_3_DEFAULTS = {"spark.sql.ansi.enabled": "false"}


@dataclasses.dataclass(frozen=True)
class SparkRun:
    """The job as it runs (its command with the master and UI port) and what is said before it starts."""

    loaded: LoadedSparkJob
    ui: str
    notes: tuple[str, ...]


def spark_home() -> Path:
    """The folder of pyspark's distribution (`bin/spark-submit`); an error saying what to install."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DistrunError("a Spark job needs Spark, which is not installed", INSTALL_SPARK)
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-submit").is_file():
        raise DistrunError(f"pyspark at {home} has no bin/spark-submit", INSTALL_SPARK)
    return home


def java_found() -> None:
    """Java is there (JAVA_HOME's, else on PATH); else an error saying what to install."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").is_file():
        return
    if shutil.which("java") is None:
        raise DistrunError(
            "a Spark job needs Java, which is not installed (no `java` on PATH, no JAVA_HOME)", INSTALL_JAVA
        )


def master_of(loaded: LoadedSparkJob, target: ComputeTarget) -> str:
    """local[N] on this machine; the standalone cluster's master on a Spark target."""
    if target.type == SPARK_TARGET:
        return str(target.settings["master"])
    if target.type == SLURM_TARGET:
        return ALLOCATION_MASTER
    return f"local[{loaded.local_cores}]"


def _runtime_version(loaded: LoadedSparkJob) -> str:
    resources = loaded.spark.resources
    return (resources.runtime_version or "") if resources else ""


def runtime_defaults(loaded: LoadedSparkJob) -> dict[str, str]:
    """Spark 3's defaults that Spark 4 changed, for a job written for a 3.x runtime (Azure ML's
    runtimes, serverless and Synapse, are 3.x: a job that names none is one): ANSI SQL, on by
    default since 4.0, which pandas on Spark refuses to run under. The job's conf wins."""
    version = _runtime_version(loaded)
    if version and not version.startswith("3"):
        return {}
    return {key: value for key, value in SPARK_3_DEFAULTS.items() if key not in loaded.spark.conf}


def runtime_note(loaded: LoadedSparkJob) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in runtime_defaults(loaded).items())
    version = _runtime_version(loaded)
    asked = f"resources.runtime_version {version}" if version else "no resources.runtime_version (Azure ML's are 3.x)"
    return (
        f"{asked}: the job runs on this machine's Spark (pyspark's), with Spark 3's defaults where 4 "
        f"changed them ({settings})"
    )


def engine_note(target: ComputeTarget) -> str:
    """What a Spark job does on an engine's target without a cluster of its own (Ray, Kubernetes): local
    mode on one node."""
    return (
        f"compute {target.name!r} is {target.type}: the job runs in Spark's local mode on one node of it (a "
        "standalone Spark cluster across the job's nodes is not started there), its UI on that node"
    )


CORES_MAX = "spark.cores.max"


def standalone_defaults(conf: dict[str, str]) -> dict[str, str]:
    """On a Spark target: the cores the executors the job asks for hold together, as
    `spark.cores.max`. A standalone master gives an application every free core of the cluster
    (as many executors of `spark.executor.cores` as fit) whatever `spark.executor.instances`
    says; Azure ML starts the instances asked for. A `spark.cores.max` of the job's own wins."""
    if CORES_MAX in conf:
        return {}
    cores = conf.get(EXECUTOR_CORES, "1").strip()
    per_executor = int(cores) if cores.isdigit() and int(cores) > 0 else 1
    return {CORES_MAX: str(executor_count(conf) * per_executor)}


def executor_count(conf: dict[str, str]) -> int:
    """The executors the job asks for: the instances, or the most dynamic allocation may start."""
    text = conf.get(MAX_EXECUTORS if dynamic_allocation(conf) else EXECUTOR_INSTANCES, "1").strip()
    return int(text) if text.isdigit() and int(text) > 0 else 1


def scala_version(home: Path) -> str:
    """The Scala version pyspark's jars were built with (what bin/load-spark-env.sh would set):
    a worker builds its executors' command with it."""
    for jar in sorted((home / "jars").glob("scala-library-*.jar")):
        parts = jar.stem.removeprefix("scala-library-").split(".")
        if len(parts) >= 2 and all(part.isdigit() for part in parts[:2]):
            return ".".join(parts[:2])
    return "2.13"


def on_allocation(loaded: LoadedSparkJob, home: Path, spec: models.JobSpec) -> tuple[models.JobSpec, str]:
    """The command job on a Slurm target: one node per executor, each node's worker one executor's
    size (`spark.executor.cores|memory`), marked for the node agents to start the cluster."""
    conf = loaded.spark.conf
    nodes = executor_count(conf)
    cores, memory = conf.get(EXECUTOR_CORES, "1"), conf.get(EXECUTOR_MEMORY, "1g")
    variables = {
        SPARK_CLUSTER_VAR: "standalone",
        "SPARK_WORKER_CORES": cores,
        "SPARK_WORKER_MEMORY": memory,
        "SPARK_SCALA_VERSION": scala_version(home),
    }
    resources = models.ResourceConfiguration(instance_count=nodes)
    spec = spec.model_copy(update={"environment_variables": variables, "resources": resources})
    note = (
        f"on Slurm the job starts a Spark standalone cluster in its allocation of {nodes} node(s), one per executor: "
        f"a master on the first node, a worker on each ({cores} core(s), {memory}), the driver on the first node; "
        "distrun stops them when the driver ends"
    )
    return spec, note


# A job's environment (a conda file distrun built, a named one with its own Python) puts its
# Python first: VIRTUAL_ENV's (for a built one, the job's own layer over it). The driver and
# every executor's Python workers run it: Spark hands PYSPARK_PYTHON's path to the executors,
# so their workers import what the environment has (on a cluster, a path the workers share).
ENVIRONMENT_PYTHON = 'if [ -x "$VIRTUAL_ENV/bin/python" ]; then export PYSPARK_PYTHON="$VIRTUAL_ENV/bin/python"; fi; '


def with_environment_python(loaded: LoadedSparkJob, command: str) -> str:
    """`command` run with the job's environment's Python as Spark's (distrun's own where the
    job has none); a PYSPARK_PYTHON the job sets itself stays."""
    return command if "PYSPARK_PYTHON" in loaded.spark.environment_variables else ENVIRONMENT_PYTHON + command


def ready_to_run(loaded: LoadedSparkJob, target: ComputeTarget) -> SparkRun:
    """The job's command for `target`, with Spark's home, the driver's Python and a free UI port."""
    from distrun.backends.ports import free_ports
    from distrun.plan.pytorch import PROCESS_LABEL_VAR

    home = spark_home()
    java_found()
    (port,) = free_ports(1, address="127.0.0.1")
    extra = {"spark.ui.port": str(port), "spark.ui.showConsoleProgress": "false", **runtime_defaults(loaded)}
    if target.type == SPARK_TARGET:
        extra.update(standalone_defaults(loaded.spark.conf))
        if target.settings.get("driver_host"):
            extra["spark.driver.host"] = str(target.settings["driver_host"])
    spec = command_job(loaded.spark, master_of(loaded, target), extra)
    variables = {"SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, PROCESS_LABEL_VAR: "driver"}
    cluster_note = None
    if target.type == SLURM_TARGET:
        spec, cluster_note = on_allocation(loaded, home, spec)
        variables.update(spec.environment_variables)
    elif target.type != SPARK_TARGET:  # local mode talks to no other machine
        variables["SPARK_LOCAL_IP"] = "127.0.0.1"
    variables.update(loaded.spark.environment_variables)
    command = with_environment_python(loaded, spec.command or "")
    spec = spec.model_copy(update={"environment_variables": variables, "command": command})
    ui = f"http://127.0.0.1:{loaded.spark.conf.get('spark.ui.port', port)}"
    if target.type == SLURM_TARGET:  # `job show` names its address once the driver started
        ui = f"port {loaded.spark.conf.get('spark.ui.port', port)} of the allocation's first node"
    local = () if target.type in (SPARK_TARGET, SLURM_TARGET) or not loaded.local_note else (loaded.local_note,)
    if cluster_note:
        local = (cluster_note,)
    elif target.type not in (SPARK_TARGET, LOCAL):
        local = (*local, engine_note(target))
    runtime = (runtime_note(loaded),) if runtime_defaults(loaded) else ()
    notes = (*local, *runtime, *loaded.notes, f"Spark UI while the job runs: {ui}")
    return SparkRun(dataclasses.replace(loaded, spec=spec), ui, notes)
