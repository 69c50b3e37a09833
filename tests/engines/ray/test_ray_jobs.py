"""Real jobs on a real 2-node Ray cluster (tests/support/clusters/ray_cluster.py), through the CLI.

The cluster and every `distrun` that talks to it run in a network namespace that has only
`lo` (the `ray_cluster` fixture): nothing leaves 127.0.0.0/8. Each test gets its own
DISTRUN_HOME with a compute target `rc` pointing at the cluster. Verbs that do not talk to
Ray (`job show`, `job cancel`, `logs`) run from outside the namespace: any shell works, and so
does reading a job's record in this process (the driver writes it into DISTRUN_HOME).

One job runs a framework for real (DDP over gloo); the frameworks themselves run end to end on
local compute (tests/frameworks/). The others run small payloads (support.ray_jobs) that show
what Ray changes: where each process ran and, to the exact value, what distrun gave it there.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from support.cli import REPO
from support.clusters.ray_cluster import RayCluster
from support.jobs import (
    TORCHRUN_PER_NODE_JOB,
    four_rank_job,
    mpi_job,
    only_job,
    processes_of_job,
    record,
    tensorflow_job,
    wait_for,
)
from support.ray_jobs import (
    DEEPSPEED_KEYS,
    DEEPSPEED_PLATFORM_KEYS,
    FAILING_RANK,
    MPI_ALLREDUCE,
    SHOW_ENV,
    TF_TASK,
    mpi_rank,
    node_job_dir,
    on_two_nodes,
    picked,
    placed,
    plan,
    pytorch_rank,
    ray_variables,
    shown,
    tensorflow_task,
)

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"
TIMEOUT = 900  # a loaded machine starts Ray workers slowly
PLACEMENT_TIMEOUT = 2  # for the job that cannot be placed: it waits that long before it fails

pytestmark = pytest.mark.slow

SLEEPING_RANKS = """
import os, time
print("up", os.environ["RANK"], flush=True)
time.sleep(600)
"""


def job_processes(name: str) -> list[str]:
    """Live processes of the job on any node: its ranks (by environment) and node agents (by command line)."""
    found = [f"rank pid {pid}" for pid in processes_of_job(name)]
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "distrun.backends.ray.node_agent" in cmdline and f"/distrun-{name}" in cmdline:
            found.append(f"agent pid {entry}: {cmdline}")
    return found


def job_names(home: Path) -> list[str]:
    from distrun.store.index import JobIndex

    return JobIndex(home / "jobs.db").names() if (home / "jobs.db").exists() else []


def all_up(home: Path, name: str, ranks: int = 4) -> bool:
    logs = home / "jobs" / name / "user_logs"
    return all(
        f"up {r}" in (logs / f"std_log_process_{r:02d}.txt").read_text(errors="replace")
        if (logs / f"std_log_process_{r:02d}.txt").exists()
        else False
        for r in range(ranks)
    )


def test_ddp_two_by_two_with_ranks_on_both_ray_nodes(ray_cli, ray_target, distrun_home):
    proc = ray_cli("run", str(EXAMPLE), "--compute", ray_target, "--set", "inputs.epochs=1")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    assert {p["rank"]: p["node_rank"] for p in rec["processes"]} == {0: 0, 1: 0, 2: 1, 3: 1}
    folder = distrun_home / "jobs" / name
    for rank in range(4):
        text = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank}/4 on node {rank // 2} (local rank {rank % 2})" in text
    # Two bundles of one STRICT_SPREAD group: two different Ray nodes ran the node agents.
    where = placed(folder)
    assert where["placement_group"]["strategy"] == "STRICT_SPREAD"
    assert len({node["node_id"] for node in where["nodes"]}) == 2
    # Outputs written on node 0's own copy of the job folder came back; the stream went by as it ran.
    assert (folder / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert "[1/3] rank 3/4 on node 1" in out
    assert not job_processes(name)


def test_failing_rank_on_node_1_stops_every_other_rank(ray_cli, ray_target, write_job, distrun_home, tmp_path):
    barrier = tmp_path / "up"
    barrier.mkdir()
    job = write_job(four_rank_job(f"python ranks.py {barrier}", grace=5), {"ranks.py": FAILING_RANK})
    proc = ray_cli("run", str(job), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, out
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    root = rec["root_cause"]
    assert (root["name"], root["node_rank"], root["exit_code"]) == ("rank_3", 1, 1)
    where = placed(distrun_home / "jobs" / name)
    assert root["host"] and root["address"] == where["nodes"][1]["address"]  # the Ray node of bundle 1
    assert "ValueError: bad batch on rank 3" in root["traceback"]
    assert root["log"] == str(distrun_home / "jobs" / name / "user_logs" / "std_log_process_03.txt")
    assert rec["reason"] == "rank 3 on node 1 exited with code 1"
    stopped = {p["name"] for p in rec["processes"] if p["stopped_by_distrun"]}
    assert stopped == {"rank_0", "rank_1", "rank_2"}
    assert "Failed first: rank_3 on node 1" in out and "ValueError: bad batch on rank 3" in out
    # Every other rank got SIGTERM, also on the other Ray node (figures are printed, not asserted).
    logs = distrun_home / "jobs" / name / "user_logs"
    failed_at = float((logs / "std_log_process_03.txt").read_text().split("failing at ")[1].split()[0])
    delays = {}
    for rank in range(3):
        text = (logs / f"std_log_process_{rank:02d}.txt").read_text()
        assert "stopped at " in text, text
        delays[rank] = float(text.split("stopped at ")[1].split()[0]) - failed_at
    print(f"SIGTERM after the failure, per rank (s): {delays}")
    assert not job_processes(name)


def test_cancel_from_another_shell(ray_cli, run_cli, ray_target, write_job, distrun_home):
    job = write_job(four_rank_job("python ranks.py", grace=5), {"ranks.py": SLEEPING_RANKS})
    created = ray_cli("job", "create", "--file", str(job), "--compute", ray_target, "-o", "json")
    out, _ = created.communicate(timeout=120)
    assert created.returncode == 0, out
    name = json.loads(out[out.index("{") :])["name"]
    wait_for(lambda: all_up(distrun_home, name), timeout=TIMEOUT)
    # Read from outside the namespace, as `job show` in any shell does: no Ray needed.
    assert record(distrun_home, name)["status"] == "Running"
    logs = run_cli("logs", name, "--rank", "2")
    assert "up 2" in logs.stdout, logs.stdout + logs.stderr
    result = run_cli("job", "cancel", name, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled", (rec["reason"], rec["root_cause"])
    wait_for(lambda: not job_processes(name), timeout=60)


def test_sigkill_of_distrun_leaves_no_rank_and_a_true_record(ray_cli, ray_target, write_job, distrun_home):
    job = write_job(four_rank_job("python ranks.py", grace=5), {"ranks.py": SLEEPING_RANKS})
    proc = ray_cli("run", str(job), "--compute", ray_target)
    wait_for(lambda: job_names(distrun_home), timeout=120)  # its record exists
    name = only_job(distrun_home)
    wait_for(lambda: all_up(distrun_home, name), timeout=TIMEOUT)
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert b"distrun" in cmdline and b"nsenter" not in cmdline  # nsenter execs distrun itself
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    # Ray kills the driver's actors; each node agent (PDEATHSIG) stops its ranks.
    wait_for(lambda: not job_processes(name), timeout=120)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and "launcher lost" in rec["reason"], rec


def test_unplaceable_job_fails_in_time_with_what_each_node_has(
    ray_cli, add_ray_target, ray_cluster: RayCluster, write_job, distrun_home
):
    # The timeout's length changes nothing but the wait: a short one.
    target = add_ray_target("rc", placement_timeout=PLACEMENT_TIMEOUT)
    job = write_job(
        four_rank_job("python ranks.py").replace("instance_count: 2", "instance_count: 3"), {"ranks.py": ""}
    )
    started = time.monotonic()
    proc = ray_cli("run", str(job), "--compute", target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    took = time.monotonic() - started
    assert proc.returncode == 1, out
    assert (
        f"Ray could not place the job within {PLACEMENT_TIMEOUT} s: it asks for 3 nodes (STRICT_SPREAD), each 1 CPU"
        in out
    )
    assert "the cluster has 2 live nodes" in out
    assert out.count("  node 127.0.0.") == 2, out  # what each node has free
    assert "lower resources.instance_count to at most 2" in out
    rec = record(distrun_home, only_job(distrun_home))
    assert rec["status"] == "Failed" and "could not place" in rec["reason"]
    print(f"unplaceable job reported after {took:.1f} s (placement_timeout {PLACEMENT_TIMEOUT} s)")
    # The group was removed, not left pending.
    tables = "ray.util.placement_group_table().values()"
    check = f"import ray; ray.init(address={ray_cluster.address!r}); print(sorted({{g['state'] for g in {tables}}}))"
    result = ray_cluster.run([sys.executable, "-c", check], timeout=300)
    assert "PENDING" not in result.stdout and "CREATED" not in result.stdout, result.stdout + result.stderr


# ---------------------------------------------------------------- distribution: {type: ray}

USES_RAY = """
import os, ray
ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
print("nodes", sum(1 for n in ray.nodes() if n["Alive"]), flush=True)

