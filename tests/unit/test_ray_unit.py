"""The pure parts of Ray support: target settings, the placement request and its error, `type: ray`'s plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.backends.ray.driver import merged_end
from distrun.backends.ray.node_agent import make_python_layer, rank_base_env, rebased
from distrun.backends.ray.placement import RayNodeFree, placement_request, unplaceable_hint, unplaceable_message
from distrun.backends.ray.target import RaySettings
from distrun.core.errors import DistrunError
from distrun.loading.loader import load_job_data
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Bindings, Placement
from distrun.spec.models import JobSpec


def job(**extra: object) -> JobSpec:
    data: dict[str, object] = {
        "command": "python train.py",
        "resources": {"instance_count": 3},
        "distribution": {"type": "pytorch", "process_count_per_instance": 2},
    }
    data.update(extra)
    return load_job_data(data, Path(".")).spec


@pytest.mark.parametrize("address", ["10.0.0.5:6379", "auto", "ray://head:10001"])
def test_target_addresses(address: str) -> None:
    assert RaySettings.from_settings("rc", {"address": address}).address == address


def test_a_target_without_an_address_says_to_set_it() -> None:
    # A wrong address and a misspelled setting: tests/unit/test_backend_conformance.py.
    with pytest.raises(DistrunError, match="'address' is missing"):
        RaySettings.from_settings("rc", {})


def test_one_strict_spread_bundle_per_node_job_resources_win() -> None:
    target = RaySettings.from_settings("rc", {"address": "auto", "cpus_per_node": 2, "gpus_per_node": 1})
    request = placement_request(job(), target, "calm_otter_1")
    assert request.to_dict() == {
        "name": "distrun-calm_otter_1",
        "strategy": "STRICT_SPREAD",
        "bundles": [{"CPU": 2, "GPU": 1}] * 3,
        "timeout_s": 60.0,
    }
    props = job(resources={"instance_count": 2, "properties": {"cpus_per_node": 4}})
    assert placement_request(props, target, "x").bundles == ({"CPU": 4.0, "GPU": 1}, {"CPU": 4.0, "GPU": 1})
    with pytest.raises(DistrunError, match="cpus_per_node"):
        placement_request(job(resources={"instance_count": 2, "properties": {"cpus_per_node": "lots"}}), target, "x")


def test_unplaceable_error_says_what_was_asked_and_what_each_node_has_free() -> None:
    request = placement_request(job(), RaySettings.from_settings("rc", {"address": "auto"}), "j")
    nodes = [
        RayNodeFree("10.0.0.5", "a" * 40, {"CPU": 2.0, "node0": 1.0}, {"CPU": 0.5}),
        RayNodeFree("10.0.0.6", "b" * 40, {"CPU": 2.0}, {"CPU": 2.0}),
        RayNodeFree("10.0.0.7", "c" * 40, {"CPU": 2.0}, {}, alive=False),
    ]
    text = unplaceable_message(request, nodes)
    assert text.splitlines() == [
        "Ray could not place the job within 60 s: it asks for 3 nodes (STRICT_SPREAD), each 1 CPU, one bundle per "
        "node on different Ray nodes; the cluster has 2 live nodes, 1 with room for a bundle now",
        "  node 10.0.0.5 (aaaaaaaa): free 0.5 CPU of 2 CPU",
        "  node 10.0.0.6 (bbbbbbbb): free 2 CPU of 2 CPU",
    ]
    assert "at most 2" in unplaceable_hint(request, nodes)


def test_type_ray_plan_head_on_node_0_workers_elsewhere_the_command_once() -> None:
    spec = job(distribution={"type": "ray", "head_node_additional_args": "--num-cpus 4"})
    count = task_port_count(spec)
    assert count == 1 + 1 + 4 * 3  # GCS, client server, four agent ports per node
    placement = Placement(
        hosts=("10.0.0.1", "10.0.0.2", "10.0.0.3"),
        master_port=29500,
        job_dir="/jobs/j",
        run_id="j",
        task_ports=tuple(range(40000, 40000 + count)),
    )
    plan = build_plan(spec, placement, Bindings())
    procs = {p.name: p for p in plan.processes()}
    assert sorted(procs) == ["driver", "ray_node_0", "ray_node_1", "ray_node_2"]
    assert [p.name for p in plan.nodes[0].processes] == ["driver", "ray_node_0"]
    head = procs["ray_node_0"].argv[2]
    assert "ray start --head --block --node-ip-address=10.0.0.1 --port=40000" in head and head.endswith("--num-cpus 4")
    assert "--address=10.0.0.1:40000 --node-ip-address=10.0.0.3" in procs["ray_node_2"].argv[2]
    assert procs["driver"].env["RAY_ADDRESS"] == "10.0.0.1:40000"
    assert procs["driver"].argv[2].endswith("|| exit 1\npython train.py")
    assert not procs["driver"].auxiliary and all(procs[f"ray_node_{n}"].auxiliary for n in range(3))
    # Every port distinct: simulated nodes on one machine never collide.
    ports = [arg.split("=")[1] for p in procs.values() for arg in p.argv[2].split() if "-port=" in arg]
    assert len(ports) == len(set(ports)) == count


def test_type_ray_with_an_address_starts_nothing() -> None:
    spec = job(distribution={"type": "ray", "address": "10.9.9.9:6379"})
    assert task_port_count(spec) == 0
    plan = build_plan(spec, Placement(hosts=("h0", "h1", "h2"), master_port=1, job_dir="/j", run_id="j"), Bindings())
    assert [p.name for p in plan.processes()] == ["driver"]
    assert next(plan.processes()).env["RAY_ADDRESS"] == "10.9.9.9:6379"


def test_node_copy_of_bindings_and_rank_environment() -> None:
    moved = rebased(
        {"outputs": {"model": "/home/u/jobs/j/named-outputs/model"}, "inputs": {"x": "3"}}, "/home/u/jobs/j", "/tmp/n/j"
    )
    assert moved == {"outputs": {"model": "/tmp/n/j/named-outputs/model"}, "inputs": {"x": "3"}}
    # The job's layer over its built environment is made again in the node's copy, over the same cache.
    layer = {"layer": "/home/u/jobs/j/env", "built": "/home/u/envs/0b2e"}
    assert rebased({"python_layer": layer}, "/home/u/jobs/j", "/tmp/n/j") == {
        "python_layer": {"layer": "/tmp/n/j/env", "built": "/home/u/envs/0b2e"}
    }
    # Where each input comes from (for `distrun plan`) is not a path of the job folder: passed on as it is.
    sources = {"input_sources": {"data": {"path": "https://example.org/d/", "source": "url_mirrors"}}}
    assert rebased(sources, "/home/u/jobs/j", "/tmp/n/j") == sources


def test_a_ray_node_without_the_built_environment_says_what_it_needs(tmp_path: Path) -> None:
    assert make_python_layer({}) is None  # no built environment: nothing to make
    problem = make_python_layer({"layer": str(tmp_path / "j" / "env"), "built": str(tmp_path / "envs" / "0b2e")})
    assert problem is not None
    assert f"cannot use the job's environment {tmp_path / 'envs' / '0b2e'} on this node" in problem
    assert "not a built environment" in problem and "same path on every Ray node" in problem
    assert rank_base_env({"RAY_JOB_ID": "01", "PATH": "/bin"}) == {"PATH": "/bin"}


def test_a_rank_is_told_the_ray_cluster_it_runs_in_under_distruns_own_name(tmp_path: Path) -> None:
    from distrun.backends.ray.node_agent import node_facts

    request = {
        "node_rank": 0, "names": ["n0"], "hosts": ["10.0.0.1"], "master_port": 1, "task_ports": [2],
        "job_name": "j", "engine_job_id": "r1", "ray_cluster": "10.0.0.1:6379",
    }  # fmt: skip
    env = node_facts(request, tmp_path, {"RAY_ADDRESS": "auto", "PATH": "/bin"}).base_env
    # Not RAY_ADDRESS: a `type: ray` job's rank starts a cluster of its own.
    assert env == {"PATH": "/bin", "DISTRUN_RAY_CLUSTER": "10.0.0.1:6379"}
    assert "DISTRUN_RAY_CLUSTER" not in node_facts({**request, "ray_cluster": None}, tmp_path, {}).base_env


def test_first_failure_across_nodes_is_the_root_cause() -> None:
    victim = {
        "status": "Canceled",
        "reason": "canceled (SIGTERM)",
        "processes": [{"name": "rank_0", "node_rank": 0, "rank": 0, "log": "/n0/std_log_process_00.txt"}],
    }
    cause = {
        "status": "Failed",
        "reason": "rank 3 on node 1 exited with code 1",
        "failed_at": 10.0,
        "root_cause": {"name": "rank_3", "log": "/n1/user_logs/std_log_process_03.txt"},
        "processes": [],
    }
    later = {"status": "Failed", "reason": "later", "failed_at": 11.0, "processes": []}
    end = merged_end([victim, later, cause], None, "/home/u/jobs/j/user_logs")
    assert end.status == "Failed" and end.reason == "rank 3 on node 1 exited with code 1"
    assert end.root_cause is not None
    assert end.root_cause["log"] == "/home/u/jobs/j/user_logs/std_log_process_03.txt"
    assert end.processes[0]["log"] == "/home/u/jobs/j/user_logs/std_log_process_00.txt"
    # Which status each kind of end is: the state table in tests/unit/test_backend_conformance.py.


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        (("127.0.0.1", "127.0.0.2"), {"OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_btl": "self,tcp"}),
        (("10.0.0.1", "10.0.0.2"), {}),
    ],
)
def test_mpi_on_nodes_at_loopback_addresses_stays_on_lo_and_off_shared_memory(
    hosts: tuple[str, ...], expected: dict[str, str]
) -> None:
    spec = job(distribution={"type": "mpi", "process_count_per_instance": 2}, resources={"instance_count": 2})
    placement = Placement(hosts=hosts, master_port=29500, job_dir="/jobs/j", run_id="j")
    plan = build_plan(spec, placement, Bindings())
    defaults = next(plan.processes()).env_defaults
    for key in ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_btl"):
        assert defaults.get(key) == expected.get(key)
    assert plan.nodes[0].files["mpi/hostfile"] == "".join(f"{h} slots=2\n" for h in hosts)


def test_only_a_client_server_that_failed_to_start_is_retried():
    from distrun.backends.ray.driver import client_server_start_failed

    failed = RuntimeError(
        "Initialization failure from server:\nRuntimeError: Starting Ray client server failed. "
        "See ray_client_server_23000.err for detailed logs."
    )
    assert client_server_start_failed("ray://10.0.0.5:10001", failed)
    # the proxy read the command line of a per-client server that had already died
    zombie = ConnectionAbortedError(
        "Initialization failure from server:\nTraceback (most recent call last):\n"
        '  File "proxier.py", line 396, in start_specific_server\n    cmd = psutil_proc.cmdline()\n'
        "psutil.ZombieProcess: PID still exists but it's a zombie (pid=30278)"
    )
    assert client_server_start_failed("ray://10.0.0.5:10001", zombie)
    no_channel = ConnectionAbortedError(
        "Initialization failure from server:\nRuntimeError: Proxy failed to Connect to backend!"
    )
    assert client_server_start_failed("ray://10.0.0.5:10001", no_channel)
    assert not client_server_start_failed("10.0.0.5:6379", failed)  # not a client connection
    assert not client_server_start_failed("ray://10.0.0.5:10001", ConnectionError("ray client connection timeout"))
    assert not client_server_start_failed("ray://10.0.0.5:10001", RuntimeError("Version mismatch: 2.9 vs 2.60"))
