"""Launch for `type: mpi` (Open MPI, Horovod): one `mpirun` on node 0 starts every rank.

Two forms, as Azure ML documents them:
- distrun builds the launcher: `mpirun -np M*N --hostfile H ... bash -c '<command>'`, so the
  user's command runs once per rank (M = instance_count, N = process_count_per_instance).
- The command starts its own launcher (`mpirun ...`, `mpiexec ...`, `horovodrun ...`, the
  seed draft's `--hostfile $AZUREML_MPI_HOSTFILE` form, or DeepSpeed's `deepspeed ...`):
  distrun runs it once, on node 0, with AZUREML_MPI_HOSTFILE pointing at the hostfile it
  wrote, and does not wrap it again.

Either way the plan has a single process, the launcher; the ranks are mpirun's children.
Its output carries Open MPI's `[job,rank]<stdout>:` tags (`--tag-output`, or the
`orte_tag_output` MCA variable for a user's own mpirun), which the agent splits into one
log per rank (`output_demux`). Rank r runs on node r // N: `--map-by slot` fills each host's
slots in hostfile order.
"""

from __future__ import annotations

import os
import shlex

from distrun.plan import deepspeed
from distrun.plan.common import code_dir, job_env, rendered_command, shell_argv
from distrun.plan.gpus import VISIBLE_DEVICES, launcher_devices, rank_binding, slice_gpus
from distrun.plan.model import Bindings, LaunchPlan, NodePlan, Placement, ProcessSpec
from distrun.plan.plan_job import PlanJob

HOSTFILE_PATH = "mpi/hostfile"  # relative to the job folder
LAUNCHER_NAME = "mpi_launcher"
LAUNCHER_LOG = "mpi_log.txt"
# ProcessSpec.output_demux value: lines tagged by Open MPI (or horovodrun) with their rank.
OUTPUT_DEMUX = "mpi-tagged"
# Programs that start the ranks themselves; a command starting one is not wrapped again.
# DeepSpeed's launcher belongs here too: it reads the same hostfile and starts every rank
# from one node (itself on one host, or through pdsh/ssh or mpirun on several).
LAUNCHER_PROGRAMS = ("mpirun", "mpiexec", "orterun", "horovodrun", *deepspeed.LAUNCHER_PROGRAMS)

# Root may run mpirun only with --allow-run-as-root. These variables are Open MPI's
# equivalent of that flag and change nothing for other users, so the plan stays the same
# whoever runs it, and a user's own `mpirun` (seed 001's examples have no such flag) works too.
_RUN_AS_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# `--tag-output` for an mpirun distrun does not write itself.
_TAG_OUTPUT_ENV = {"OMPI_MCA_orte_tag_output": "1"}
# distrun's defaults, each dropped when mpirun_args already says otherwise.
_DEFAULT_FLAGS = ((("--bind-to", "-bind-to"), ("--bind-to", "none")), (("--map-by", "-map-by"), ("--map-by", "slot")))
# Command words after which the next word is still in command position.
_COMMAND_PREFIXES = frozenset({"exec", "time", "nohup", "command", "builtin", "then", "do", "else", "!", "{"})
_ENV_OPTIONS_WITH_ARGUMENT = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
_SEPARATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "(", ")", "\n"})


def hostfile_text(hosts: tuple[str, ...], slots: int, simulated: bool) -> str:
    """Open MPI's hostfile format (also read by Horovod and DeepSpeed): `host slots=N` per host.

    Each host appears once, with the slots of all its nodes: mpirun would count a repeated
    host once, and DeepSpeed's launcher refuses a hostfile that repeats one. Simulated nodes
    all live on this machine, so it gets every slot on one line, as `localhost` (which
    mpirun starts ranks on without ssh).
    """
    if simulated:
        return f"localhost slots={slots * len(hosts)}\n"
    per_host: dict[str, int] = {}
    for host in hosts:
        per_host[host] = per_host.get(host, 0) + slots
    return "".join(f"{host} slots={count}\n" for host, count in per_host.items())


