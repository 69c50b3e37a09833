"""Jobs on the Ray test cluster: small payloads, and the environment distrun must give each process there.

A framework takes its wiring from the environment (RANK, MASTER_ADDR, TF_CONFIG, ...), and the
frameworks themselves run end to end on local compute (tests/frameworks/). What Ray changes is
where each process runs and the values it gets: a rank that prints its environment shows that in
a fraction of the time a framework import takes, and a test compares what it printed, key by
key, with the values worked out from where Ray placed the job (`ray_placement.json`).

The Ray nodes of the test cluster are one machine: the ranks of both nodes share its
filesystem, so a folder named on the command line can serve as a barrier between them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import env_dump

MARK = "ENV "

# show_env.py [ARGS]: prints `ENV {"argv": ARGS, "cwd": ..., "env": {...}}`, with every variable of
# its environment, in one write (processes that share an output pipe never cut into each other's line).
SHOW_ENV = f"""
import json, os, sys
shown = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
os.write(1, ({MARK!r} + json.dumps(shown) + "\\n").encode())
"""

# tf_task.py chief: shows its environment, then is a TensorFlow task without TensorFlow
# (support.env_dump.TF_TASK): the chief reaches every other task at its TF_CONFIG address and
# ends; the workers and parameter servers serve until distrun stops them.
TF_TASK = SHOW_ENV + env_dump.TF_TASK

# What an MPI rank is given, by Open MPI and by distrun through mpirun (a few keys: the line
# passes through mpirun's tagged output whole).
MPI_KEYS = (
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "AZUREML_MPI_HOSTFILE",
    "DISTRUN_JOB_DIR",
    "DISTRUN_JOB_NAME",
    "AZUREML_RUN_ID",
    "AZUREML_NODE_COUNT",
    "AZ_BATCH_HOST_LIST",
    "AZ_BATCH_MASTER_NODE",
    "AZ_BATCHAI_MPI_MASTER_NODE",
    "AZUREML_CR_NODE_RANK",
    "NODE_RANK",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "OMP_NUM_THREADS",
    "OMPI_MCA_btl",
    "OMPI_MCA_btl_tcp_if_include",
    "OMPI_MCA_oob_tcp_if_include",
    "OMPI_MCA_mpi_yield_when_idle",
)

# allreduce.py (under `python -m mpi4py`): one MPI_COMM_WORLD over both nodes' ranks, the node
# agent whose process tree the rank is in (from its launch marker), and its environment.
MPI_ALLREDUCE = f"""
import json, os
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
node = os.environ["DISTRUN_LAUNCH_ID"].rsplit("-", 1)[1]
print(f"rank {{comm.Get_rank()}} of {{comm.Get_size()}} sum {{total}} "
      f"local {{os.environ['OMPI_COMM_WORLD_LOCAL_RANK']}} under {{node}}", flush=True)
