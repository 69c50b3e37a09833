"""Real DeepSpeed jobs (CPU, gloo) on the local backend: ZeRO stage 2 training of a small
network on 2 nodes x 2 processes under `type: pytorch`, under `type: mpi` (DeepSpeed's MPI
discovery) and with the DeepSpeed launcher, all from examples/deepspeed as they are, and a
rank that fails inside a DeepSpeed step."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distrun.loading.loader import load_job_data
from distrun.plan import build_plan
from distrun.plan.model import Bindings, Placement
from distrun.plan.mpi import hostfile_text
from support.cli import REPO
from support.jobs import only_job, processes_of_job, record

EXAMPLE = REPO / "examples" / "deepspeed"
STEP = re.compile(r"^step (\d+)/(\d+) loss (\d+\.\d+)$", re.MULTILINE)
WEIGHTS = re.compile(r"^rank (\d) zero stage 2 weights ([0-9a-f]{16})$", re.MULTILINE)
FAIL = "--steps 10 --fail-rank 1 --fail-step 3"
# The DeepSpeed launcher with its Open MPI runner: it runs mpirun with the hostfile, whose
# output distrun splits per rank. `--module mpi4py` makes each rank `python -m mpi4py
# train.py`, so a failing rank aborts the job (see docs/deepspeed.md).
OPENMPI_RUNNER = (
    "deepspeed --hostfile $AZUREML_MPI_HOSTFILE --launcher openmpi --force_multi --no_ssh_check"
    " --master_addr $MASTER_ADDR --master_port $MASTER_PORT"
    ' --launcher_args "--mca btl_tcp_if_include lo -x MASTER_PORT" --module mpi4py train.py'
)


def logs(home: Path, name: str) -> Path:
    return home / "jobs" / name / "user_logs"


def master_port(home: Path, name: str) -> int:
    return json.loads((home / "jobs" / name / "plan.json").read_text())["master_port"]


def ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def assert_trained(text: str, steps: int = 30) -> None:
    """Rank 0's losses: every step printed, and the last far below the first."""
    losses = [(int(m.group(1)), float(m.group(3))) for m in STEP.finditer(text)]
    assert [step for step, _ in losses] == list(range(1, steps + 1)), text[-2000:]
    assert losses[-1][1] < losses[0][1] / 4, losses


def assert_same_weights(text: str) -> None:
    """ZeRO-2 partitions gradients and optimizer state; every rank ends with the same weights."""
    found = dict(WEIGHTS.findall(text))
    assert sorted(found) == ["0", "1", "2", "3"], text[-2000:]
    assert len(set(found.values())) == 1, found


# A rank left waiting in a collective after another failed waits for DeepSpeed's (torch's)
# 30-minute collective timeout. The failing-rank tests bound the whole run well below that,
# and well above what two suites on a 2-core machine make of a one-minute job.
LEFT_TO_TIME_OUT_S = 30 * 60
STOPPED_WITHIN_S = 600


def run_example(run_cli, job: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("run", str(EXAMPLE / job), *extra, timeout=STOPPED_WITHIN_S + 60, env=env)


@pytest.fixture
def loopback_hostname(tmp_path: Path) -> dict[str, str]:
    """DeepSpeed's MPI discovery takes rank 0's address from `hostname -I`, the machine's
    first non-loopback address; the tests keep all traffic on loopback, so `-I` says 127.0.0.1.
    """
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("hostname") or "/bin/hostname"
    (shim / "hostname").write_text(f'#!/bin/sh\n[ "$1" = "-I" ] && {{ echo 127.0.0.1; exit 0; }}\nexec {real} "$@"\n')
    (shim / "hostname").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}


# ---------------------------------------------------------------- the three forms, as in examples/deepspeed


def test_zero2_under_type_pytorch(run_cli, distrun_home):
    result = run_example(run_cli, "job.yml")
    ok(result)
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = logs(distrun_home, name)
    texts = [(folder / f"std_log_process_{rank:02d}.txt").read_text() for rank in range(4)]
    assert_trained(texts[0])
    assert_same_weights("\n".join(texts))
    port = master_port(distrun_home, name)
    for rank, text in enumerate(texts):
        # DeepSpeed used the variables distrun set: no discovery of its own.
        assert f"rank {rank}/4 local rank {rank % 2} (environment), master 127.0.0.1:{port}" in text
    model = distrun_home / "jobs" / name / "named-outputs" / "model" / "model.pt"
    assert model.stat().st_size > 0
    assert "[1/3] rank 3 zero stage 2 weights" in result.stdout
    assert processes_of_job(name) == []