@ray.remote
def square(x):
    return x * x

print("sum", sum(ray.get([square.remote(i) for i in range(10)])), flush=True)
"""

RAY_JOB = """
command: python uses_ray.py
code: src
resources:
  instance_count: 2
distribution:
  type: ray
limits:
  grace_period: 1  # a Ray node drains for up to 30 s on SIGTERM: SIGKILL comes after the grace either way
environment_variables:
  RAY_memory_monitor_refresh_ms: "0"  # as in the test cluster (tests/support/clusters/ray_cluster.py)
"""


@pytest.mark.parametrize("compute", ["local", "ray"])
def test_type_ray_starts_a_cluster_over_the_nodes_runs_once_and_stops_it(
    compute, ray_cli, ray_target, write_job, distrun_home
):
    job = write_job(RAY_JOB, {"uses_ray.py": USES_RAY})
    proc = ray_cli("run", str(job), "--compute", ray_target if compute == "ray" else "local")
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    name = only_job(distrun_home)
    logs = distrun_home / "jobs" / name / "user_logs"
    driver = (logs / "std_log_process_00.txt").read_text()
    assert "nodes 2" in driver and "sum 285" in driver, driver  # one driver saw both Ray nodes of the job
    assert "Ray runtime started" in (logs / "std_log_node_01_ray.txt").read_text()
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    assert {p["name"]: p["stopped_by_distrun"] for p in rec["processes"]} == {
        "driver": False,
        "ray_node_0": True,
        "ray_node_1": True,
    }
    # Every Ray process the job started (head, worker node, their workers) is gone.
    assert not job_processes(name)


# ---------------------------------------------------------------- what each process gets


# The distribution of examples/tensorflow-ps/job.yml, with tasks that show their environment and
# serve, or reach, the cluster's addresses instead of training (support.ray_jobs.TF_TASK).
TF_PS_JOB = tensorflow_job("python tf_task.py chief", chief_count=1, worker_count=2, parameter_server_count=1)

# Task k of the chief, the workers, the ps (in that order) runs on node k % 2: (role, index) -> (node, its log).
TF_TASKS = {
    ("chief", 0): (0, "std_log_node_00_chief.txt"),
    ("worker", 0): (1, "std_log_node_01_worker.txt"),
    ("worker", 1): (0, "std_log_node_00_worker.txt"),
    ("ps", 0): (1, "std_log_node_01_ps.txt"),
}


def test_tensorflow_parameter_servers_on_the_other_ray_node_stop_when_the_chief_is_done(
    ray_cli, ray_target, write_job, distrun_home
):
    # chief, 2 workers, 1 ps over 2 Ray nodes: node 1 runs only servers (worker 0 and ps 0). Its
    # agent stops them once node 0's chief completed: the driver relays "main work done".
    proc = ray_cli("run", str(write_job(TF_PS_JOB, {"tf_task.py": TF_TASK})), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    # The chief ended by itself; every server, on either node, was stopped by distrun.
    assert {p["name"]: (p["node_rank"], p["stopped_by_distrun"]) for p in rec["processes"]} == {
        "chief_0": (0, False),
        "worker_0": (1, True),
        "worker_1": (0, True),
        "ps_0": (1, True),
    }
    folder = distrun_home / "jobs" / name
    where, hosts = on_two_nodes(folder)
    # The task ports are whatever was free on node 0 (apart from each other and MASTER_PORT); each
    # task's host is its node's address.
    wired = plan(folder)
    ports = [int(a.rsplit(":", 1)[1]) for role in ("chief", "worker", "ps") for a in wired["tf_cluster"][role]]
    assert len({*ports, wired["master_port"]}) == 5, wired["tf_cluster"]
    cluster = {
        "chief": [f"{hosts[0]}:{ports[0]}"],
        "worker": [f"{hosts[1]}:{ports[1]}", f"{hosts[0]}:{ports[2]}"],
        "ps": [f"{hosts[1]}:{ports[3]}"],
    }
    for (role, index), (node, log) in TF_TASKS.items():
        got = shown((folder / "user_logs" / log).read_text())
        expected = {
            **tensorflow_task(name, hosts, wired["master_port"], cluster, role, index, node),
            "TF_USE_LEGACY_KERAS": "1",  # the job's own variables reach every task
            "DISTRUN_JOB_DIR": node_job_dir(where["nodes"][node], name),
        }
        assert picked(got["env"], expected) == expected, (role, index)
        assert got["cwd"] == f"{expected['DISTRUN_JOB_DIR']}/code"
        assert not ray_variables(got["env"]), (role, index)
    # The chief reached every other task at its TF_CONFIG address, on both Ray nodes, and each
    # address was served by the task TF_CONFIG names there.
    chief = (folder / "user_logs" / "std_log_node_00_chief.txt").read_text()
    for role in ("worker", "ps"):
        for index, address in enumerate(cluster[role]):
            assert f"{address} is {role} {index}" in chief, chief
    assert f"[ps 0] ps 0 serving at {cluster['ps'][0]}" in out
    assert not job_processes(name)


def completed_two_by_two(proc, home: Path) -> tuple[str, str]:
    """`distrun run` of a 2 nodes x 2 ranks job ended well, ranks 0-1 on node 0 and 2-3 on node 1: (job, output)."""
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    name = only_job(home)
    rec = record(home, name)
    assert rec["status"] == "Completed"
    assert {p["rank"]: p["node_rank"] for p in rec["processes"]} == {0: 0, 1: 0, 2: 1, 3: 1}
    return name, out


# The per-node launcher form (support.jobs.TORCHRUN_PER_NODE_JOB) with show_env.py in torchrun's
# place: the command line each node runs, expanded from that node's variables, is what it shows.
PER_NODE_JOB = TORCHRUN_PER_NODE_JOB.replace("-m torch.distributed.run", "show_env.py").replace(" check.py", "")


def test_per_node_torchrun_form_gets_its_ray_nodes_values_on_its_command_line(
    ray_cli, ray_target, write_job, distrun_home
):
    proc = ray_cli("run", str(write_job(PER_NODE_JOB, {"show_env.py": SHOW_ENV})), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    assert {p["rank"]: p["node_rank"] for p in rec["processes"]} == {0: 0, 1: 1}
    folder = distrun_home / "jobs" / name
    where, hosts = on_two_nodes(folder)
    master_port = plan(folder)["master_port"]
    # One process per node (the node's torchrun), with what torchrun needs to join the other node's.
    for node in range(2):
        got = shown((folder / "user_logs" / f"std_log_process_{node:02d}.txt").read_text())
        assert got["argv"] == [
            *("--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(node)),
            *("--master-addr", hosts[0], "--master-port", str(master_port)),
        ]
        expected = {
            **pytorch_rank(name, hosts, master_port, node, per_node=1),
            "DISTRUN_JOB_DIR": node_job_dir(where["nodes"][node], name),
        }
        assert picked(got["env"], expected) == expected, node
        assert not ray_variables(got["env"]), node
    assert not job_processes(name)


NO_DISTRIBUTION = """
command: >-
  echo "node $NODE_RANK of $WORLD_SIZE on $(hostname)";
  if [ "$NODE_RANK" = 0 ]; then mkdir -p outputs && echo "from node 0" > outputs/result.txt; fi