def user_launcher(command: str) -> str | None:
    """The MPI launcher the command starts itself (`mpirun`, `horovodrun`, ...), if any.

    Looks at words in command position only: `A=1 mpirun ...`, `cd src && horovodrun ...`
    count; `echo mpirun` or `python train.py --launcher mpirun` do not. A launcher hidden
    inside a nested `bash -c '...'` is not seen.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: bash reports it when the job runs
        return None
    at_command = True
    in_env = False  # after `env`: its options and NAME=value words come before the program
    skip_next = False  # the argument of an `env` option such as `-u NAME`
    for word in words:
        if word in _SEPARATORS:
            at_command, in_env, skip_next = True, False, False
            continue
        if not at_command:
            continue
        if skip_next:
            skip_next = False
            continue
        if _is_assignment(word) or word in _COMMAND_PREFIXES:
            continue
        if word == "env":
            in_env = True
            continue
        if in_env and word.startswith("-"):
            skip_next = word in _ENV_OPTIONS_WITH_ARGUMENT
            continue
        program = os.path.basename(word)
        if program in LAUNCHER_PROGRAMS:
            return program
        at_command = in_env = False
    return None


def _is_assignment(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier()


def rank_node(rank: int, per_node: int) -> int:
    """The node a rank runs on under `--map-by slot` with N slots per host."""
    return rank // max(per_node, 1)


def mpirun_argv(world: int, hostfile: str, exported: list[str], extra: list[str], command: str) -> tuple[str, ...]:
    """`mpirun` running `bash -c command` once per rank, with the job's variables exported."""
    argv = ["mpirun", "-np", str(world), "--hostfile", hostfile, "--tag-output"]
    given = set(extra)
    for spellings, flags in _DEFAULT_FLAGS:
        if not given.intersection(spellings):
            argv.extend(flags)
    # `-x NAME` passes the variable's value from mpirun's environment to ranks on other hosts
    # (ranks on node 0 inherit it anyway); values stay out of the command line.
    for name in exported:
        argv.extend(("-x", name))
    argv.extend(extra)
    argv.extend(shell_argv(command))
    return tuple(argv)


def plan_mpi(job: PlanJob, placement: Placement, bindings: Bindings) -> LaunchPlan:
    per_node = job.process_count_per_instance
    world = len(placement.hosts) * per_node
    command = rendered_command(job, bindings)
    hostfile = placement.job_dir.rstrip("/") + "/" + HOSTFILE_PATH

    env = job_env(job, placement, bindings)
    env.update(
        {
            # Seed 002's helper takes MASTER_ADDR from AZ_BATCH_MASTER_NODE and MASTER_PORT from
            # the environment, falling back to a fixed 6105; giving it the job's port avoids
            # clashes between jobs on one machine.
            "MASTER_ADDR": placement.master_addr,
            "MASTER_PORT": str(placement.master_port),
            "AZUREML_MPI_HOSTFILE": hostfile,
        }
    )
    defaults = _mpi_defaults(placement, per_node)
    # Open MPI passes its own OMPI_* variables on by itself.
    exported = [name for name in dict.fromkeys(["PATH", *env, *defaults]) if not name.startswith("OMPI_")]

    own_launcher = user_launcher(command)
    gpus = slice_gpus(job, placement, per_node)
    notes = list(gpus.notes)
    if own_launcher:
        argv = shell_argv(command)
        label = own_launcher
        launcher_env = {**env, **_RUN_AS_ROOT_ENV, **_TAG_OUTPUT_ENV}
        notes += _own_launcher_notes(job, placement, command, own_launcher, world)
        if gpus.per_node:
            # One launcher for every rank: the ranks index the GPUs by their local rank on this host.
            devices = launcher_devices(gpus, per_node)
            launcher_env[VISIBLE_DEVICES] = ",".join(devices)
            notes.append(_own_launcher_gpu_note(own_launcher, devices))
    else:
        # Each rank takes its simulated node's GPUs before the command runs (see gpus.rank_binding).
        argv = mpirun_argv(world, hostfile, exported, list(job.mpirun_args), rank_binding(gpus, per_node) + command)
        label = "mpirun"
        launcher_env = {**env, **_RUN_AS_ROOT_ENV}
    if placement.simulated and len(placement.hosts) > 1:
        notes.append(f"local compute: the hostfile gives all {world} slots to this machine")
    notes += deepspeed.platform_notes(job.environment_variables)

    launcher = ProcessSpec(
        name=LAUNCHER_NAME,
        role="launcher",
        index=0,
        node_rank=0,
        local_rank=0,
        rank=None,
        argv=argv,
        env=launcher_env,
        env_defaults=defaults,
        cwd=code_dir(placement),
        log_name=LAUNCHER_LOG,
        label=label,
        output_demux=OUTPUT_DEMUX,
    )
    files = {HOSTFILE_PATH: hostfile_text(placement.hosts, per_node, placement.simulated)}
    nodes = [NodePlan(node_rank=0, host=placement.hosts[0], processes=(launcher,), files=files, gpus=gpus.of(0))]
    # The other nodes run nothing of their own: mpirun reaches them through the hostfile.
    others = enumerate(placement.hosts[1:], start=1)
    nodes += [NodePlan(node_rank=k, host=host, processes=(), gpus=gpus.of(k)) for k, host in others]
    return LaunchPlan(
        job_name=placement.run_id,
        distribution="mpi",
        command=command,
        world_size=world,
        master_addr=placement.master_addr,
        master_port=placement.master_port,
        nodes=tuple(nodes),
        notes=tuple(notes),
    )


