"""Real jobs on a real Slurm cluster of 2 nodes (n1, n2) on this machine, through the CLI.

The cluster comes from the `slurm_cluster` fixture (tests/slurm_fixtures.py); each test gets
its own DISTRUN_HOME with a compute target `hpc` pointing at it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.slurm_cluster import SlurmCluster
from conftest import REPO, cli_env, processes_of_job, wait_for
from distrun.store.index import JobIndex

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"

SLEEPERS = """
    command: >-
      python -c "import os, sys, time; print('up', os.environ['RANK'], flush=True); {body}"
    code: src
    resources:
      instance_count: 2
    distribution:
      type: pytorch
      process_count_per_instance: 2
    limits:
      grace_period: 3
"""


def sleepers(body: str) -> str:
    return SLEEPERS.replace("{body}", body)


@pytest.fixture
def hpc(run_cli, slurm_cluster: SlurmCluster) -> str:
    result = run_cli(
        "compute",
        "create",
        "--name",
        "hpc",
        "--type",
        "slurm",
        "--set",
        "partition=debug",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert result.returncode == 0, result.stderr
    return "hpc"


def only_job(home: Path) -> str:
    names = JobIndex(home / "jobs.db").names()
    assert len(names) == 1, names
    return names[0]


def record(home: Path, name: str) -> dict:
    return dict(JobIndex(home / "jobs.db").get(name).__dict__)


def node_outcome(home: Path, name: str, node: int) -> dict:
    return json.loads((home / "jobs" / name / "slurm" / f"node_{node:02d}.json").read_text())


def slurm_state(cluster: SlurmCluster, job_id: str) -> str:
    out = cluster.run(["scontrol", "show", "job", "--oneliner", job_id]).stdout
    return out.split("JobState=", 1)[1].split()[0]


# ---------------------------------------------------------------- jobs that complete


@pytest.mark.slow
def test_ddp_two_nodes_two_processes(run_cli, hpc, distrun_home):
    result = run_cli("run", str(EXAMPLE), "--compute", hpc, "--set", "inputs.epochs=2", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Completed" and rec["backend_id"]
    folder = distrun_home / "jobs" / name
    logs = sorted(p.name for p in (folder / "user_logs").iterdir())
    assert logs == [f"std_log_process_{i:02d}.txt" for i in range(4)]
    for rank in range(4):
        text = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank}/4 on node {rank // 2} (local rank {rank % 2})" in text
    assert (folder / "named-outputs" / "model" / "model.pt").stat().st_size > 0
    assert "[0/0] epoch 2/2 loss" in result.stdout  # streamed while it ran
    # Slurm placed node rank 0 on n1 and 1 on n2: each node's agent says where it ran.
    assert [node_outcome(distrun_home, name, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]
    assert {p["rank"]: p["host"] for p in rec["processes"]} == {0: "n1", 1: "n1", 2: "n2", 3: "n2"}


def test_each_rank_sees_slurms_node_rank_and_local_compute_environment(run_cli, write_job, hpc, distrun_home):
    keys = ["NODE_RANK", "SLURM_NODEID", "SLURMD_NODENAME", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR"]
    keys += ["MASTER_PORT", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "AZ_BATCH_HOST_LIST"]
    job = write_job(
        """
        command: python show_env.py
        code: src
        resources:
          instance_count: 2
        distribution:
          type: pytorch
          process_count_per_instance: 2
        """,
        {"show_env.py": f"import json, os\nprint('ENV', json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))\n"},
    )
    result = run_cli("run", str(job), "--compute", hpc)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    envs = []
    for rank in range(4):
        log = (distrun_home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        envs.append(json.loads(log.split("ENV ", 1)[1]))
    job_id = record(distrun_home, name)["backend_id"]
    ports = {env["MASTER_PORT"] for env in envs}
    assert len(ports) == 1 and ports.pop().isdigit()
    for rank, env in enumerate(envs):
        node = rank // 2
        assert env["NODE_RANK"] == env["SLURM_NODEID"] == str(node)
        assert env["SLURMD_NODENAME"] == f"n{node + 1}"
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank % 2), "4")
        assert env["MASTER_ADDR"] == "127.0.0.1"  # NodeAddr of n1, the allocation's first node
        assert env["AZ_BATCH_HOST_LIST"] == "127.0.0.1,127.0.0.1"
        assert env["SLURM_JOB_ID"] == job_id
        # The node agent's own task variables would mis-wire a rank that reads them.
        assert env["SLURM_PROCID"] is None and env["SLURM_NTASKS"] is None


@pytest.mark.slow
def test_per_node_torchrun_form(run_cli, write_job, hpc):
    job = write_job(
        """
        command: >-
          python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --node-rank $NODE_RANK
          --master-addr $MASTER_ADDR --master-port $MASTER_PORT check.py
        code: src
        resources:
          instance_count: 2
        distribution:
          type: pytorch
          process_count_per_instance: 1
        """,
        {
            "check.py": """
                import os
                import torch
                import torch.distributed as dist
                dist.init_process_group("gloo")
                t = torch.ones(1) * dist.get_rank()
                dist.all_reduce(t)
                line = f"rank {dist.get_rank()} of {dist.get_world_size()} sum {int(t.item())}"
                # One write: two ranks under one torchrun share a pipe, and an unbuffered
                # print() writes its pieces separately.
                os.write(1, f"{line} on {os.environ['SLURMD_NODENAME']}\\n".encode())
                dist.destroy_process_group()
            """
        },
    )
    result = run_cli("run", str(job), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(4):
        assert f"rank {rank} of 4 sum 6 on n{rank // 2 + 1}" in result.stdout


@pytest.mark.slow
def test_tensorflow_multiworker_on_two_nodes(run_cli, hpc, distrun_home):
    example = REPO / "examples" / "tensorflow-multiworker" / "job.yml"
    result = run_cli("run", str(example), "--compute", hpc, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    digests = {line.split()[-1] for line in result.stdout.splitlines() if "final weights digest" in line}
    assert len(digests) == 1  # both workers trained the same model, in sync
    configs = [
        json.loads(proc["env"]["TF_CONFIG"])
        for node in json.loads((distrun_home / "jobs" / name / "plan.json").read_text())["nodes"]
        for proc in node["processes"]
    ]
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 2 and all(w.startswith("127.0.0.1:") for w in workers)
    assert [node_outcome(distrun_home, name, n)["node_name"] for n in (0, 1)] == ["n1", "n2"]


def test_job_stream_follows_a_detached_job_to_its_end(run_cli, write_job, hpc, distrun_home):
    job = write_job(sleepers("[print('tick', i, flush=True) or time.sleep(0.3) for i in range(5)]"))
    submitted = run_cli("run", "-d", str(job), "--compute", hpc)
    assert submitted.returncode == 0, submitted.stderr
    name = json.loads(submitted.stdout)["name"]
    streamed = run_cli("job", "stream", name)
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    for label in ("0/0", "0/1", "1/2", "1/3"):
        assert f"[{label}] tick 4" in streamed.stdout
    assert "Status: Completed" in streamed.stdout


# ---------------------------------------------------------------- failures, cancel, timeout


def test_a_rank_failing_on_node_1_stops_node_0_and_is_the_root_cause(run_cli, write_job, hpc, distrun_home):
    job = write_job(
        sleepers("time.sleep(1); int(os.environ['RANK']) == 3 and sys.exit(__import__('fail').go()); time.sleep(120)"),
        {"fail.py": "def go():\n    raise ValueError('bad batch on rank 3')\n"},
    )
    result = run_cli("run", str(job), "--compute", hpc)
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    assert rec["reason"] == "rank 3 on node 1 exited with code 1"
    cause = rec["root_cause"]
    assert (cause["rank"], cause["node_rank"], cause["host"], cause["exit_code"]) == (3, 1, "n2", 1)
    assert "ValueError: bad batch on rank 3" in cause["traceback"]
    assert 'fail.py", line 2, in go' in cause["traceback"]
    # Node 0's ranks were stopped right after the failure on node 1, not after their 120 s.
    failed_at = node_outcome(distrun_home, name, 1)["failed_at"]
    node0 = node_outcome(distrun_home, name, 0)
    assert node0["ended_at"] - failed_at < 10
    assert all(p["signal"] == "SIGTERM" for p in node0["processes"])
    assert "Failed first: rank_3 on node 1 (n2)" in result.stdout
    assert processes_of_job(name) == []


def _running_job(home: Path, ranks: int = 4) -> str:
    def running() -> str | None:
        if not (home / "jobs.db").exists():
            return None
        jobs = JobIndex(home / "jobs.db").list()
        return jobs[0].name if jobs and jobs[0].status == "Running" else None

    name = str(wait_for(running, timeout=60))
    wait_for(lambda: len(processes_of_job(name)) >= ranks, timeout=60)
    return name


def test_cancel_while_running(run_cli, write_job, hpc, distrun_home, slurm_cluster):
    job = write_job(sleepers("time.sleep(120)"))
    assert run_cli("run", "-d", str(job), "--compute", hpc).returncode == 0
    name = _running_job(distrun_home)
    result = run_cli("job", "cancel", name)
    assert result.returncode == 0, result.stderr
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled", rec
    wait_for(lambda: slurm_state(slurm_cluster, rec["backend_id"]) == "CANCELLED", timeout=30)
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_ctrl_c_on_run_cancels_the_slurm_job(start_cli, write_job, hpc, distrun_home, slurm_cluster):
    job = write_job(sleepers("time.sleep(120)"))
    proc = start_cli("run", str(job), "--compute", hpc)
    name = _running_job(distrun_home)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "SIGINT received, canceling the Slurm job (scancel)" in proc.stdout.read()
    rec = record(distrun_home, name)
    assert rec["status"] == "Canceled"
    wait_for(lambda: slurm_state(slurm_cluster, rec["backend_id"]) == "CANCELLED", timeout=30)
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_a_queued_job_says_so_and_cancels_at_once(run_cli, write_job, slurm_cluster, distrun_home):
    # Each job asks for every CPU of both nodes, so the second waits for the first.
    created = run_cli(
        "compute",
        "create",
        "--name",
        "whole",
        "--type",
        "slurm",
        "--set",
        f"cpus_per_node={slurm_cluster.cpus_per_node}",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert created.returncode == 0, created.stderr
    job = write_job(sleepers("time.sleep(120)"))
    first = json.loads(run_cli("run", "-d", str(job), "--compute", "whole").stdout)["name"]
    wait_for(lambda: record(distrun_home, first)["status"] == "Running", timeout=60)
    second = json.loads(run_cli("run", "-d", str(job), "--compute", "whole").stdout)["name"]
    assert record(distrun_home, second)["status"] == "Queued"
    wait_for(lambda: record(distrun_home, second)["reason"] == "Resources", timeout=30)  # Slurm's own words
    assert run_cli("job", "cancel", second).returncode == 0
    assert record(distrun_home, second)["status"] == "Canceled"
    assert run_cli("job", "cancel", first).returncode == 0
    assert record(distrun_home, first)["status"] == "Canceled"
    wait_for(lambda: processes_of_job(first) == [], timeout=30)


def test_limits_timeout_fails_the_job(run_cli, write_job, hpc, distrun_home):
    job = write_job(sleepers("time.sleep(120)"))
    result = run_cli("run", str(job), "--compute", hpc, "--set", "limits.timeout=3")
    assert result.returncode == 1, result.stdout + result.stderr
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed" and rec["reason"] == "timeout after 3 s"
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- nothing submitted


def test_partition_that_does_not_exist(run_cli, write_job, slurm_cluster, distrun_home):
    created = run_cli(
        "compute",
        "create",
        "--name",
        "nowhere",
        "--type",
        "slurm",
        "--set",
        "partition=gpu-a100",
        "--set",
        f"slurm_conf={slurm_cluster.conf_path}",
    )
    assert created.returncode == 0, created.stderr
    before = slurm_cluster.run(["squeue", "--noheader", "--format=%i"]).stdout
    result = run_cli("run", str(write_job(sleepers("pass"))), "--compute", "nowhere")
    assert result.returncode == 2
    assert "Slurm partition 'gpu-a100' does not exist (partitions of this cluster: debug)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []
    assert slurm_cluster.run(["squeue", "--noheader", "--format=%i"]).stdout == before


def test_compute_create_refuses_a_misspelled_setting(run_cli, distrun_home):
    result = run_cli("compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partiton=debug")
    assert result.returncode == 2
    assert "unknown setting 'partiton' (did you mean 'partition'?)" in result.stderr
    assert not (distrun_home / "config.yaml").exists()


def test_more_nodes_than_the_partition_has(run_cli, write_job, hpc, distrun_home):
    job = write_job(sleepers("pass"))
    result = run_cli("run", str(job), "--compute", hpc, "--set", "resources.instance_count=3")
    assert result.returncode == 2
    assert "the job asks for 3 nodes (resources.instance_count) but Slurm partition 'debug' has 2" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        ("mpi-hostfile", "distribution type mpi does not run on Slurm compute yet"),
        ("tensorflow-ps", "TensorFlow with parameter servers does not run on Slurm compute yet"),
    ],
)
def test_what_slurm_does_not_run_yet_is_refused_before_submitting(run_cli, hpc, distrun_home, example, expected):
    result = run_cli("run", str(REPO / "examples" / example / "job.yml"), "--compute", hpc)
    assert result.returncode == 2 and expected in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_slurm_not_installed(write_job, hpc, distrun_home, tmp_path):
    env = cli_env(distrun_home, {"PATH": str(tmp_path / "empty")})
    result = subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(write_job(sleepers("pass"))), "--compute", hpc],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Slurm is not installed here: no sbatch on PATH" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_controller_down(run_cli, write_job, slurm_cluster, distrun_home, tmp_path):
    # The same cluster's config, but a controller port nobody serves.
    conf = tmp_path / "slurm.conf"
    lines = slurm_cluster.conf_path.read_text().splitlines()
    conf.write_text("\n".join("SlurmctldPort=1" if x.startswith("SlurmctldPort=") else x for x in lines) + "\n")
    created = run_cli("compute", "create", "--name", "down", "--type", "slurm", "--set", f"slurm_conf={conf}")
    assert created.returncode == 0, created.stderr
    result = run_cli("run", str(write_job(sleepers("pass"))), "--compute", "down")
    assert result.returncode == 2
    assert "the Slurm controller is down or unreachable" in result.stderr
    assert "nothing was submitted" in result.stderr
    assert not (distrun_home / "jobs.db").exists() or JobIndex(distrun_home / "jobs.db").names() == []


def test_plan_shows_the_exact_sbatch_script(run_cli, hpc, distrun_home):
    result = run_cli("plan", str(EXAMPLE), "--compute", hpc)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "#SBATCH --nodes=2" in out and "#SBATCH --ntasks-per-node=1" in out
    assert "#SBATCH --partition=debug" in out and "#SBATCH --time=11" in out
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in out
    assert f"{sys.executable} -m distrun.agent.node --job-dir" in out
    assert "[1/3] rank_3" in out  # and the plan every node builds, placeholders for what Slurm decides
    assert not (distrun_home / "jobs").exists()  # a dry run records nothing


def test_submitted_script_is_what_plan_showed(run_cli, write_job, hpc, distrun_home):
    job = write_job(sleepers("pass"))
    planned = run_cli("plan", str(job), "--compute", hpc, "--set", "name=planned_job", "--output", "json")
    assert planned.returncode == 0, planned.stderr
    result = run_cli("run", str(job), "--compute", hpc, "--set", "name=planned_job")
    assert result.returncode == 0, result.stdout + result.stderr
    submitted = (distrun_home / "jobs" / "planned_job" / "slurm" / "batch.sh").read_text()
    assert submitted == json.loads(planned.stdout)["script"]
