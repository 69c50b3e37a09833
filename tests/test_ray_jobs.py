"""Real jobs on a real 2-node Ray cluster (tests/clusters/ray_cluster.py), through the CLI.

The cluster and every `distrun` that talks to it run in a network namespace that has only
`lo` (the `ray_cluster` fixture): nothing leaves 127.0.0.0/8. Each test gets its own
DISTRUN_HOME with a compute target `rc` pointing at the cluster. Verbs that do not talk to
Ray (`job show`, `job cancel`, `logs`) run from outside the namespace: any shell works.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from clusters.ray_cluster import RayCluster
from conftest import REPO, four_rank_job, only_job, processes_of_job, record, wait_for

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"
TIMEOUT = 900  # a loaded machine starts Ray workers slowly

pytestmark = pytest.mark.slow

# Rank 3 (node 1) fails once every rank is up; the others serve until stopped and say when.
FAILING_RANK = """
import os, signal, sys, time
rank = os.environ["RANK"]
def stopped(signum, frame):
    print(f"stopped at {time.time():.3f}", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
print("up", rank, flush=True)
if rank == "3":
    time.sleep(3)
    print(f"failing at {time.time():.3f}", flush=True)
    raise ValueError("bad batch on rank 3")
time.sleep(600)
"""

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
        if "distrun.backends.ray.node_agent" in cmdline and f"distrun-{name}-node" in cmdline:
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
    placed = json.loads((folder / "system_logs" / "ray_placement.json").read_text())
    assert placed["placement_group"]["strategy"] == "STRICT_SPREAD"
    assert len({node["node_id"] for node in placed["nodes"]}) == 2
    # Outputs written on node 0's own copy of the job folder came back; the stream went by as it ran.
    assert (folder / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert "[1/3] rank 3/4 on node 1" in out
    assert not job_processes(name)


def test_failing_rank_on_node_1_stops_every_other_rank(ray_cli, ray_target, write_job, distrun_home):
    job = write_job(four_rank_job("python ranks.py", grace=5), {"ranks.py": FAILING_RANK})
    proc = ray_cli("run", str(job), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, out
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    root = rec["root_cause"]
    assert (root["name"], root["node_rank"], root["exit_code"]) == ("rank_3", 1, 1)
    assert root["host"] and root["address"] == "127.0.0.1"
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
    assert record(distrun_home, name)["status"] == "Running"
    shown = run_cli("job", "show", name, "-o", "json")  # from outside the namespace: no Ray needed
    assert json.loads(shown.stdout)["status"] == "Running", shown.stdout + shown.stderr
    logs = run_cli("logs", name, "--rank", "2")
    assert "up 2" in logs.stdout
    result = run_cli("job", "cancel", name, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled", (rec["reason"], rec["root_cause"])
    wait_for(lambda: not job_processes(name), timeout=60)


def test_sigkill_of_distrun_leaves_no_rank_and_a_true_record(ray_cli, run_cli, ray_target, write_job, distrun_home):
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
    shown = json.loads(run_cli("job", "show", name, "-o", "json").stdout)
    assert shown["status"] == "Failed" and "launcher lost" in shown["reason"], shown


def test_unplaceable_job_fails_in_time_with_what_each_node_has(
    ray_cli, ray_target, ray_cluster: RayCluster, write_job, distrun_home
):
    job = write_job(
        four_rank_job("python ranks.py").replace("instance_count: 2", "instance_count: 3"), {"ranks.py": ""}
    )
    started = time.monotonic()
    proc = ray_cli("run", str(job), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    took = time.monotonic() - started
    assert proc.returncode == 1, out
    assert "Ray could not place the job within 20 s: it asks for 3 nodes (STRICT_SPREAD), each 1 CPU" in out
    assert "the cluster has 2 live nodes" in out
    assert out.count("  node 127.0.0.1 (") == 2, out  # what each node has free
    assert "lower resources.instance_count to at most 2" in out
    rec = record(distrun_home, only_job(distrun_home))
    assert rec["status"] == "Failed" and "could not place" in rec["reason"]
    print(f"unplaceable job reported after {took:.1f} s (placement_timeout 20 s)")
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
  grace_period: 5
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


def test_tensorflow_parameter_servers_on_the_other_ray_node_stop_when_the_chief_is_done(
    ray_cli, ray_target, distrun_home
):
    # chief, 2 workers, 1 ps over 2 Ray nodes: node 1 runs only servers (worker 0 and ps 0). Its
    # agent stops them once node 0's chief completed: the driver relays "main work done".
    proc = ray_cli("run", str(REPO / "examples" / "tensorflow-ps" / "job.yml"), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed"
    node1 = [p for p in rec["processes"] if p["node_rank"] == 1]
    assert node1 and all(p["stopped_by_distrun"] for p in node1)
    assert "[ps 0]" in out
    assert not job_processes(name)
