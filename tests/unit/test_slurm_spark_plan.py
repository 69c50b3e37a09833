"""A Spark job on a Slurm target, the pure parts: the command job it becomes (a node per executor,
the allocation's master) and the plan each node agent makes of it (a standalone cluster)."""

from __future__ import annotations

from pathlib import Path

from distrun.backends.slurm.spark_cluster import SPARK_CLUSTER_VAR, for_spark
from distrun.loading.loader import load_job_file
from distrun.plan import build_plan
from distrun.plan.model import Bindings, Placement
from distrun.prepare.compute import ComputeTarget
from distrun.runner.spark_jobs import ready_to_run

JOB = """\
type: spark
code: ./src
entry:
  file: count.py
conf:
  spark.driver.cores: 1
  spark.driver.memory: 1g
  spark.executor.cores: 2
  spark.executor.memory: 3g
  spark.executor.instances: 3
"""
PLACEMENT = Placement(
    hosts=("10.0.0.1", "10.0.0.2", "10.0.0.3"), master_port=7077, job_dir="/shared/jobs/j1", run_id="j1"
)


def _on_slurm(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "count.py").write_text("print('count')\n")
    (tmp_path / "job.yml").write_text(JOB)
    return ready_to_run(load_job_file(tmp_path / "job.yml"), ComputeTarget("hpc", "slurm", {}))  # type: ignore[arg-type]


def test_the_job_asks_a_node_per_executor_each_worker_one_executors_size(tmp_path: Path) -> None:
    run = _on_slurm(tmp_path)
    spec = run.loaded.spec
    assert spec.resources.instance_count == 3
    assert '--master "spark://${MASTER_ADDR}:${MASTER_PORT}"' in spec.command  # expanded on node 0
    env = spec.environment_variables
    assert (env[SPARK_CLUSTER_VAR], env["SPARK_WORKER_CORES"], env["SPARK_WORKER_MEMORY"]) == ("standalone", "2", "3g")
    assert "SPARK_LOCAL_IP" not in env  # each node's own address, set per process by the node agents
    assert any("a Spark standalone cluster in its allocation of 3 node(s)" in note for note in run.notes)
    assert not any("local mode" in note for note in run.notes)


def test_each_node_runs_a_worker_node_0_the_master_and_the_driver_once_all_registered(tmp_path: Path) -> None:
    plain = build_plan(_on_slurm(tmp_path).loaded.spec, PLACEMENT, Bindings())
    plan = for_spark(plain)
    by_node = [[(p.name, p.auxiliary) for p in node.processes] for node in plan.nodes]
    assert by_node == [
        [("rank_0", False), ("spark_master", True), ("spark_worker_0", True)],
        [("spark_worker_1", True)],
        [("spark_worker_2", True)],
    ]
    driver, master, _ = plan.nodes[0].processes
    assert driver.label == "driver" and driver.log_name == "std_log_process_00.txt"
    assert "worker_00.log worker_01.log worker_02.log" in driver.argv[-1]  # waits for all three
    assert driver.argv[-1].endswith("\n" + plain.command)  # then the job's spark-submit, as it was
    assert "--host 10.0.0.1 --port 7077" in master.argv[-1]
    far = plan.nodes[2].processes[0]
    assert "--host 10.0.0.3 --webui-port 0 spark://10.0.0.1:7077" in far.argv[-1]
    assert far.env["SPARK_LOCAL_IP"] == "10.0.0.3" and driver.env["SPARK_LOCAL_IP"] == "10.0.0.1"
    assert '"$DISTRUN_JOB_DIR/spark-cluster/worker_02.log"' in far.argv[-1]  # its log kept in the job folder
    assert any("a Spark standalone cluster inside the allocation" in note for note in plan.notes)


def test_a_plan_that_is_not_a_spark_jobs_is_left_as_it_is() -> None:
    from distrun.loading.loader import load_job_data

    spec = load_job_data({"command": "echo hi", "resources": {"instance_count": 3}}, "job.yml").spec
    plan = build_plan(spec, PLACEMENT, Bindings())
    assert for_spark(plan) is plan


def test_distrun_plan_shows_the_cluster_a_slurm_target_gets(tmp_path: Path) -> None:
    from distrun.prepare.compute import add_target
    from distrun.runner.jobs import plan_job
    from distrun.store.layout import Layout

    run = _on_slurm(tmp_path)  # writes the job's files
    layout = Layout(tmp_path / "home")
    add_target(layout.config_path, "hpc", "slurm", {"partition": "debug"})
    rendered = plan_job(load_job_file(tmp_path / "job.yml"), layout, "hpc")
    assert [p.name for p in rendered.plan.processes()] == [
        "rank_0", "spark_master", "spark_worker_0", "spark_worker_1", "spark_worker_2",
    ]  # fmt: skip
    assert any("a Spark standalone cluster in its allocation of 3 node(s)" in note for note in rendered.notes)
    assert run.loaded.spec.resources.instance_count == 3


def test_a_restarted_attempt_waits_for_its_own_workers_logs(tmp_path: Path) -> None:
    import dataclasses

    again = dataclasses.replace(PLACEMENT, restart_count=2)
    plan = for_spark(build_plan(_on_slurm(tmp_path).loaded.spec, again, Bindings()))
    driver, master, _ = plan.nodes[0].processes
    assert "worker_00.attempt_2.log worker_01.attempt_2.log worker_02.attempt_2.log" in driver.argv[-1]
    assert '"$DISTRUN_JOB_DIR/spark-cluster/master.attempt_2.log"' in master.argv[-1]
    assert '"$DISTRUN_JOB_DIR/spark-cluster/worker_01.attempt_2.log"' in plan.nodes[1].processes[0].argv[-1]
