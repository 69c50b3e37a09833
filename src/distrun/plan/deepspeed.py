"""What distrun's planners know about DeepSpeed: its launcher, and what steers its start-up.

DeepSpeed needs no planner of its own. It runs in three ways, as in Azure ML:
- `type: pytorch`: every process gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
  MASTER_PORT, so `deepspeed.init_distributed()` (also called by `deepspeed.initialize`)
  goes straight to torch's `env://` rendezvous.
- `type: mpi`: ranks started by mpirun lack RANK, so `init_distributed()` finds them with
  mpi4py ("MPI discovery").
- The DeepSpeed launcher (`deepspeed ... train.py`, or its alias `ds`) in command position
  under `type: mpi`: like a command's own `mpirun`, it runs once on node 0 with
  AZUREML_MPI_HOSTFILE, whose `host slots=N` lines are also DeepSpeed's hostfile format.

`init_distributed()` has platform paths taken before MPI discovery when RANK is missing:
AZUREML_EXPERIMENT_ID makes it copy the OMPI_COMM_WORLD_* variables the way Azure ML's
guide does; on one machine (all ranks local) that sets MASTER_PORT to a fixed 54965 over the
job's port, and it reads NCCL_SOCKET_IFNAME, failing with KeyError when it is unset.
distrun sets none of these variables (it names runs with AZUREML_RUN_ID), so MPI discovery
is what runs; `platform_notes` says so when a job sets one itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

# The DeepSpeed launcher's console scripts (`ds` is the short alias DeepSpeed installs).
LAUNCHER_PROGRAMS = ("deepspeed", "ds")
INSTALL_HINT = "install DeepSpeed in this Python environment: pip install deepspeed"
# DeepSpeed's default rendezvous port, used when a launcher or init_distributed() is not told one.
DEFAULT_PORT = 29500

# Variables that make `deepspeed.comm.init_distributed()` take a platform path instead of MPI
# discovery when RANK is missing (deepspeed/comm/comm.py: in_aml, in_aws_sm, in_dlts).
PLATFORM_VARIABLES = {
    "AZUREML_EXPERIMENT_ID": (
        "DeepSpeed's init_distributed() then takes the ranks of an MPI job from OMPI_COMM_WORLD_* as on "
        "Azure ML: it needs NCCL_SOCKET_IFNAME set, and with all ranks on one machine it uses port 54965 "
        "instead of the job's MASTER_PORT"
    ),
    "SM_TRAINING_ENV": (
        "DeepSpeed's init_distributed() then takes the ranks of an MPI job from OMPI_COMM_WORLD_* as on "
        "SageMaker and expects MASTER_ADDR and MASTER_PORT to be right already"
    ),
}

# Launcher options that take a value (`--opt value` or `--opt=value`); others are switches.
_OPTIONS_WITH_VALUE = frozenset(
    {
        "-H",
        "--hostfile",
        "-i",
        "--include",
        "-e",
        "--exclude",
        "--num_nodes",
        "--num_gpus",
        "--num_accelerators",
        "--master_port",
        "--master_addr",
        "--node_rank",
        "--launcher",
        "--launcher_args",
        "--enable_each_rank_log",
        "--autotuning",
        "--bind_core_list",
        "--ssh_port",
        "--venv_script",
        "--log_level",
    }
)


def is_launcher(program: str | None) -> bool:
    return program in LAUNCHER_PROGRAMS


def launcher_options(command: str) -> dict[str, str] | None:
    """The options given to the DeepSpeed launcher in `command` (name -> value, "" for a
    switch), up to the training script; None when no launcher word is found.

    A plain split of the command: good enough for notes, which are advice, not decisions.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    start = next((i for i, word in enumerate(words) if word.rsplit("/", 1)[-1] in LAUNCHER_PROGRAMS), None)
    if start is None:
        return None
    options: dict[str, str] = {}
    rest = iter(words[start + 1 :])
    for word in rest:
        if not word.startswith("-"):
            break  # the training script: what follows is its own arguments
        name, equals, value = word.partition("=")
        if not equals and name in _OPTIONS_WITH_VALUE:
            value = next(rest, "")
        options[name] = value
    return options


def launcher_notes(command: str, simulated: bool, nodes: int, per_node: int) -> list[str]:
    """Advice on a DeepSpeed launcher command run once on node 0 with AZUREML_MPI_HOSTFILE."""
    options = launcher_options(command)
    if options is None:
        return []
    notes = []
    if "--master_port" not in options:
        notes.append(
            f"the DeepSpeed launcher uses port {DEFAULT_PORT} unless told: add --master_port $MASTER_PORT "
            "(the job's free port) so that two jobs on one machine do not collide"
        )
    hostfile = "--hostfile" in options or "-H" in options
    if not hostfile and nodes > 1 and not simulated:
        notes.append(
            "the DeepSpeed launcher is not given --hostfile $AZUREML_MPI_HOSTFILE: it starts ranks on node 0 only"
        )
    if simulated and hostfile and not ({"--no_ssh_check", "--no_ssh"} & options.keys() and "--master_addr" in options):
        notes.append(
            "local compute: the hostfile has one host, and the DeepSpeed launcher reaches it over ssh "
            "(a check, and `hostname -I` for the address) unless given --no_ssh_check --master_addr $MASTER_ADDR; "
            "with those it starts the ranks itself"
        )
    limit = options.get("--num_gpus", options.get("--num_accelerators"))
    if simulated and nodes > 1 and limit is not None and limit.isdigit() and int(limit) < nodes * per_node:
        notes.append(
            f"local compute: the hostfile gives all {nodes * per_node} slots to one host, so the DeepSpeed "
            f"launcher's --num_gpus {limit} starts only {limit} ranks; leave it out and let the hostfile decide"
        )
    return notes


def platform_notes(env: Mapping[str, str]) -> list[str]:
    """A note per variable of the job's own that switches DeepSpeed's MPI start-up path."""
    return [f"{name} is set: {why}" for name, why in PLATFORM_VARIABLES.items() if name in env]
