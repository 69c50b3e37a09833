"""The TensorFlow planner (pure) and the TensorFlow spec checks: no processes are started."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.core.errors import DistrunError, ValidationError
from distrun.loading.checks_tensorflow import tensorflow_problems
from distrun.loading.loader import LoadedJob, load_job_file
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Bindings, LaunchPlan, Placement, ProcessSpec
from distrun.plan.plan_job import PlanJob
from distrun.plan.tensorflow import plan_tensorflow
from distrun.spec.models import JobSpec
from distrun.spec.normalize import normalize
from distrun.spec.yaml_source import read_yaml_file

SEED_001_PS_JOB = """\
command: python train.py --magic $MAGIC
code:
  path:
    ./src
environment:
  docker:
    image: docker.io/tensorflow
environment_variables:
  MAGIC: number

distributed:
  tensorflow:
    worker:
      count: 2
      resource_limits:
        cpu: 4
    parameter_server:
      count: 4
      environment:
        docker:
          image: docker.io/python
      resource_limits:
        gpu: 4
        memory: 2Gi
      environment_variables:
        MAGIC: newnumber
compute:
  infrastructure: managed
  target: gpu-cluster
"""


def tf_job(nodes: int = 1, workers: int | None = None, ps: int = 0, chief: int = 0, **extra: object) -> JobSpec:
    dist: dict[str, object] = {"type": "tensorflow", "parameter_server_count": ps, "chief_count": chief}
    if workers is not None:
        dist["worker_count"] = workers
    data = {"command": "python train.py", "resources": {"instance_count": nodes}, "distribution": dist, **extra}
    return JobSpec.model_validate(data)


def placement_for(job: JobSpec, hosts: tuple[str, ...], ports: tuple[int, ...] | None = None) -> Placement:
    count = task_port_count(job)
    return Placement(
        hosts=hosts,
        master_port=29500,
        job_dir="/jobs/tf-1",
        run_id="tf-1",
        task_ports=ports if ports is not None else tuple(range(20000, 20000 + count)),
        simulated=len(set(hosts)) == 1,
    )


def plan_of(job: JobSpec, hosts: tuple[str, ...], ports: tuple[int, ...] | None = None) -> LaunchPlan:
    return plan_tensorflow(PlanJob.of(job), placement_for(job, hosts, ports), Bindings())


def config(plan: LaunchPlan, proc: ProcessSpec) -> dict:
    return json.loads(plan.environment(proc)["TF_CONFIG"])


def load(tmp_path: Path, text: str) -> LoadedJob:
    """A job as the loader builds it, before its semantic checks (which may include ours)."""
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "job.yml"
    path.write_text(text)
    data, smap = read_yaml_file(path)
    spec = JobSpec.model_validate(normalize(data, smap))
    return LoadedJob(spec, tmp_path, str(path), smap)


# ---------------------------------------------------------------- TF_CONFIG


def test_two_workers_on_two_nodes_get_azure_ml_tf_config() -> None:
    plan = plan_of(tf_job(nodes=2), ("10.0.0.1", "10.0.0.2"), (2222, 2223))
    procs = list(plan.processes())
    assert [(p.name, p.node_rank, p.label) for p in procs] == [("worker_0", 0, "worker 0"), ("worker_1", 1, "worker 1")]
    assert config(plan, procs[1]) == {
        "cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2223"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert plan.distribution == "tensorflow"
    assert plan.world_size == 2


def test_no_empty_ps_or_chief_list_in_cluster() -> None:
    plan = plan_of(tf_job(nodes=2), ("127.0.0.1", "127.0.0.1"))
    for proc in plan.processes():
        assert set(config(plan, proc)["cluster"]) == {"worker"}


def test_chief_workers_and_ps_in_cluster_order_with_ports_in_that_order() -> None:
    job = tf_job(nodes=2, workers=2, ps=1, chief=1)
    plan = plan_of(job, ("127.0.0.1", "127.0.0.1"), (31000, 31001, 31002, 31003))
    cluster = config(plan, next(plan.processes()))["cluster"]
    assert list(cluster) == ["chief", "worker", "ps"]
    assert cluster == {
        "chief": ["127.0.0.1:31000"],
        "worker": ["127.0.0.1:31001", "127.0.0.1:31002"],
        "ps": ["127.0.0.1:31003"],
    }


def test_worker_count_defaults_to_instance_count() -> None:
    job = tf_job(nodes=3)
    assert task_port_count(job) == 3
    assert [p.name for p in plan_of(job, ("a", "b", "c")).processes()] == ["worker_0", "worker_1", "worker_2"]


def test_task_port_count_counts_every_task_and_is_zero_for_other_types() -> None:
    assert task_port_count(tf_job(nodes=2, workers=3, ps=2, chief=1)) == 6
    assert task_port_count(JobSpec.model_validate({"command": "x", "distribution": {"type": "pytorch"}})) == 0


def test_build_plan_dispatches_tensorflow() -> None:
    job = tf_job(nodes=1, workers=2)
    plan = build_plan(job, placement_for(job, ("127.0.0.1",)), Bindings())
    assert plan.distribution == "tensorflow"
    assert len(list(plan.processes())) == 2


# ---------------------------------------------------------------- environment


def test_tasks_get_tf_config_and_job_env_but_no_rank() -> None:
    job = tf_job(nodes=2, workers=2, ps=1, environment_variables={"MY_FLAG": "1"})
    for proc in plan_of(job, ("h0", "h1")).processes():
        assert proc.rank is None
        for absent in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            assert absent not in proc.env
        assert proc.env["MY_FLAG"] == "1"
        assert proc.env["DISTRUN_JOB_NAME"] == "tf-1"
        assert proc.env["NODE_RANK"] == str(proc.node_rank)
        assert proc.env["AZUREML_PROCESS_NAME"] == proc.name
        assert proc.env["DISTRUN_TASK_TYPE"] == proc.role
        assert proc.env["DISTRUN_TASK_INDEX"] == str(proc.index)
        assert proc.argv == ("bash", "-c", "python train.py")
        assert proc.cwd == "/jobs/tf-1/code"


def test_parameter_server_environment_variables_reach_ps_tasks_only() -> None:
    job = tf_job(
        nodes=1,
        workers=2,
        ps=2,
        environment_variables={"MAGIC": "number", "SHARED": "yes"},
        distribution={
            "type": "tensorflow",
            "worker_count": 2,
            "parameter_server_count": 2,
            "parameter_server": {"environment_variables": {"MAGIC": "newnumber"}},
        },
    )
    seen = {p.name: (p.env["MAGIC"], p.env["SHARED"]) for p in plan_of(job, ("127.0.0.1",)).processes()}
    assert seen == {
        "worker_0": ("number", "yes"),
        "worker_1": ("number", "yes"),
        "ps_0": ("newnumber", "yes"),
        "ps_1": ("newnumber", "yes"),
    }


# ---------------------------------------------------------------- roles, logs, labels


def test_parameter_servers_are_auxiliary_and_workers_are_not_without_chief() -> None:
    plan = plan_of(tf_job(nodes=2, workers=2, ps=1), ("a", "b"))
    assert {p.name: p.auxiliary for p in plan.processes()} == {"worker_0": False, "worker_1": False, "ps_0": True}
    assert any("worker 0 acts as chief" in note for note in plan.notes)


def test_under_a_chief_with_ps_only_the_chief_decides_completion() -> None:
    plan = plan_of(tf_job(nodes=2, workers=2, ps=1, chief=1), ("a", "b"))
    assert {p.name: p.auxiliary for p in plan.processes()} == {
        "chief_0": False,
        "worker_0": True,
        "worker_1": True,
        "ps_0": True,
    }
    assert not any("acts as chief" in note for note in plan.notes)


def test_chief_without_ps_keeps_workers_training() -> None:
    plan = plan_of(tf_job(nodes=1, workers=2, chief=1), ("a",))
    assert not any(p.auxiliary for p in plan.processes())


def test_log_names_follow_azure_ml_and_stay_unique() -> None:
    plan = plan_of(tf_job(nodes=2, workers=2, ps=1), ("a", "b"))
    assert {p.name: p.log_name for p in plan.processes()} == {
        "worker_0": "std_log_node_00_worker.txt",
        "worker_1": "std_log_node_01_worker.txt",
        "ps_0": "std_log_node_00_ps.txt",
    }
    crowded = plan_of(tf_job(nodes=1, workers=2, ps=1, chief=1), ("a",))
    assert {p.name: p.log_name for p in crowded.processes()} == {
        "chief_0": "std_log_node_00_chief.txt",
        "worker_0": "std_log_node_00_worker_0.txt",
        "worker_1": "std_log_node_00_worker_1.txt",
        "ps_0": "std_log_node_00_ps.txt",
    }


# ---------------------------------------------------------------- backend contract


def test_too_few_task_ports_is_an_error() -> None:
    job = tf_job(nodes=1, workers=2, ps=1)
    with pytest.raises(DistrunError, match="needs 3 task ports"):
        plan_of(job, ("127.0.0.1",), (2222, 2223))


def test_the_same_port_twice_on_one_host_is_an_error() -> None:
    job = tf_job(nodes=1, workers=2)
    with pytest.raises(DistrunError, match=r"same address: 127\.0\.0\.1:2222"):
        plan_of(job, ("127.0.0.1",), (2222, 2222))


def test_the_same_port_on_different_hosts_is_fine() -> None:
    plan = plan_of(tf_job(nodes=2), ("h0", "h1"), (2222, 2222))
    assert config(plan, next(plan.processes()))["cluster"]["worker"] == ["h0:2222", "h1:2222"]


# ---------------------------------------------------------------- properties


@st.composite
def layouts(draw: st.DrawFn) -> tuple[JobSpec, tuple[str, ...], tuple[int, ...]]:
    nodes = draw(st.integers(1, 5))
    chief = draw(st.integers(0, 1))
    ps = draw(st.integers(0, 5))
    workers = draw(st.one_of(st.none(), st.integers(1, 7)))
    job = tf_job(nodes=nodes, workers=workers, ps=ps, chief=chief)
    simulated = draw(st.booleans())
    hosts = ("127.0.0.1",) * nodes if simulated else tuple(f"10.0.0.{n + 1}" for n in range(nodes))
    count = task_port_count(job)
    ports = tuple(draw(st.lists(st.integers(1024, 65535), min_size=count, max_size=count, unique=True)))
    return job, hosts, ports


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_every_plan_is_consistent(case: tuple[JobSpec, tuple[str, ...], tuple[int, ...]]) -> None:
    job, hosts, ports = case
    dist = job.distribution
    plan = plan_of(job, hosts, ports)
    procs = list(plan.processes())
    workers = dist.worker_count if dist.worker_count is not None else len(hosts)
    expected = {"chief": dist.chief_count, "worker": workers, "ps": dist.parameter_server_count}

    # one process per task, indexes 0..n-1 per role, unique names and log names
    assert Counter(p.role for p in procs) == +Counter(expected)
    for role, count in expected.items():
        assert sorted(p.index for p in procs if p.role == role) == list(range(count))
    assert len({p.name for p in procs}) == len(procs)
    assert len({p.log_name for p in procs}) == len(procs)
    assert len({p.label for p in procs}) == len(procs)
    assert plan.world_size == len(procs) == len(ports)

    # one cluster for all, no empty lists, every address unique, ports used in cluster order
    clusters = [config(plan, p)["cluster"] for p in procs]
    assert all(c == clusters[0] for c in clusters)
    cluster = clusters[0]
    assert all(cluster.values()) and list(cluster) == [r for r in ("chief", "worker", "ps") if expected[r]]
    addresses = [a for role in cluster for a in cluster[role]]
    assert len(set(addresses)) == len(addresses)
    assert [int(a.rsplit(":", 1)[1]) for a in addresses] == list(ports)

    # each task's own entry is where it runs
    for p in procs:
        cfg = config(plan, p)
        assert cfg["task"] == {"type": p.role, "index": p.index} and cfg["environment"] == "cloud"
        assert cluster[p.role][p.index].rsplit(":", 1)[0] == hosts[p.node_rank]
        assert plan.nodes[p.node_rank].host == hosts[p.node_rank]

    # spread: per role and in total, node loads differ by at most one
    for role in (*expected, None):
        load = Counter(p.node_rank for p in procs if role is None or p.role == role)
        counts = [load.get(n, 0) for n in range(len(hosts))]
        assert max(counts) - min(counts) <= 1

    # local ranks number each node's processes from 0
    for node in plan.nodes:
        assert [p.local_rank for p in node.processes] == list(range(len(node.processes)))

    # parameter servers always auxiliary; something non-auxiliary always decides completion
    assert all(p.auxiliary for p in procs if p.role == "ps")
    assert any(not p.auxiliary for p in procs)

    # deterministic
    assert plan_of(job, hosts, ports) == plan


# ---------------------------------------------------------------- the seed's draft form and checks


def test_seed_001_draft_form_plans_ps_with_their_own_variables(tmp_path: Path) -> None:
    loaded = load(tmp_path, SEED_001_PS_JOB)
    dist = loaded.spec.distribution
    assert (dist.worker_count, dist.parameter_server_count) == (2, 4)
    assert dist.parameter_server.resource_limits == {"gpu": 4, "memory": "2Gi"}
    assert dist.parameter_server.environment == {"docker": {"image": "docker.io/python"}}
    assert tensorflow_problems(loaded) == []
    plan = plan_of(loaded.spec, ("127.0.0.1",))
    magic = {p.name: p.env["MAGIC"] for p in plan.processes()}
    assert magic == {
        "worker_0": "number",
        "worker_1": "number",
        **{f"ps_{i}": "newnumber" for i in range(4)},
    }
    assert any("parameter_server environment and resource_limits recorded" in n for n in plan.notes)


def _problems(tmp_path: Path, text: str) -> list:
    return tensorflow_problems(load(tmp_path, text))


def test_nodes_without_a_task_are_reported_at_worker_count(tmp_path: Path) -> None:
    text = "command: x\nresources:\n  instance_count: 4\ndistribution:\n  type: tensorflow\n  worker_count: 2\n"
    [problem] = _problems(tmp_path, text)
    assert "instance_count is 4 but the job has only 2 TensorFlow task(s)" in problem.message
    assert problem.key_path == "distribution.worker_count"
    assert (problem.position.line, problem.position.column) == (6, 3)
    assert "raise worker_count to at least 4" in problem.hint


def test_parameter_servers_count_towards_filling_the_nodes(tmp_path: Path) -> None:
    text = (
        "command: x\nresources: {instance_count: 3}\n"
        "distribution: {type: tensorflow, worker_count: 2, parameter_server_count: 1}\n"
    )
    assert _problems(tmp_path, text) == []


def test_ps_settings_without_ps_count_are_reported(tmp_path: Path) -> None:
    text = (
        "command: x\ndistributed:\n  tensorflow:\n    worker: {count: 1}\n"
        "    parameter_server:\n      environment_variables: {A: b}\n"
    )
    [problem] = _problems(tmp_path, text)
    assert "parameter_server_count is 0" in problem.message
    assert problem.position.line == 5


def test_reserved_variables_in_ps_environment_are_reported(tmp_path: Path) -> None:
    text = (
        "command: x\ndistribution:\n  type: tensorflow\n  parameter_server_count: 1\n"
        "  parameter_server:\n    environment_variables:\n      TF_CONFIG: '{}'\n      DISTRUN_X: y\n"
    )
    problems = _problems(tmp_path, text)
    assert [p.key_path for p in problems] == [
        "distribution.parameter_server.environment_variables.TF_CONFIG",
        "distribution.parameter_server.environment_variables.DISTRUN_X",
    ]
    assert problems[0].position.line == 7


def test_absurd_parameter_server_count_is_reported(tmp_path: Path) -> None:
    text = "command: x\ndistribution: {type: tensorflow, worker_count: 1, parameter_server_count: 9}\n"
    [problem] = _problems(tmp_path, text)
    assert problem.key_path == "distribution.parameter_server_count"


def test_other_distribution_types_have_no_tensorflow_problems(tmp_path: Path) -> None:
    assert _problems(tmp_path, "command: x\ndistribution: {type: pytorch}\nresources: {instance_count: 4}\n") == []


def test_chief_count_above_one_is_rejected_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "job.yml").write_text("command: x\ndistribution: {type: tensorflow, chief_count: 2}\n")
    with pytest.raises(ValidationError, match=r"job.yml:2:\d+: distribution.chief_count: must be at most 1"):
        load_job_file(tmp_path / "job.yml")