def _mpi_defaults(placement: Placement, per_node: int) -> dict[str, str]:
    """The environment defaults of every rank (a job's own value wins): threads, and Open MPI on one machine."""
    defaults = {"OMP_NUM_THREADS": "1"} if per_node > 1 else {}
    if placement.simulated or all(host.startswith("127.") for host in placement.hosts):
        # Simulated nodes share this machine's cores, so ranks often outnumber them; a rank
        # waiting in a collective then gives its core away instead of spinning on it.
        defaults["OMPI_MCA_mpi_yield_when_idle"] = "1"
        # Every rank is on this machine: keep Open MPI's TCP traffic (ranks, mpirun) on loopback
        # (which Open MPI leaves out by default) instead of whatever other interface it has.
        defaults["OMPI_MCA_btl_tcp_if_include"] = "lo"
        defaults["OMPI_MCA_oob_tcp_if_include"] = "lo"
        if not placement.simulated and len(set(placement.hosts)) > 1:
            # Nodes at different loopback addresses are one machine (a test cluster): its ranks
            # under different mpirun daemons would take each other for shared-memory peers.
            defaults["OMPI_MCA_btl"] = "self,tcp"
    return defaults


def _own_launcher_notes(job: PlanJob, placement: Placement, command: str, program: str, world: int) -> list[str]:
    """What `distrun plan` says of a command that starts its own launcher (mpirun, deepspeed, horovodrun)."""
    notes = [
        f"the command starts {program} itself: distrun runs it once on node 0 with "
        f"AZUREML_MPI_HOSTFILE ({world} slots) and does not wrap it"
    ]
    if job.mpirun_args:
        notes.append("distribution.mpirun_args is ignored: the command runs its own launcher")
    if deepspeed.is_launcher(program):
        notes += deepspeed.launcher_notes(
            command, placement.simulated, len(placement.hosts), job.process_count_per_instance
        )
    return notes


def _own_launcher_gpu_note(program: str, devices: tuple[str, ...]) -> str:
    text = (
        f"local compute: {program} starts every rank on this machine, so it sees CUDA_VISIBLE_DEVICES="
        f"{','.join(devices)} (each node's GPUs in node order) and a rank picks its GPU by its local rank "
        "(OMPI_COMM_WORLD_LOCAL_RANK, or LOCAL_RANK under DeepSpeed)"
    )
    if deepspeed.is_launcher(program):
        text += f"; the DeepSpeed launcher renumbers GPUs itself: give it --include localhost:{','.join(devices)}"
    return text
