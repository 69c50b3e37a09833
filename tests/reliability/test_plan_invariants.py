"""Plan invariants for every valid job, whatever its distribution (property-based).

Jobs are generated as the plain data a YAML file holds (every distribution type, the seed
draft's `distributed:` form, --set overrides on top), go through the loader like a file does,
and are planned with a placement like the local backend's. A job the loader refuses must be
refused with distrun's ValidationError; every job it accepts must plan so that:

- each process has a unique name and a unique log file (two processes never share a log);
- PyTorch and no distribution: ranks 0..WORLD_SIZE-1 each exactly once, RANK / LOCAL_RANK /
  NODE_RANK / WORLD_SIZE agree with the process's place, one MASTER_ADDR:MASTER_PORT per job;
- TensorFlow: one TF_CONFIG cluster shared by all tasks, every (type, index) exactly once with
  indexes 0..n-1 per role, every task's own address on its node with a port of its own, exactly
  one coordinator (the chief, else worker 0), and at least one task that is not auxiliary (or
  the job could never complete);
- MPI: one launcher, on node 0, starting WORLD_SIZE ranks on a hostfile with WORLD_SIZE slots.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from distrun.core.errors import ValidationError
from distrun.loading.checks import MAX_PROCESSES
from distrun.loading.loader import LoadedJob, load_job_data
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.plan.mpi import HOSTFILE_PATH

EXAMPLES = int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "1000"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

counts = st.integers(min_value=0, max_value=9)
positive = st.integers(min_value=1, max_value=8)
user_env = st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True), st.text(max_size=8), max_size=3)


@st.composite
def distributions(draw: st.DrawFn) -> tuple[str, dict[str, Any] | None]:
    """(form, section): form is 'distribution' or the seed draft's 'distributed'."""
    kind = draw(st.sampled_from(["none", "pytorch", "tensorflow", "mpi"]))
    if kind == "none":
        return "distribution", None
    draft = draw(st.booleans())
    if kind == "pytorch":
        per_node = draw(st.one_of(positive, counts))  # 0 must be refused
        if draft:
            return "distributed", {
                "pytorch": {"worker": {"count": draw(positive)}, "process_count_per_instance": per_node}
            }
        kind_name = draw(st.sampled_from(["pytorch", "PyTorch"]))
        return "distribution", {"type": kind_name, "process_count_per_instance": per_node}
    if kind == "mpi":
        per_node = draw(st.one_of(positive, counts))
        if draft:
            return "distributed", {"mpi": {"worker": {"count": draw(positive), "slots_per": per_node}}}
        section: dict[str, Any] = {
            "type": draw(st.sampled_from(["mpi", "MPI"])),
            "process_count_per_instance": per_node,
        }
        if draw(st.booleans()):
            section["mpirun_args"] = draw(st.sampled_from([[], ["--bind-to", "core"], ["--map-by", "node"]]))
        return "distribution", section
    section = {"type": "tensorflow"}
    for key, values in (
        ("worker_count", st.one_of(st.none(), counts)),
        ("parameter_server_count", st.one_of(st.none(), counts)),
        ("chief_count", st.one_of(st.none(), st.integers(0, 2))),
    ):
        value = draw(values)
        if value is not None:
            section[key] = value
    return "distribution", section