def _shm_of(port: object) -> list[str]:
    prefix = f"deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{port}_"
    return sorted(name for name in os.listdir("/dev/shm") if name.startswith(prefix))


def test_zero2_under_type_mpi_with_deepspeed_mpi_discovery(run_cli, distrun_home, loopback_hostname):
    result = run_example(run_cli, "job-mpi.yml", env=loopback_hostname)
    ok(result)
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = logs(distrun_home, name)
    texts = [(folder / f"std_log_process_{rank:02d}.txt").read_text() for rank in range(4)]
    assert_trained(texts[0])
    assert_same_weights("\n".join(texts))
    port = master_port(distrun_home, name)
    for rank, text in enumerate(texts):
        # Ranks found through MPI (all on one machine, so the local rank is the MPI local
        # rank), on the job's port: not the Azure ML path, which would pin port 54965.
        found = re.search(rf"rank {rank}/4 local rank {rank} \(MPI discovery\), master (\S+):(\d+)", text)
        assert found, text[-2000:]
        assert (found.group(1), int(found.group(2))) == ("127.0.0.1", port)
    launcher = json.loads((folder.parent / "plan.json").read_text())["nodes"][0]["processes"][0]
    assert launcher["argv"][:3] == ["mpirun", "-np", "4"]
    assert processes_of_job(name) == []
    # All four ranks on this machine: DeepSpeed's CPU allreduce gave each a 66 MB file in /dev/shm,
    # named after the job's MASTER_ADDR and MASTER_PORT, and never removes it; the node agent does.
    assert _shm_of(port) == []


def test_zero2_with_the_deepspeed_launcher_once_on_node_0(run_cli, distrun_home):
    result = run_example(run_cli, "job-launcher.yml")
    ok(result)
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    assert (folder / "mpi" / "hostfile").read_text() == "localhost slots=4\n"
    plan = json.loads((folder / "plan.json").read_text())
    (launcher,) = plan["nodes"][0]["processes"]
    assert launcher["argv"][:2] == ["bash", "-c"] and launcher["argv"][2].startswith("deepspeed --hostfile")
    assert plan["nodes"][1]["processes"] == []
    text = (folder / "user_logs" / "mpi_log.txt").read_text()
    # The launcher ran once and started all four ranks itself, locally, on the job's port.
    assert len(re.findall(r"cmd = .* -m deepspeed\.launcher\.launch ", text)) == 1
    assert "WORLD INFO DICT: {'localhost': [0, 1, 2, 3]}" in text
    port = plan["master_port"]
    for rank in range(4):
        assert f"rank {rank}/4 local rank {rank} (environment), master 127.0.0.1:{port}" in text
    assert_trained(text)
    assert_same_weights(text)
    assert "[deepspeed] step 30/30 loss" in result.stdout
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- a rank fails inside a DeepSpeed step


# The DeepSpeed launcher with its Open MPI runner: the launcher's mpirun starts the ranks, whose
# tagged lines distrun splits per rank, and a rank fails inside DeepSpeed's forward. A failing
# rank run by distrun's own mpirun (`type: mpi`, `python -m mpi4py`) is proved without DeepSpeed
# by tests/frameworks/test_mpi_jobs.py (each DeepSpeed job here is four ranks' imports of it,
# tens of seconds of CPU). Under `type: pytorch` a DeepSpeed rank is a torch rank like any other:
# the root cause of a failing one is proved by tests/reliability, and torch's `[rankN]: ` prefix
# by the traceback finder's unit tests; DeepSpeed's own training under that form by
# test_zero2_under_type_pytorch. The DeepSpeed launcher with its default runner (no mpirun) is
# one process to distrun, which a failing rank ends with its exit code: the launcher is then the
# root cause, its log the traceback's, as for any one-process job
# (tests/engines/local/test_local_jobs.py). One rank on each of the 2 nodes: the failing rank is
# then on node 1, as with the example's 2 x 2, for half the ranks' imports of DeepSpeed.
def test_failing_rank_is_the_root_cause_with_its_traceback(run_cli, distrun_home, loopback_hostname):
    started = time.monotonic()
    result = run_example(
        run_cli,
        "job-launcher.yml",
        "--set",
        f"command={OPENMPI_RUNNER} {FAIL}",
        "--set",
        "distribution.process_count_per_instance=1",
        "--set",
        "limits.grace_period=3",
        env=loopback_hostname,
    )
    # The other ranks were stopped, not left to time out.
    assert time.monotonic() - started < STOPPED_WITHIN_S < LEFT_TO_TIME_OUT_S
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-4000:]
    name = only_job(distrun_home)
    rec = record(distrun_home, name)
    assert rec["status"] == "Failed"
    cause = rec["root_cause"]
    assert (cause["name"], cause["rank"], cause["node_rank"], cause["exit_code"]) == ("rank_1", 1, 1, 1)
    assert cause["log"].endswith("std_log_process_01.txt")
    traceback = cause["traceback"]
    # The whole traceback, though torch prefixes every line of it with `[rank1]: `.
    assert traceback.startswith("Traceback (most recent call last):")
    assert "deepspeed/runtime/engine.py" in traceback  # raised inside DeepSpeed's forward
    assert traceback.rstrip().endswith("ValueError: bad batch on rank 1 at step 3")
    assert "[rank1]" not in traceback
    assert "Failed first: rank_1 on node 1" in result.stdout
    assert processes_of_job(name) == []


