"""The sbatch script of a job: a pure function of the job and the compute target.

One node agent per node, started by `srun --ntasks-per-node=1 --kill-on-bad-exit=1`: a node
whose agent exits non-zero (one of its ranks failed) ends the step on every node at once.
`distrun plan --compute <slurm target>` prints exactly this script.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.target import SlurmTarget, node_resources, pinned_master_port, slurm_time_limit
from distrun.plan import task_port_count
from distrun.spec.models import JobSpec


def sbatch_directives(job: JobSpec, target: SlurmTarget, *, job_name: str, job_dir: str) -> list[str]:
    paths = SlurmPaths(Path(job_dir))
    res = node_resources(job, target)
    options = [
        f"--job-name={job_name}",
        f"--nodes={job.node_count}",
        "--ntasks-per-node=1",
    ]
    if res.cpus:
        options.append(f"--cpus-per-task={res.cpus}")
    if res.memory:
        options.append(f"--mem={res.memory}")
    if res.gpus:
        options.append(f"--gpus-per-node={res.gpus}")
    time_limit = slurm_time_limit(job, target)
    if time_limit:
        options.append(f"--time={time_limit}")
    for flag, value in (("--partition", target.partition), ("--account", target.account), ("--qos", target.qos)):
        if value:
            options.append(f"{flag}={value}")
    options += [
        f"--output={_quote(str(paths.output))}",
        f"--chdir={_quote(job_dir)}",
        # The ranks see the submitting environment, as on local compute.
        "--export=ALL",
    ]
    options += target.sbatch_options
    return options


def render_batch_script(job: JobSpec, target: SlurmTarget, *, job_name: str, job_dir: str, python: str) -> str:
    """The sbatch script for a job: pure; `distrun plan --compute <slurm target>` prints it."""
    res = node_resources(job, target)
    nodes = job.node_count
    py = shlex.quote(python)
    lines = ["#!/bin/bash", f"# distrun job {job_name}: {nodes} node(s), one distrun node agent per node."]
    lines += [f"#SBATCH {option}" for option in sbatch_directives(job, target, job_name=job_name, job_dir=job_dir)]
    lines += ["", "set -u"]
    if target.setup:
        lines += ["# setup from the compute target", *target.setup]
    wanted = port_count(job)
    if wanted:
        what = "MASTER_PORT" if pinned_master_port(job) is None else ""
        if task_port_count(job):
            what += (" and " if what else "") + f"{task_port_count(job)} task port(s)"
        lines += [
            f"# {what}: free on the first node, where this script runs",
            f"DISTRUN_PORTS=$({py} -m distrun.backends.slurm.node_agent --free-ports {wanted}) || exit 1",
            "export DISTRUN_PORTS",
        ]
    else:
        lines += [f"# MASTER_PORT {pinned_master_port(job)} is pinned by the job's environment_variables"]
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if res.cpus:  # since Slurm 22.05 srun no longer inherits --cpus-per-task from sbatch
        srun.append(f"--cpus-per-task={res.cpus}")
    if res.gpus:
        srun.append(f"--gpus-per-node={res.gpus}")
    agent = [python, "-m", "distrun.backends.slurm.node_agent", "--job-dir", job_dir]
    lines += [
        "# Each node agent runs its node's ranks; one failing node ends the step on all nodes.",
        "exec " + " ".join(srun) + " " + shlex.join(agent),
        "",
    ]
    return "\n".join(lines)


def port_count(job: JobSpec) -> int:
    """Ports the batch script finds on the first node: MASTER_PORT unless pinned, then the task ports."""
    return (0 if pinned_master_port(job) is not None else 1) + task_port_count(job)


def _quote(value: str) -> str:
    # sbatch reads #SBATCH lines with its own parser, which understands double quotes.
    return f'"{value}"' if re.search(r"\s", value) else value
