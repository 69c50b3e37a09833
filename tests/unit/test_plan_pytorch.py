"""Rank arithmetic of the PyTorch plan, for any number of nodes and processes per node.

Plans are pure, so placements and bindings are built by hand here: no backend, no process.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.plan import build_plan
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.plan.plan_job import PlanJob
from distrun.plan.pytorch import plan_pytorch, rank_of
from distrun.spec.models import JobSpec

PLAN = settings(max_examples=150, deadline=None)

host_names = st.one_of(
    st.just("127.0.0.1"),  # simulated nodes on this machine share one address
    st.integers(min_value=1, max_value=254).map(lambda n: f"10.0.0.{n}"),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
)


@st.composite
def jobs(draw: st.DrawFn) -> tuple[JobSpec, Placement, Bindings]:
    nodes = draw(st.integers(min_value=1, max_value=12))
    per_node = draw(st.integers(min_value=1, max_value=12))
    distribution = draw(
        st.one_of(
            st.just({"type": "pytorch", "process_count_per_instance": per_node}),
            st.just({"type": "PyTorch", "process_count_per_instance": per_node}),
            st.just(None),  # no distribution: one process per node
        )
    )
    user_env = draw(
        st.dictionaries(st.from_regex(r"USER_[A-Z0-9_]{1,8}", fullmatch=True), st.text(max_size=10), max_size=3)
    )
    data: dict[str, Any] = {
        "command": "python train.py --lr ${{inputs.lr}} --out ${{outputs.model}} --rank $RANK",
        "inputs": {"lr": 0.1},
        "outputs": {"model": None},
        "resources": {"instance_count": nodes},
        "environment_variables": user_env,
    }
    if distribution is not None:
        data["distribution"] = distribution
    job = JobSpec.model_validate(data)
    placement = Placement(
        hosts=tuple(draw(st.lists(host_names, min_size=nodes, max_size=nodes))),
        master_port=draw(st.integers(min_value=1, max_value=65535)),
        job_dir=draw(st.sampled_from(["/jobs/j1", "/home/u/.distrun/jobs/brave_fox_1/", "/tmp/a b"])),
        run_id=draw(st.sampled_from(["j1", "brave_fox_1"])),
        simulated=draw(st.booleans()),
    )
    bindings = Bindings(inputs={"lr": "0.1"}, outputs={"model": f"{placement.job_dir.rstrip('/')}/outputs/model"})
    return job, placement, bindings


def _per_node(job: JobSpec) -> int:
    return getattr(job.distribution, "process_count_per_instance", 1)


@PLAN
@given(case=jobs())
def test_every_rank_appears_once_and_follows_node_and_local_rank(case: tuple[JobSpec, Placement, Bindings]) -> None:
    job, placement, bindings = case
    plan = plan_pytorch(PlanJob.of(job), placement, bindings)
    nodes, per_node = len(placement.hosts), _per_node(job)
    world = nodes * per_node
    assert plan.world_size == world
    processes = list(plan.processes())
    assert sorted(p.rank for p in processes if p.rank is not None) == list(range(world))
    assert [n.node_rank for n in plan.nodes] == list(range(nodes))
    assert tuple(n.host for n in plan.nodes) == placement.hosts
    for node in plan.nodes:
        assert [p.local_rank for p in node.processes] == list(range(per_node))
        for process in node.processes:
            assert process.node_rank == node.node_rank
            assert process.rank == node.node_rank * per_node + process.local_rank
            env = process.env
            assert int(env["RANK"]) == process.rank == int(env["ROLE_RANK"])
            assert int(env["RANK"]) == int(env["NODE_RANK"]) * per_node + int(env["LOCAL_RANK"])
            assert int(env["LOCAL_RANK"]) == process.local_rank
            assert int(env["NODE_RANK"]) == node.node_rank == int(env["GROUP_RANK"])
            assert int(env["AZUREML_CR_NODE_RANK"]) == node.node_rank
            assert env["AZUREML_PROCESS_NAME"] == process.name == f"rank_{process.rank}"
            assert process.role == "rank" and process.index == process.rank


@PLAN
@given(case=jobs())
def test_world_and_rendezvous_variables_are_consistent(case: tuple[JobSpec, Placement, Bindings]) -> None:
    job, placement, bindings = case
    plan = plan_pytorch(PlanJob.of(job), placement, bindings)
    nodes, per_node = len(placement.hosts), _per_node(job)
    master = placement.hosts[0]
    assert (plan.master_addr, plan.master_port) == (master, placement.master_port)
    for process in plan.processes():
        env = process.env
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        assert env["WORLD_SIZE"] == str(nodes * per_node) == env["ROLE_WORLD_SIZE"]
        assert env["LOCAL_WORLD_SIZE"] == str(per_node)
        assert env["GROUP_WORLD_SIZE"] == str(nodes) == env["AZUREML_NODE_COUNT"]
        assert env["MASTER_ADDR"] == master == env["AZ_BATCHAI_MPI_MASTER_NODE"]
        assert env["MASTER_PORT"] == str(placement.master_port)
        assert env["AZ_BATCH_MASTER_NODE"] == f"{master}:{placement.master_port}"
        assert env["AZ_BATCH_HOST_LIST"].split(",") == list(placement.hosts)
        assert env["AZUREML_RUN_ID"] == placement.run_id
        for name, value in job.environment_variables.items():
            assert env[name] == value
        # torchrun's habit: one OpenMP thread per process when several share a node, as a default only.
        assert "OMP_NUM_THREADS" not in env
        assert process.env_defaults == ({"OMP_NUM_THREADS": "1"} if per_node > 1 else {})


@PLAN
@given(case=jobs())
def test_the_host_list_is_kept_once_and_every_process_still_gets_it(case: tuple[JobSpec, Placement, Bindings]) -> None:
    """`build_plan` keeps AZ_BATCH_HOST_LIST once (it grows with the nodes), and what every
    process is given (`LaunchPlan.environment`) is exactly what the planner gave it."""
    job, placement, bindings = case
    planned = plan_pytorch(PlanJob.of(job), placement, bindings)
    kept = build_plan(job, placement, bindings)
    assert kept.shared_env == {"AZ_BATCH_HOST_LIST": ",".join(placement.hosts)}
    for before, after in zip(planned.processes(), kept.processes(), strict=True):
        assert "AZ_BATCH_HOST_LIST" not in after.env
        assert kept.environment(after) == planned.environment(before)
    assert len(json.dumps(kept.to_dict())) <= len(json.dumps(planned.to_dict()))


@PLAN
@given(case=jobs())
def test_names_logs_and_labels_are_unique(case: tuple[JobSpec, Placement, Bindings]) -> None:
    job, placement, bindings = case
    plan = plan_pytorch(PlanJob.of(job), placement, bindings)
    processes = list(plan.processes())
    for field in ("name", "log_name", "label"):
        values = [getattr(p, field) for p in processes]
        assert len(set(values)) == len(values), field
    for process in processes:
        assert process.log_name == f"std_log_process_{process.rank:02d}.txt"
        assert "/" not in process.log_name


@PLAN
@given(case=jobs())
def test_every_process_runs_the_rendered_command_in_the_code_folder(case: tuple[JobSpec, Placement, Bindings]) -> None:
    job, placement, bindings = case
    plan = plan_pytorch(PlanJob.of(job), placement, bindings)
    out = shlex.quote(bindings.outputs["model"])  # "/tmp/a b/outputs/model" is quoted, the others are not
    assert plan.command == f"python train.py --lr 0.1 --out {out} --rank $RANK"
    for process in plan.processes():
        assert process.argv == ("bash", "-c", plan.command)
        assert process.cwd == placement.job_dir.rstrip("/") + "/code"
        assert not process.auxiliary
    assert plan.distribution == (job.distribution_type or "none")
    assert plan.job_name == placement.run_id


@PLAN
@given(case=jobs())
def test_the_plan_is_deterministic_and_leaves_its_inputs_alone(case: tuple[JobSpec, Placement, Bindings]) -> None:
    job, placement, bindings = case
    job_before = job.model_dump_json()
    bindings_before = json.dumps([bindings.inputs, bindings.outputs, bindings.input_paths])
    first: LaunchPlan = plan_pytorch(PlanJob.of(job), placement, bindings)
    second = plan_pytorch(PlanJob.of(job), placement, bindings)
    assert first == second
    assert json.dumps(first.to_dict(), sort_keys=True) == json.dumps(second.to_dict(), sort_keys=True)
    assert job.model_dump_json() == job_before
    assert json.dumps([bindings.inputs, bindings.outputs, bindings.input_paths]) == bindings_before
    # Processes do not share one env dict: the agent may extend one without touching the others.
    envs = [p.env for p in first.processes()]
    assert len({id(e) for e in envs}) == len(envs)


@given(per_node=st.integers(min_value=1, max_value=64), nodes=st.integers(min_value=1, max_value=64))
def test_rank_of_numbers_node_major(per_node: int, nodes: int) -> None:
    ranks = [rank_of(n, local, per_node) for n in range(nodes) for local in range(per_node)]
    assert ranks == list(range(nodes * per_node))


def test_a_one_process_job_in_a_role_of_its_own_is_labelled_by_it() -> None:
    placement = Placement(hosts=("127.0.0.1",), master_port=29500, job_dir="/jobs/j", run_id="j")
    driver = {"command": "spark-submit x.py", "environment_variables": {"DISTRUN_PROCESS_LABEL": "driver"}}
    two = {**driver, "distribution": {"type": "pytorch", "process_count_per_instance": 2}}
    for data, expected in ((driver, ["driver"]), (two, ["0/0", "0/1"])):  # a role never names a gang's ranks
        plan = plan_pytorch(PlanJob.of(JobSpec.model_validate(data)), placement, Bindings())
        assert [p.label for node in plan.nodes for p in node.processes] == expected