@st.composite
def jobs(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    form, section = draw(distributions())
    command = draw(
        st.sampled_from(
            [
                "python train.py --lr ${{inputs.lr}} --out ${{outputs.model}}",
                "mpirun -np 4 python train.py",  # a user's own launcher under type: mpi
                "echo $RANK $WORLD_SIZE",
            ]
        )
    )
    data: dict[str, Any] = {
        "command": command,
        "inputs": {"lr": 0.1},
        "outputs": {"model": None},
        "environment_variables": draw(user_env),
    }
    if draw(st.booleans()) or form == "distribution":
        data["resources"] = {"instance_count": draw(st.one_of(positive, counts))}
    if section is not None:
        data[form] = section
    overrides = draw(
        st.lists(
            st.sampled_from(
                [
                    "resources.instance_count=3",
                    "resources.instance_count=1",
                    "distribution.process_count_per_instance=2",
                    "distribution.worker_count=4",
                    "distribution.parameter_server_count=2",
                    "distribution.chief_count=1",
                    "environment_variables.EXTRA=1",
                ]
            ),
            max_size=2,
        )
    )
    return data, overrides


def placement_for(loaded: LoadedJob, simulated: bool) -> Placement:
    """What the local backend (simulated) or a cluster backend (distinct hosts) would decide."""
    nodes = loaded.spec.resources.instance_count
    hosts = ("127.0.0.1",) * nodes if simulated else tuple(f"10.0.0.{n + 1}" for n in range(nodes))
    task_ports = tuple(range(20001, 20001 + task_port_count(loaded.spec)))
    return Placement(
        hosts=hosts, master_port=29999, job_dir="/jobs/j1", run_id="j1", task_ports=task_ports, simulated=simulated
    )


def check_common(plan: LaunchPlan, user_env: dict[str, str]) -> None:
    procs = list(plan.processes())
    assert procs, "a plan with no process"
    assert len({p.name for p in procs}) == len(procs), "process names repeat"
    assert len({p.log_name for p in procs}) == len(procs), "two processes would share a log"
    assert [n.node_rank for n in plan.nodes] == list(range(len(plan.nodes)))
    for node in plan.nodes:
        assert all(p.node_rank == node.node_rank for p in node.processes)
        assert [p.local_rank for p in node.processes] == list(range(len(node.processes)))
    for p in procs:
        assert p.cwd == "/jobs/j1/code"
        assert p.env["DISTRUN_JOB_NAME"] == "j1"
        assert p.env.get("NODE_RANK", str(p.node_rank)) == str(p.node_rank)
        assert {k: p.env.get(k) for k in user_env} == user_env  # the user's variables reach every process


def check_pytorch(plan: LaunchPlan, nodes: int, per_node: int) -> None:
    world = nodes * per_node
    procs = list(plan.processes())
    assert plan.world_size == world and len(procs) == world
    assert sorted(p.rank for p in procs) == list(range(world)), "ranks 0..WORLD_SIZE-1 each once"
    masters = {(p.env["MASTER_ADDR"], p.env["MASTER_PORT"]) for p in procs}
    assert masters == {(plan.master_addr, str(plan.master_port))}, "one MASTER per job"
    for p in procs:
        assert p.env["RANK"] == str(p.rank) and p.env["WORLD_SIZE"] == str(world)
        assert p.env["LOCAL_RANK"] == str(p.local_rank) and int(p.env["LOCAL_WORLD_SIZE"]) == per_node
        assert p.rank == p.node_rank * per_node + p.local_rank


def check_tensorflow(plan: LaunchPlan, placement: Placement) -> None:
    procs = list(plan.processes())
    configs = [json.loads(plan.environment(p)["TF_CONFIG"]) for p in procs]
    clusters = {json.dumps(c["cluster"], sort_keys=True) for c in configs}
    assert len(clusters) == 1, "every task sees the same cluster"
    cluster = configs[0]["cluster"]
    tasks = Counter((c["task"]["type"], c["task"]["index"]) for c in configs)
    assert all(n == 1 for n in tasks.values()), "a TF task appears twice"
    for role, addresses in cluster.items():
        assert addresses, f"empty role {role} in cluster (TensorFlow 2.13+ rejects it)"
        assert sorted(i for r, i in tasks if r == role) == list(range(len(addresses)))
    assert set(tasks) == {(r, i) for r, a in cluster.items() for i in range(len(a))}
    every_address = [a for addresses in cluster.values() for a in addresses]
    assert len(set(every_address)) == len(every_address), "two tasks share an address"
    for p, config in zip(procs, configs, strict=True):
        assert (p.role, p.index) == (config["task"]["type"], config["task"]["index"])
        own = cluster[p.role][p.index]
        assert own.rsplit(":", 1)[0] == placement.hosts[p.node_rank], "a task's address is on another node"
        assert "RANK" not in p.env and "WORLD_SIZE" not in p.env
    chiefs = len(cluster.get("chief", []))
    assert chiefs <= 1
    coordinator = ("chief", 0) if chiefs else ("worker", 0)
    assert coordinator in tasks, "exactly one coordinator: the chief, else worker 0"
    assert any(not p.auxiliary for p in procs), "only auxiliary tasks: the job could never complete"
    assert all(p.auxiliary for p in procs if p.role == "ps")
    assert plan.world_size == len(procs)


def check_mpi(plan: LaunchPlan, nodes: int, per_node: int) -> None:
    world = nodes * per_node
    procs = list(plan.processes())
    assert plan.world_size == world
    assert [(p.role, p.node_rank) for p in procs] == [("launcher", 0)], "one launcher, on node 0"
    launcher = procs[0]
    hostfile = plan.nodes[0].files[HOSTFILE_PATH]
    slots = sum(int(line.split("slots=")[1]) for line in hostfile.splitlines())
    assert slots == world
    if launcher.argv[0] == "mpirun":  # the launcher distrun writes (not the user's own)
        assert launcher.argv[launcher.argv.index("-np") + 1] == str(world)
    assert launcher.env["MASTER_ADDR"] == plan.master_addr and launcher.env["MASTER_PORT"] == str(plan.master_port)


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("job")


@PROPERTY
@given(case=jobs(), simulated=st.booleans())
def test_every_valid_job_plans_with_its_invariants(
    job_dir: Path, case: tuple[dict[str, Any], list[str]], simulated: bool
):
    data, overrides = case
    try:
        loaded = load_job_data(data, job_dir, "job.yml", overrides)
    except ValidationError as error:
        event("refused")
        assert error.problems and all(p.position is not None for p in error.problems)
        return
    spec = loaded.spec
    kind = spec.distribution_type or "none"
    event(f"planned {kind}")
    placement = placement_for(loaded, simulated)
    bindings = Bindings(inputs={"lr": "0.1"}, outputs={"model": "/jobs/j1/named-outputs/model"})
    plan = build_plan(spec, placement, bindings)
    assert plan.distribution == kind
    nodes = spec.resources.instance_count
    assert len(plan.nodes) == nodes and tuple(n.host for n in plan.nodes) == placement.hosts
    check_common(plan, spec.environment_variables)
    per_node = getattr(spec.distribution, "process_count_per_instance", 1)
    if kind in ("none", "pytorch"):
        check_pytorch(plan, nodes, per_node)
    elif kind == "tensorflow":
        check_tensorflow(plan, placement)
    else:
        check_mpi(plan, nodes, per_node)
    assert plan.world_size <= MAX_PROCESSES
