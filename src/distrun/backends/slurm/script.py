"""The sbatch script of a job: a pure function of the job and the compute target.

One node agent per node, started by `srun --ntasks-per-node=1 --kill-on-bad-exit=1`: a node
whose agent exits non-zero (one of its ranks failed) ends the step on every node at once.
`distrun plan --compute <slurm target>` prints exactly this script.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.target import SlurmSettings, node_resources, pinned_master_port, slurm_time_limit
from distrun.plan import task_port_count
from distrun.restarts.policy import RestartPolicy
from distrun.spec.models import JobSpec

# Beyond the grace period: time for the batch script to reach the node agents, and for them to
# publish their outcomes, before Slurm kills what is left.
PREEMPTION_MARGIN_S = 30


def sbatch_directives(job: JobSpec, target: SlurmSettings, *, job_name: str, job_dir: str) -> list[str]:
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
    if RestartPolicy.of(job.limits).on:
        options += [
            # Slurm may requeue the job (preemption, a failed node); distrun requeues it after a preemption.
            "--requeue",
            # Every attempt's lines stay in output.txt: a requeued job would truncate it.
            "--open-mode=append",
            # A warning before the time limit reaches the batch script, which forwards it to the steps
            # as a preemption: the ranks get the grace period to checkpoint.
            f"--signal=B:TERM@{preemption_notice_s(job)}",
        ]
    options += target.sbatch_options
    return options


def preemption_notice_s(job: JobSpec) -> int:
    """Seconds of warning the batch script asks for: the job's grace period and a margin to start it."""
    return math.ceil(job.limits.grace_seconds) + PREEMPTION_MARGIN_S


def render_batch_script(job: JobSpec, target: SlurmSettings, *, job_name: str, job_dir: str, python: str) -> str:
    """The sbatch script for a job: pure; `distrun plan --compute <slurm target>` prints it."""
    res = node_resources(job, target)
    nodes = job.node_count
    py = shlex.quote(python)
    lines = ["#!/bin/bash", f"# distrun job {job_name}: {nodes} node(s), one distrun node agent per node."]
    lines += [f"#SBATCH {option}" for option in sbatch_directives(job, target, job_name=job_name, job_dir=job_dir)]
    lines += ["", "set -u"]
    if target.setup:
        lines += ["# setup from the compute target", *target.setup]
    ports = port_lines(job, py)
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if res.cpus:  # since Slurm 22.05 srun no longer inherits --cpus-per-task from sbatch
        srun.append(f"--cpus-per-task={res.cpus}")
    if res.gpus:
        srun.append(f"--gpus-per-node={res.gpus}")
    agent = [python, "-m", "distrun.backends.slurm.node_agent", "--job-dir", job_dir]
    step = " ".join(srun) + " " + shlex.join(agent)
    if RestartPolicy.of(job.limits).on:
        lines += attempt_loop(job, job_dir, py, ports, step)
    else:
        lines += ports
        lines += [
            "# Each node agent runs its node's ranks; one failing node ends the step on all nodes.",
            "exec " + step,
            "",
        ]
    return "\n".join(lines)


def port_lines(job: JobSpec, py: str) -> list[str]:
    """Lines that find the job's ports on the first node (DISTRUN_PORTS), or say they are pinned."""
    wanted = port_count(job)
    if not wanted:
        return [f"# MASTER_PORT {pinned_master_port(job)} is pinned by the job's environment_variables"]
    what = "MASTER_PORT" if pinned_master_port(job) is None else ""
    if task_port_count(job):
        what += (" and " if what else "") + f"{task_port_count(job)} task port(s)"
    return [
        f"# {what}: free on the first node, where this script runs",
        f"DISTRUN_PORTS=$({py} -m distrun.backends.ports {wanted}) || exit 1",
        "export DISTRUN_PORTS",
    ]


def attempt_loop(job: JobSpec, job_dir: str, py: str, ports: list[str], step: str) -> list[str]:
    """A job with restarts: attempts in a loop, each one srun of the node agents (distrun.backends.slurm.attempts).

    A failed attempt runs again in this allocation; a preempted one is requeued (`scontrol requeue`)
    and waits for nodes again. A SIGTERM reaching this script from outside (Slurm's `--signal`
    warning, `scancel --signal=TERM --batch`) is noted as a preemption, unless `distrun job cancel`
    noted a cancel first, and forwarded to the node agents, whose ranks get the grace period.
    """
    paths = SlurmPaths(Path(job_dir))
    policy = RestartPolicy.of(job.limits)
    preemptions = policy.preemptions_allowed
    said = f"limits.max_restarts {policy.max_restarts}, limits.max_preemptions "
    said += "unlimited" if math.isinf(preemptions) else str(int(preemptions))
    cancel, preempted = shlex.quote(str(paths.cancel)), shlex.quote(str(paths.preempted))
    return [
        f"# Restarts ({said}): attempt k+1 after a failed attempt k, in this allocation;",
        "# after a preemption the job is requeued. DISTRUN_RESTART_COUNT is the attempt number.",
        f"ATTEMPTS=({py} -m distrun.backends.slurm.attempts --job-dir {shlex.quote(job_dir)})",
        "preempted() {",
        "    # The note's first line is the time: a rank's exit after it is this stop's doing.",
        f'    [ -e {cancel} ] || printf "%s\\nSIGTERM from outside at %s\\n" \\',
        f'        "$(date +%s.%N)" "$(date -u +%FT%TZ)" > {preempted}',
        '    scancel --signal=TERM "$SLURM_JOB_ID"  # every step, not this script',
        "}",
        "trap preempted TERM",
        "while :; do",
        '    NEXT=$("${ATTEMPTS[@]}" begin) || exit 1',
        '    case "$NEXT" in stop*) exit "${NEXT#stop }" ;; esac',
        '    export DISTRUN_RESTART_COUNT="$NEXT" TORCHELASTIC_RESTART_COUNT="$NEXT"',
        *("    " + line for line in ports),
        "    # Each node agent runs its node's ranks; one failing node ends the step on all nodes.",
        f"    {step} &",
        "    STEP=$!",
        "    # wait returns early when the trap ran: wait again until the step has ended.",
        '    while ! wait "$STEP"; do kill -0 "$STEP" 2>/dev/null || break; done',
        '    NEXT=$("${ATTEMPTS[@]}" end) || exit 1',
        '    case "$NEXT" in',
        '        restart*) sleep "${NEXT#restart }" ;;',
        '        requeue) scontrol requeue "$SLURM_JOB_ID"; exit 0 ;;',
        '        *) exit "${NEXT#stop }" ;;',
        "    esac",
        "done",
        "",
    ]


def port_count(job: JobSpec) -> int:
    """Ports the batch script finds on the first node: MASTER_PORT unless pinned, then the task ports."""
    return (0 if pinned_master_port(job) is not None else 1) + task_port_count(job)


def _quote(value: str) -> str:
    # sbatch reads #SBATCH lines with its own parser, which understands double quotes.
    return f'"{value}"' if re.search(r"\s", value) else value
