"""A Spark job on a Slurm target: a Spark standalone cluster inside the job's allocation, for its life.

The Spark job arrives as the command job that runs `spark-submit` (`distrun.runner.spark_jobs`),
marked with SPARK_CLUSTER_VAR, on as many nodes as it has executors. Each node's agent turns the
plan of that command into the cluster's (`for_spark`, a pure function of the plan):

- node 0 runs a Spark master (`java -cp $SPARK_HOME/jars/* ...Master`) on MASTER_ADDR:MASTER_PORT,
  the port the batch script found free there;
- every node runs a Spark worker, which waits until the master's port answers, then registers
  with it; it offers SPARK_WORKER_CORES and SPARK_WORKER_MEMORY (one executor's size);
- node 0 also runs the driver: it waits until every worker registered (each says so in its log),
  then `spark-submit --master spark://MASTER_ADDR:MASTER_PORT` in client mode.

The master and the workers are auxiliary processes of the gang: they serve until the driver
ends, then distrun stops them (SIGTERM to their process groups, which hold the executors too,
then SIGKILL, then the launch-marker sweep); one that dies first fails the job, and a cancel or a
timeout stops them with the driver. They need nothing on the nodes but Java and pyspark's
distribution (SPARK_HOME, set for the job): the JVMs start with `java` itself, as `spark-class`
would start them. Their output goes to the job folder, `spark-cluster/master.log` and
`spark-cluster/worker_NN.log` (one per node; `.attempt_K.log` for attempt K of a job with
restarts), with each worker's folder (`work_NN/`, where its executors' logs are) beside them;
their stream lines are one line each saying where.
"""

from __future__ import annotations

import dataclasses
import shlex

from distrun.plan.common import shell_argv
from distrun.plan.model import LaunchPlan, ProcessSpec
from distrun.spec.spark_submit import SPARK_CLUSTER_VAR

__all__ = ["CLUSTER_FOLDER", "SPARK_CLUSTER_VAR", "for_spark", "marked"]

# Set (to "standalone") in the job's variables by `distrun.runner.spark_jobs` for a Spark job on Slurm.
CLUSTER_FOLDER = "spark-cluster"  # in the job folder
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# How long the driver waits for every worker, and a worker for the master's port, before failing.
JOIN_TIMEOUT_S = 300
REGISTERED = "Successfully registered with master"
RESTART_COUNT = "DISTRUN_RESTART_COUNT"  # every process's: which attempt of the job this is
_FOLDER = f'"$DISTRUN_JOB_DIR/{CLUSTER_FOLDER}"'
# `java` of JAVA_HOME, else the one on PATH; pyspark's conf and jars, as bin/spark-class uses them.
# The daemon's heap is Spark's default daemon memory unless SPARK_DAEMON_MEMORY says otherwise; C1
# only: the daemons start sooner, and they only schedule (the executors are JVMs of their own).
_JAVA = (
    '"${JAVA_HOME:+$JAVA_HOME/bin/}java" "-Xmx${SPARK_DAEMON_MEMORY:-1g}" -XX:TieredStopAtLevel=1 '
    '-cp "$SPARK_HOME/conf:$SPARK_HOME/jars/*"'
)


def marked(plan: LaunchPlan) -> bool:
    """The plan is a Spark job's that starts a cluster in the allocation (a job-wide variable: the
    first process says it, and a plan of thousands of ranks is not walked)."""
    first = next(plan.processes(), None)
    return first is not None and SPARK_CLUSTER_VAR in first.env


def master_url(plan: LaunchPlan) -> str:
    return f"spark://{plan.master_addr}:{plan.master_port}"


def _log(name: str) -> str:
    return f'"$DISTRUN_JOB_DIR/{CLUSTER_FOLDER}/{name}"'


def log_name(daemon: str, attempt: int) -> str:
    """A daemon's log: one per attempt of a job with restarts (a worker's log of an earlier attempt
    must not tell the driver that this attempt's worker registered)."""
    return f"{daemon}.log" if attempt == 0 else f"{daemon}.attempt_{attempt}.log"


def master_command(plan: LaunchPlan, attempt: int) -> str:
    host, port, log = shlex.quote(plan.master_addr), plan.master_port, log_name("master", attempt)
    return "\n".join(
        [
            f"mkdir -p {_FOLDER} || exit 1",
            f'echo "distrun: Spark master at {master_url(plan)}, its log in {CLUSTER_FOLDER}/{log}"',
            f"exec {_JAVA} {MASTER_CLASS} --host {host} --port {port} --webui-port 0 >>{_log(log)} 2>&1",
        ]
    )