code: src
resources:
  instance_count: 2
"""


def test_a_job_without_distribution_and_the_verbs_that_read_it_from_any_shell(
    ray_cli, run_cli, ray_target, write_job, distrun_home, tmp_path
):
    proc = ray_cli("run", str(write_job(NO_DISTRIBUTION)), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    name = only_job(distrun_home)
    # The verbs below run outside the cluster's namespace: they read the job folder, not Ray.
    described = run_cli("job", "show", name, "-o", "json")
    assert described.returncode == 0, described.stderr
    rec = json.loads(described.stdout)
    assert rec["status"] == "Completed" and rec["compute"] == "rc"
    assert sorted(p["node_rank"] for p in rec["processes"]) == [0, 1]
    logs = run_cli("logs", name, "--rank", "1")
    assert logs.returncode == 0 and "node 1 of 2" in logs.stdout, logs.stdout + logs.stderr
    listed = run_cli("job", "list", "-o", "json")
    assert listed.returncode == 0 and name in listed.stdout, listed.stdout + listed.stderr
    # ./outputs written on node 0's own copy of the job came back and downloads like a local job's.
    got = run_cli("job", "download", name, "--download-path", str(tmp_path / "dl"))
    assert got.returncode == 0, got.stdout + got.stderr
    assert (tmp_path / "dl" / "artifacts" / "outputs" / "result.txt").read_text() == "from node 0\n"
    assert not job_processes(name)


def test_ray_client_address_runs_a_job_whose_ranks_on_both_nodes_get_what_deepspeed_reads(
    ray_cli, run_cli, ray_cluster: RayCluster, write_job, distrun_home
):
    made = run_cli(
        "compute", "create", "--name", "rclient", "--type", "ray", "--set", f"address={ray_cluster.client_address}"
    )
    assert made.returncode == 0, made.stdout + made.stderr
    # examples/deepspeed/job.yml's form (type: pytorch, 2 x 2), driven through the head's client
    # server. DeepSpeed takes the rank environment distrun sets on each Ray node, with no
    # discovery of its own, when all five of its variables are there and no platform variable
    # sends it down another path.
    job = write_job(four_rank_job("python show_env.py"), {"show_env.py": SHOW_ENV})
    proc = ray_cli("run", str(job), "--compute", "rclient")
    name, out = completed_two_by_two(proc, distrun_home)
    assert "[1/3] ENV {" in out  # rank 3's line went by as it ran
    folder = distrun_home / "jobs" / name
    where, hosts = on_two_nodes(folder)
    master_port = plan(folder)["master_port"]
    for rank in range(4):
        got = shown((folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text())
        expected = {
            **pytorch_rank(name, hosts, master_port, rank, per_node=2),
            **dict.fromkeys(DEEPSPEED_PLATFORM_KEYS),
            "OMP_NUM_THREADS": "1",  # two ranks share a node: torchrun's habit
            "DISTRUN_JOB_DIR": node_job_dir(where["nodes"][rank // 2], name),
        }
        assert picked(got["env"], expected) == expected, rank
        assert all(got["env"].get(key) for key in DEEPSPEED_KEYS)
        assert got["cwd"] == f"{expected['DISTRUN_JOB_DIR']}/code"
        assert not ray_variables(got["env"]), rank
    assert not job_processes(name)


# ---------------------------------------------------------------- type: mpi: mpirun inside the placement group


def test_mpi_allreduce_with_ranks_started_on_both_ray_nodes_through_their_agents(
    ray_cli, ray_target, write_job, distrun_home
):
    job = write_job(mpi_job("python -m mpi4py allreduce.py"), {"allreduce.py": MPI_ALLREDUCE})
    proc = ray_cli("run", str(job), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    wired = plan(folder)
    where = placed(folder)
    hosts = [node["address"] for node in where["nodes"]]
    assert sorted(hosts) == ["127.0.0.1", "127.0.0.2"]  # node rank k is bundle k, on whichever Ray node Ray chose
    assert wired["nodes"][0]["files"]["mpi/hostfile"] == "".join(f"{host} slots=2\n" for host in hosts)
    # Ranks 2 and 3 run below node 1's agent, which starts mpirun's daemon there on request. On
    # this one-machine cluster mpirun takes 127.0.0.1 for itself wherever it runs: when Ray puts
    # node 0 on 127.0.0.2, mpirun starts node 1's ranks itself (still on the right slots).
    remote = hosts[0] == "127.0.0.1"
    node0_dir = node_job_dir(where["nodes"][0], name)
    for rank in range(4):
        text = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        under = rank // 2 if remote else "0"
        assert f"rank {rank} of 4 sum 10 local {rank % 2} under node{under}" in text, text
        # What mpirun passed on (-x) from node 0, on either node, and Open MPI's own rank variables.
        expected = mpi_rank(name, hosts, wired["master_port"], rank, per_node=2, node0_dir=node0_dir)
        assert picked(shown(text)["env"], expected) == expected, rank
    assert not job_processes(name)


def test_mpi_rank_failing_on_node_1_fails_the_job_and_leaves_nothing_on_either_node(
    ray_cli, ray_target, write_job, distrun_home, tmp_path
):
    barrier = tmp_path / "up"
    barrier.mkdir()
    job = write_job(mpi_job(f"python ranks.py {barrier}"), {"ranks.py": FAILING_RANK})
    proc = ray_cli("run", str(job), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, out[-4000:]
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    assert "ValueError: bad batch on rank 3" in (rec["root_cause"] or {}).get("traceback", ""), rec
    # The daemon node 1's agent started for mpirun, and rank 3's peers there, are gone too.
    assert not job_processes(name)