# ---------------------------------------------------------------- DeepSpeed reading what distrun writes

# DeepSpeed's own readers, asked in a process of their own: importing DeepSpeed pulls in its
# optional integrations (mlflow among them), half of which a later test's own `import mlflow` in
# this process would then find. Reads the cases as JSON on stdin: hostfiles to parse, and
# environments to run DeepSpeed's platform detection in.
ASK_DEEPSPEED = """
import json, os, sys
from deepspeed.comm import comm
from deepspeed.launcher.runner import _parse_hostfile
cases = json.load(sys.stdin)
pools = [list(_parse_hostfile(text.splitlines()).items()) for text in cases["hostfiles"]]
platforms = []
for env in cases["envs"]:
    os.environ.clear()
    os.environ.update(env)
    platforms.append([comm.in_aml(), comm.in_aws_sm()])
print(json.dumps({"pools": pools, "platforms": platforms}))
"""

HOST_LISTS = [
    ("10.0.0.1",),
    ("10.0.0.1", "10.0.0.2"),
    ("node-3", "gpu-4.cluster", "node-3"),  # one host twice: its slots add up on one line
    ("10.0.0.2", "10.0.0.1", "10.0.0.2", "node-3", "gpu-4.cluster", "gpu-4.cluster", "10.0.0.1", "node-3"),
]


def every_process_env(command: str, kind: str) -> list[dict[str, str]]:
    data = {
        "command": command,
        "resources": {"instance_count": 2},
        "distribution": {"type": kind, "process_count_per_instance": 2},
    }
    spec = load_job_data(data, Path(".")).spec
    where = Placement(hosts=("127.0.0.1",) * 2, master_port=29511, job_dir="/var/jobs/j", run_id="j", simulated=True)
    return [{**proc.env_defaults, **proc.env} for proc in build_plan(spec, where, Bindings()).processes()]


def test_deepspeed_reads_every_hostfile_distrun_writes_and_takes_no_platform_path() -> None:
    hostfiles = [
        (hosts, slots, simulated, hostfile_text(hosts, slots, simulated))
        for hosts in HOST_LISTS
        for slots in (1, 3, 16)
        for simulated in (False, True)
    ]
    # With AZUREML_EXPERIMENT_ID DeepSpeed would take an MPI job's ranks from OMPI variables, pin
    # port 54965 when all ranks share a machine, and fail without NCCL_SOCKET_IFNAME.
    launcher = "deepspeed --hostfile $AZUREML_MPI_HOSTFILE --no_ssh_check train.py"
    forms = [("python train.py", "pytorch"), ("python -m mpi4py train.py", "mpi"), (launcher, "mpi")]
    envs = [env for command, kind in forms for env in every_process_env(command, kind)]
    assert all(any(name.startswith("AZUREML_") for name in env) for env in envs)  # distrun does set Azure ML names
    cases = {"hostfiles": [text for *_, text in hostfiles], "envs": envs}
    asked = subprocess.run(
        [sys.executable, "-c", ASK_DEEPSPEED], input=json.dumps(cases), capture_output=True, text=True, timeout=300
    )
    assert asked.returncode == 0, asked.stderr[-3000:]
    answers = json.loads(asked.stdout.splitlines()[-1])
    for (hosts, slots, simulated, text), pool in zip(hostfiles, answers["pools"], strict=True):
        assert sum(count for _, count in pool) == len(hosts) * slots, text
        if not simulated:
            assert [host for host, _ in pool] == list(dict.fromkeys(hosts)), text  # node order kept: node 0 first
    assert answers["platforms"] == [[False, False]] * len(envs)