def worker_command(plan: LaunchPlan, node: int, host: str, attempt: int) -> str:
    """Wait (bounded) until the master's port answers, then the worker, its folder and log this node's."""
    master_host, port = shlex.quote(plan.master_addr), plan.master_port
    log, work = log_name(f"worker_{node:02d}", attempt), f"work_{node:02d}"
    return "\n".join(
        [
            f"mkdir -p {_FOLDER}/{work} || exit 1",
            f"until (: </dev/tcp/{master_host}/{port}) 2>/dev/null; do",
            f'  [ $SECONDS -lt {JOIN_TIMEOUT_S} ] || {{ echo "distrun: no Spark master at {master_url(plan)} '
            f'after {JOIN_TIMEOUT_S} s" >&2; exit 1; }}',
            "  sleep 0.2",
            "done",
            f'echo "distrun: Spark worker on $(hostname) ({host}), its log in {CLUSTER_FOLDER}/{log}"',
            f'export SPARK_WORKER_DIR="$DISTRUN_JOB_DIR/{CLUSTER_FOLDER}/{work}"',
            f"exec {_JAVA} {WORKER_CLASS} --host {shlex.quote(host)} --webui-port 0 {master_url(plan)} "
            f">>{_log(log)} 2>&1",
        ]
    )


def wait_for_workers(nodes: int, attempt: int) -> str:
    """The driver's first lines: every worker's log says it registered, within JOIN_TIMEOUT_S."""
    logs = " ".join(log_name(f"worker_{node:02d}", attempt) for node in range(nodes))
    return "\n".join(
        [
            f"for log in {logs}; do",
            f'  until grep -qs "{REGISTERED}" "$DISTRUN_JOB_DIR/{CLUSTER_FOLDER}/$log"; do',
            f'    [ $SECONDS -lt {JOIN_TIMEOUT_S} ] || {{ echo "distrun: not every Spark worker registered within '
            f'{JOIN_TIMEOUT_S} s: see {CLUSTER_FOLDER}/$log" >&2; exit 1; }}',
            "    sleep 0.2",
            "  done",
            "done",
            f'echo "distrun: Spark standalone cluster up: {nodes} worker(s)"',
        ]
    )


def _daemon(driver: ProcessSpec, name: str, role: str, node: int, host: str, command: str) -> ProcessSpec:
    env = dict(driver.env, NODE_RANK=str(node), AZUREML_CR_NODE_RANK=str(node), SPARK_LOCAL_IP=host)
    env["AZUREML_PROCESS_NAME"] = name
    return dataclasses.replace(
        driver,
        name=name,
        role=role,
        index=node,
        node_rank=node,
        local_rank=0,
        rank=None,
        argv=shell_argv(command),
        env=env,
        log_name=f"std_log_{name}.txt",
        label=f"{node}/{role}",
        auxiliary=True,
    )


def for_spark(plan: LaunchPlan) -> LaunchPlan:
    """The plan of a marked Spark job made the cluster's (see the module's doc); any other plan as it is."""
    if not marked(plan):
        return plan
    driver = next(plan.processes())
    attempt = int(count) if (count := driver.env.get(RESTART_COUNT, "0")).isdigit() else 0
    nodes = []
    for node in plan.nodes:
        worker = _daemon(
            driver, f"spark_worker_{node.node_rank}", "spark-worker", node.node_rank, node.host,
            worker_command(plan, node.node_rank, node.host, attempt),
        )  # fmt: skip
        processes = [worker]
        if node.node_rank == 0:
            master = _daemon(driver, "spark_master", "spark-master", 0, node.host, master_command(plan, attempt))
            run = f"{wait_for_workers(len(plan.nodes), attempt)}\n{driver.argv[-1]}"
            env = dict(driver.env, SPARK_LOCAL_IP=node.host)
            main = dataclasses.replace(driver, argv=(*driver.argv[:-1], run), env=env, label="driver")
            processes = [main, master, worker]
        nodes.append(dataclasses.replace(node, processes=tuple(processes)))
    note = (
        f"a Spark standalone cluster inside the allocation: a master on node 0 ({master_url(plan)}), a worker on "
        f"each of the {len(plan.nodes)} nodes; the driver on node 0, once every worker registered; distrun stops "
        f"master and workers when it ends (their logs: {CLUSTER_FOLDER}/ in the job folder)"
    )
    return dataclasses.replace(plan, nodes=tuple(nodes), world_size=1, notes=(*plan.notes, note))