shown = {{"env": {{key: os.environ[key] for key in {list(MPI_KEYS)!r} if key in os.environ}}}}
print({MARK!r} + json.dumps(shown), flush=True)
"""

# ranks.py BARRIER: every rank says `up RANK` and leaves a mark in the folder BARRIER; rank 3
# (on node 1) fails once all 4 marks are there, so that every other rank is running (its SIGTERM
# handler in place) when it does. The others serve until stopped and say when they were. Under
# `type: mpi` the rank is Open MPI's own variable, and mpirun ends the others itself.
FAILING_RANK = """
import os, signal, sys, time
from pathlib import Path
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK"))
def stopped(signum, frame):
    print(f"stopped at {time.time():.3f}", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
print("up", rank, flush=True)
barrier = Path(sys.argv[1])
(barrier / rank).touch()
if rank == "3":
    while len(list(barrier.iterdir())) < 4:
        time.sleep(0.02)
    print(f"failing at {time.time():.3f}", flush=True)
    raise ValueError("bad batch on rank 3")
time.sleep(600)
"""

# Variables of `type: pytorch` (torchrun's set); a TensorFlow task must have none of them.
PYTORCH_KEYS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
# What DeepSpeed's init_distributed() reads: all five set, it takes torch's env:// rendezvous;
# any of the platform variables would send an incomplete set down Azure ML's or SageMaker's path.
DEEPSPEED_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
DEEPSPEED_PLATFORM_KEYS = ("AZUREML_EXPERIMENT_ID", "SM_TRAINING_ENV", "DLTS_JOB_ID")
TENSORFLOW_KEYS = ("TF_CONFIG", "DISTRUN_TASK_TYPE", "DISTRUN_TASK_INDEX")


def shown(text: str) -> dict[str, Any]:
    """What the one show_env.py (or tf_task.py) of a log printed: argv, cwd and env."""
    (line,) = [line for line in text.splitlines() if line.startswith(MARK)]
    return json.loads(line[len(MARK) :])


def placed(job_folder: Path) -> dict[str, Any]:
    """The driver's record of where Ray placed the job: the placement group, and each node's
    address, node id and job folder (its own copy: no shared filesystem is assumed)."""
    return json.loads((job_folder / "system_logs" / "ray_placement.json").read_text())


def on_two_nodes(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """Where the job in `folder` was placed, checked to be two distinct Ray nodes, and their addresses."""
    where = placed(folder)
    assert len({node["node_id"] for node in where["nodes"]}) == 2, where
    return where, [node["address"] for node in where["nodes"]]


def plan(job_folder: Path) -> dict[str, Any]:
    return json.loads((job_folder / "plan.json").read_text())


def job_wide(name: str, hosts: list[str], master_port: int) -> dict[str, str]:
    """What every process of a job on 2+ placed nodes gets, whatever its framework."""
    return {
        "PYTHONUNBUFFERED": "1",
        "AZUREML_RUN_ID": name,
        "DISTRUN_JOB_NAME": name,
        "AZUREML_NODE_COUNT": str(len(hosts)),
        "AZ_BATCH_HOST_LIST": ",".join(hosts),
        "AZ_BATCH_MASTER_NODE": f"{hosts[0]}:{master_port}",
        "AZ_BATCHAI_MPI_MASTER_NODE": hosts[0],
        "DISTRUN_RESTART_COUNT": "0",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }


def node_job_dir(where: dict[str, Any], name: str) -> str:
    """The node's own copy of the job folder, as `ray_placement.json` names its folder."""
    return f"{where['workdir']}/{name}"


def pytorch_rank(name: str, hosts: list[str], master_port: int, rank: int, per_node: int) -> dict[str, str | None]:
    """Every variable distrun sets for rank `rank` of `type: pytorch` over `hosts`, and no TF_CONFIG."""
    node, local = divmod(rank, per_node)
    world = len(hosts) * per_node
    return {
        **job_wide(name, hosts, master_port),
        "RANK": str(rank),
        "LOCAL_RANK": str(local),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(node),
        "GROUP_WORLD_SIZE": str(len(hosts)),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "NODE_RANK": str(node),
        "MASTER_ADDR": hosts[0],
        "MASTER_PORT": str(master_port),
        "AZUREML_CR_NODE_RANK": str(node),
        "AZUREML_PROCESS_NAME": f"rank_{rank}",
        **dict.fromkeys(TENSORFLOW_KEYS),
    }


def tensorflow_task(
    name: str, hosts: list[str], master_port: int, cluster: dict[str, list[str]], role: str, index: int, node: int
) -> dict[str, str | None]:
    """Every variable distrun sets for TensorFlow task (role, index) on `node`: TF_CONFIG whole,
    and none of torchrun's variables (a RANK would send a parameter server down a rank's path)."""
    tf_config = {"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"}
    return {
        **job_wide(name, hosts, master_port),
        **dict.fromkeys(PYTORCH_KEYS),
        "NODE_RANK": str(node),
        "AZUREML_CR_NODE_RANK": str(node),
        "AZUREML_PROCESS_NAME": f"{role}_{index}",
        "DISTRUN_TASK_TYPE": role,
        "DISTRUN_TASK_INDEX": str(index),
        "TF_CONFIG": json.dumps(tf_config),
    }


def mpi_rank(
    name: str, hosts: list[str], master_port: int, rank: int, per_node: int, node0_dir: str
) -> dict[str, str | None]:
    """What rank `rank` of `type: mpi` has, on either node: Open MPI's rank variables, and what
    distrun set for mpirun on node 0 (mpirun passes it on): no torchrun variables, no node rank
    (mpirun's ranks are not one node's), and Open MPI kept on loopback, over TCP between the
    nodes (two addresses of one machine would take each other for shared-memory peers)."""
    expected: dict[str, str | None] = {
        **job_wide(name, hosts, master_port),
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(len(hosts) * per_node),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % per_node),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node),
        "MASTER_ADDR": hosts[0],
        "MASTER_PORT": str(master_port),
        "AZUREML_MPI_HOSTFILE": f"{node0_dir}/mpi/hostfile",
        "DISTRUN_JOB_DIR": node0_dir,
        "AZUREML_CR_NODE_RANK": None,
        "NODE_RANK": None,
        "RANK": None,
        "LOCAL_RANK": None,
        "WORLD_SIZE": None,
        "OMP_NUM_THREADS": "1",
        "OMPI_MCA_btl": "self,tcp",
        "OMPI_MCA_btl_tcp_if_include": "lo",
        "OMPI_MCA_oob_tcp_if_include": "lo",
        "OMPI_MCA_mpi_yield_when_idle": "1",
    }
    # The payload shows these keys only; the restart counts are not among them.
    return {key: expected[key] for key in MPI_KEYS}


def picked(env: dict[str, str], expected: dict[str, Any]) -> dict[str, str | None]:
    """`env`'s values for the keys of `expected` (None where unset), to compare whole."""
    return {key: env.get(key) for key in expected}


def ray_variables(env: dict[str, str]) -> list[str]:
    """The Ray worker's own RAY_* variables a process inherited (it must get none: they describe
    the Ray worker that started the node agent, not the job)."""
    return sorted(key for key in env if key.startswith("RAY_"))
