"""The Slurm backend: a job becomes one sbatch script; Slurm places it, distrun's node agent runs it.

distrun does not replace Slurm. It renders a batch script (`render_batch_script`, a pure
function of the job and the compute target, printed by `distrun plan`), submits it with
`sbatch --parsable`, and reads the job's state back from `scontrol`/`squeue` (no accounting
needed). Inside the allocation, `srun --ntasks-per-node=1 --kill-on-bad-exit=1` starts one
node agent per node (`python -m distrun.agent.node`), the same agent local compute uses;
it resolves the node's facts from Slurm, runs that node's ranks, and writes its outcome to
the job folder. That folder lives under DISTRUN_HOME, which every node must see.

Files of a Slurm job, under `<job folder>/slurm/` (`SlurmPaths`):
    batch.sh        the script submitted, exactly as `distrun plan` shows it
    launch.json     the job and its bindings, read by every node agent
    job_id          Slurm's job id
    output.txt      the batch step's output: srun's messages and every rank's labelled lines
    node_NN.json    each node's outcome (status, root cause with traceback, timings)
    cancel          present once `distrun job cancel` asked Slurm to cancel
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distrun.errors import DistrunError
from distrun.plan.model import Bindings
from distrun.spec.models import JobSpec

LAUNCH_FORMAT = 1
DEFAULT_GRACE_PERIOD = 10.0
# Slurm checks time limits about every 30 s and counts in whole minutes: its limit is a
# backstop behind the node agent's own timeout, late enough for the agent to stop the ranks.
SLURM_TIME_MARGIN_S = 30.0
COMMAND_TIMEOUT_S = 60.0

# ---------------------------------------------------------------- job folder layout


@dataclass(frozen=True)
class SlurmPaths:
    job_dir: Path

    @property
    def folder(self) -> Path:
        return self.job_dir / "slurm"

    @property
    def script(self) -> Path:
        return self.folder / "batch.sh"

    @property
    def launch(self) -> Path:
        return self.folder / "launch.json"

    @property
    def job_id(self) -> Path:
        return self.folder / "job_id"

    @property
    def output(self) -> Path:
        return self.folder / "output.txt"

    @property
    def cancel(self) -> Path:
        return self.folder / "cancel"

    def node_outcome(self, node_rank: int) -> Path:
        return self.folder / f"node_{node_rank:02d}.json"

    @property
    def user_logs(self) -> Path:
        return self.job_dir / "user_logs"


# ---------------------------------------------------------------- compute target


class SlurmTarget(BaseModel):
    """A Slurm compute target: where and how distrun's jobs are submitted.

    Written in `$DISTRUN_HOME/config.yaml` or with `distrun compute create --type slurm --set K=V`.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "slurm"
    type: str = Field("slurm", pattern="^slurm$")
    partition: str | None = Field(None, description="sbatch --partition")
    account: str | None = Field(None, description="sbatch --account")
    qos: str | None = Field(None, description="sbatch --qos")
    time_limit: str | None = Field(
        None, description="sbatch --time for jobs without limits.timeout (Slurm syntax: MM, HH:MM:SS, D-HH:MM)"
    )
    cpus_per_node: int | None = Field(None, ge=1, description="CPUs per node (the job's resources.properties win)")
    memory_per_node: str | None = Field(None, pattern=r"^\d+[KMGTkmgt]?$", description="sbatch --mem, e.g. 64G")
    gpus_per_node: str | None = Field(None, pattern=r"^([A-Za-z0-9_.-]+:)?\d+$", description="e.g. 4 or a100:4")
    sbatch_options: list[str] = Field(default_factory=list, description="more sbatch options, e.g. --exclusive")
    setup: list[str] = Field(default_factory=list, description="shell lines run before the node agents start")
    python: str | None = Field(None, description="Python on the nodes that has distrun (default: this one)")
    slurm_conf: str | None = Field(None, description="slurm.conf of the cluster (SLURM_CONF); default: Slurm's own")

    @field_validator("gpus_per_node", mode="before")
    @classmethod
    def _gpus_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("sbatch_options", mode="before")
    @classmethod
    def _split_options(cls, value: Any) -> Any:
        # `--set sbatch_options="--exclusive --constraint=ib"` gives one string.
        return shlex.split(value) if isinstance(value, str) else value

    @field_validator("setup", mode="before")
    @classmethod
    def _setup_lines(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("sbatch_options")
    @classmethod
    def _options(cls, value: list[str]) -> list[str]:
        for option in value:
            if not option.startswith("-") or "\n" in option:
                raise ValueError(f"{option!r} is not an sbatch option: write options such as --exclusive")
            if _option_name(option) in _RENDERED_OPTIONS:
                raise ValueError(
                    f"{option!r} is set by distrun from the job; use the job's own fields "
                    "(resources.instance_count, limits.timeout) or this target's settings"
                )
        return value

    @field_validator("setup")
    @classmethod
    def _setup(cls, value: list[str]) -> list[str]:
        for line in value:
            if "\n" in line:
                raise ValueError("give setup as a list of lines, one command per line")
        return value

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> SlurmTarget:
        """Validate a target's settings; every mistake becomes one `DistrunError` that says how to fix it."""
        from pydantic import ValidationError as PydanticError

        known = sorted(cls.model_fields)
        try:
            return cls.model_validate({"name": name, **settings})
        except PydanticError as exc:
            lines = []
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"]) or "settings"
                if err["type"] == "extra_forbidden":
                    close = difflib.get_close_matches(str(err["loc"][0]), known, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    lines.append(f"unknown setting {key!r}{hint}")
                else:
                    lines.append(f"{key}: {err['msg'].removeprefix('Value error, ')}")
            raise DistrunError(
                f"compute target {name!r} (slurm): " + "; ".join(lines),
                "settings of a slurm target: " + ", ".join(k for k in known if k not in ("name", "type")),
            ) from None

    def client_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env


# Options distrun renders from the job; a target may not set them a second time.
_RENDERED_OPTIONS = frozenset(
    {"--nodes", "-N", "--ntasks-per-node", "--ntasks", "-n", "--output", "-o", "--error", "-e", "--chdir", "-D"}
    | {"--job-name", "-J", "--parsable", "--wrap", "--export"}
)


def _option_name(option: str) -> str:
    if option.startswith("--"):
        return option.split("=", 1)[0]
    return option[:2]


# ---------------------------------------------------------------- what a node gets


@dataclass(frozen=True)
class NodeResources:
    cpus: int | None = None
    memory: str | None = None
    gpus: str | None = None


# Keys in the job's `resources.properties` that ask Slurm for per-node resources.
JOB_RESOURCE_KEYS = ("cpus_per_node", "memory_per_node", "gpus_per_node")


def node_resources(job: JobSpec, target: SlurmTarget) -> NodeResources:
    """Per-node CPUs, memory and GPUs: the job's `resources.properties` first, then the target's."""
    props = job.resources.properties or {}
    merged = target.model_copy()
    overrides = {key: props[key] for key in JOB_RESOURCE_KEYS if props.get(key) is not None}
    if overrides:
        try:
            merged = SlurmTarget.model_validate({**target.model_dump(), **overrides})
        except Exception as exc:  # pydantic's ValidationError: report in distrun's words
            raise DistrunError(
                f"job resources.properties: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}",  # type: ignore[attr-defined]
                "cpus_per_node is a number; memory_per_node like 64G; gpus_per_node like 4 or a100:4",
            ) from None
    return NodeResources(cpus=merged.cpus_per_node, memory=merged.memory_per_node, gpus=merged.gpus_per_node)


def grace_period(job: JobSpec) -> float:
    return job.limits.grace_period if job.limits.grace_period is not None else DEFAULT_GRACE_PERIOD


def slurm_time_limit(job: JobSpec, target: SlurmTarget) -> str | None:
    """sbatch --time: limits.timeout plus the grace period and a margin, in whole minutes.

    The node agent stops the job at exactly limits.timeout; Slurm's limit only catches an
    agent that could not (Slurm counts minutes and checks about every 30 s).
    """
    if job.limits.timeout is None:
        return target.time_limit
    seconds = job.limits.timeout + grace_period(job) + SLURM_TIME_MARGIN_S
    return str(max(1, math.ceil(seconds / 60)))


def pinned_master_port(job: JobSpec) -> int | None:
    value = job.environment_variables.get("MASTER_PORT")
    return int(value) if value and value.isdigit() else None


# ---------------------------------------------------------------- the batch script


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
    port = pinned_master_port(job)
    if port is not None:
        lines += ["# MASTER_PORT is pinned by the job's environment_variables", f"export DISTRUN_MASTER_PORT={port}"]
    else:
        lines += [
            "# MASTER_PORT: a port free on the first node, where this script runs",
            f"DISTRUN_MASTER_PORT=$({py} -m distrun.agent.node --free-port) || exit 1",
            "export DISTRUN_MASTER_PORT",
        ]
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if res.cpus:  # since Slurm 22.05 srun no longer inherits --cpus-per-task from sbatch
        srun.append(f"--cpus-per-task={res.cpus}")
    if res.gpus:
        srun.append(f"--gpus-per-node={res.gpus}")
    agent = [python, "-m", "distrun.agent.node", "--job-dir", job_dir]
    lines += [
        "# Each node agent runs its node's ranks; one failing node ends the step on all nodes.",
        "exec " + " ".join(srun) + " " + shlex.join(agent),
        "",
    ]
    return "\n".join(lines)


def _quote(value: str) -> str:
    # sbatch reads #SBATCH lines with its own parser, which understands double quotes.
    return f'"{value}"' if re.search(r"\s", value) else value


# ---------------------------------------------------------------- what the node agents read


def launch_document(
    job: JobSpec, bindings: Bindings, *, job_name: str, job_dir: str, slurm_conf: str | None = None
) -> dict[str, Any]:
    """Everything a node agent needs to plan its node, written to `slurm/launch.json`."""
    return {
        "format": LAUNCH_FORMAT,
        "job_name": job_name,
        "job_dir": job_dir,
        "job": job.model_dump(mode="json", by_alias=True),
        "bindings": {
            "inputs": dict(bindings.inputs),
            "outputs": dict(bindings.outputs),
            "input_paths": dict(bindings.input_paths),
        },
        "timeout": job.limits.timeout,
        "grace_period": grace_period(job),
        "node_count": job.node_count,
        "slurm_conf": slurm_conf,
    }


# ---------------------------------------------------------------- talking to Slurm


class SlurmUnavailableError(DistrunError):
    """Slurm's tools are missing here, or its controller does not answer."""


class SlurmSubmitError(DistrunError):
    """sbatch refused the job (a partition that does not exist, an account, a limit)."""


@dataclass(frozen=True)
class SlurmJobInfo:
    """One job as `scontrol show job` tells it; `state` None when Slurm no longer knows the job."""

    job_id: str
    state: str | None
    reason: str = ""
    exit_code: str = ""
    node_list: str = ""
    fields: Mapping[str, str] | None = None


class SlurmClient:
    """The Slurm commands distrun uses (sbatch, scontrol, squeue, sinfo, scancel), with their errors explained."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)

    def _tool(self, name: str) -> str:
        found = shutil.which(name, path=self.env.get("PATH"))
        if found is None:
            raise SlurmUnavailableError(
                f"Slurm is not installed here: no {name} on PATH",
                "run distrun on a Slurm login node, or add Slurm's bin folder to PATH",
            )
        return found

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        tool = self._tool(argv[0])
        try:
            return subprocess.run(
                [tool, *argv[1:]],
                env=self.env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnavailableError(
                f"the Slurm controller did not answer `{' '.join(argv)}` within {COMMAND_TIMEOUT_S:.0f} s",
                "check `scontrol ping` and that slurmctld is running",
            ) from None

    def check_controller(self) -> None:
        """Raise `SlurmUnavailableError` unless sbatch is here and slurmctld answers."""
        self._tool("sbatch")
        out = self._run(["scontrol", "ping"])
        text = (out.stdout + out.stderr).strip()
        if out.returncode != 0 or " is UP" not in text:
            conf = self.env.get("SLURM_CONF", "Slurm's default slurm.conf")
            raise SlurmUnavailableError(
                f"the Slurm controller is down or unreachable (scontrol ping: {_one_line(text) or 'no answer'})",
                f"start slurmctld or check the cluster named by {conf}; nothing was submitted",
            )

    def partitions(self) -> list[str]:
        out = self._run(["sinfo", "--noheader", "--format=%R"])
        return sorted({line.strip() for line in out.stdout.splitlines() if line.strip()})

    def submit(self, script: Path) -> str:
        """`sbatch --parsable SCRIPT` -> Slurm's job id."""
        out = self._run(["sbatch", "--parsable", str(script)])
        if out.returncode != 0:
            raise self._submit_error(out.stderr.strip() or out.stdout.strip())
        job_id = out.stdout.strip().splitlines()[-1].split(";", 1)[0] if out.stdout.strip() else ""
        if not job_id.isdigit():
            raise SlurmSubmitError(f"sbatch printed no job id: {_one_line(out.stdout + out.stderr)!r}")
        return job_id

    def _submit_error(self, text: str) -> DistrunError:
        message = _one_line(re.sub(r"^sbatch: error: ", "", text, flags=re.M))
        if "invalid partition" in text.lower():
            try:
                known = ", ".join(self.partitions()) or "none"
            except DistrunError:
                known = "unknown"
            return SlurmSubmitError(
                f"Slurm refused the job: {message}",
                f"partitions of this cluster: {known}; set the target's partition (`--set partition=NAME`)",
            )
        if "unable to contact slurm controller" in text.lower() or "connection refused" in text.lower():
            return SlurmUnavailableError(
                f"the Slurm controller is down or unreachable: {message}", "nothing was submitted"
            )
        return SlurmSubmitError(f"Slurm refused the job: {message}", "see `sbatch` in the plan: distrun plan JOB")

    def show_job(self, job_id: str) -> SlurmJobInfo:
        out = self._run(["scontrol", "show", "job", "--oneliner", job_id])
        if out.returncode != 0:
            text = out.stderr + out.stdout
            if "invalid job id" in text.lower():
                return SlurmJobInfo(job_id, None)
            raise SlurmUnavailableError(
                f"could not read Slurm job {job_id}: {_one_line(text)}", "check `scontrol ping`"
            )
        fields = parse_scontrol_line(out.stdout.strip().splitlines()[0] if out.stdout.strip() else "")
        return SlurmJobInfo(
            job_id,
            fields.get("JobState"),
            reason=fields.get("Reason", ""),
            exit_code=fields.get("ExitCode", ""),
            node_list=fields.get("NodeList", ""),
            fields=fields,
        )

    def cancel(self, job_id: str) -> None:
        out = self._run(["scancel", job_id])
        if out.returncode != 0 and "already completing or completed" not in (out.stderr + out.stdout).lower():
            raise SlurmUnavailableError(f"scancel {job_id} failed: {_one_line(out.stderr + out.stdout)}")

    def hostnames(self, node_list: str) -> list[str]:
        out = self._run(["scontrol", "show", "hostnames", node_list])
        if out.returncode != 0:
            raise SlurmUnavailableError(f"scontrol show hostnames {node_list}: {_one_line(out.stderr)}")
        return out.stdout.split()

    def node_addresses(self, names: Sequence[str]) -> dict[str, str]:
        """NodeName -> NodeAddr (where the node is reached; the name itself when Slurm says so)."""
        out = self._run(["scontrol", "show", "node", "--oneliner", ",".join(names)])
        addresses = {}
        for line in out.stdout.splitlines():
            fields = parse_scontrol_line(line)
            if "NodeName" in fields:
                addresses[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
        return addresses


def parse_scontrol_line(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value two ...` (scontrol --oneliner) -> dict; values may hold spaces."""
    fields: dict[str, str] = {}
    key = None
    for token in line.split(" "):
        name, sep, value = token.partition("=")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9_/:]*", name):
            key = name
            fields[key] = value
        elif key is not None and token:
            fields[key] += " " + token
    return fields


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- state


# Slurm's job states (squeue/scontrol) -> distrun's (Azure ML's names).
SLURM_STATES = {
    "PENDING": "Queued",
    "REQUEUED": "Queued",
    "REQUEUE_HOLD": "Queued",
    "REQUEUE_FED": "Queued",
    "RESV_DEL_HOLD": "Queued",
    "CONFIGURING": "Starting",
    "RUNNING": "Running",
    "RESIZING": "Running",
    "SIGNALING": "Running",
    "STAGE_OUT": "Finalizing",
    "COMPLETING": "Finalizing",
    "SUSPENDED": "Paused",
    "STOPPED": "Paused",
    "COMPLETED": "Completed",
    "CANCELLED": "Canceled",
    "FAILED": "Failed",
    "TIMEOUT": "Failed",
    "NODE_FAIL": "Failed",
    "OUT_OF_MEMORY": "Failed",
    "BOOT_FAIL": "Failed",
    "DEADLINE": "Failed",
    "PREEMPTED": "Failed",
    "SPECIAL_EXIT": "Failed",
    "REVOKED": "Canceled",
}
TERMINAL = frozenset({"Completed", "Failed", "Canceled"})
SLURM_FAILURE_REASONS = {
    "TIMEOUT": "Slurm's time limit was reached",
    "NODE_FAIL": "a node of the allocation failed",
    "OUT_OF_MEMORY": "a node ran out of memory (Slurm's memory limit)",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its Slurm deadline",
    "PREEMPTED": "Slurm preempted the job",
}


def slurm_word(slurm_state: str | None) -> str | None:
    """The state word: scontrol and squeue may add flags ("CANCELLED by 0", "RUNNING+")."""
    if not slurm_state:
        return None
    return re.split(r"[^A-Z_]", slurm_state.upper(), maxsplit=1)[0]


def distrun_status(slurm_state: str | None) -> str:
    word = slurm_word(slurm_state)
    return "Unknown" if word is None else SLURM_STATES.get(word, "Unknown")


@dataclass(frozen=True)
class JobState:
    status: str
    reason: str = ""
    root_cause: dict[str, Any] | None = None
    slurm_state: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def first_failure(outcomes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The failed node outcome whose failure happened first, by wall clock across nodes.

    A rank failing on one node makes its peers on other nodes fail too (closed connections)
    a moment later, or be stopped by Slurm: the earliest failure is the cause. Outcomes with
    a root cause (a rank that failed) come before those without (a node that could not start).
    """
    failed = [o for o in outcomes if o.get("status") == "Failed"]
    if not failed:
        return None
    return min(
        failed,
        key=lambda o: (not o.get("root_cause"), o.get("failed_at") or float("inf"), int(o.get("node_rank", 0))),
    )


def job_state(
    slurm: SlurmJobInfo, outcomes: Sequence[Mapping[str, Any]], node_count: int, cancel_requested: bool = False
) -> JobState:
    """distrun's status of a Slurm job, from Slurm's state and the outcomes the nodes wrote. Pure.

    While Slurm runs the job and some node has not reported, Slurm's state is the status (a
    failure is final only once every node reported: the first failure may report last).
    """
    word = slurm_word(slurm.state)
    slurm_status = distrun_status(slurm.state)
    reported = {int(o["node_rank"]) for o in outcomes if "node_rank" in o}
    missing = sorted(set(range(node_count)) - reported)
    live = slurm_status not in TERMINAL and slurm_status != "Unknown"
    if live and missing:
        if cancel_requested:
            return JobState("CancelRequested", "Slurm is stopping the job", None, slurm.state)
        return JobState(slurm_status, slurm.reason if slurm_status == "Queued" else "", None, slurm.state)
    if cancel_requested:
        return JobState("Canceled", "canceled by the user (distrun job cancel)", None, slurm.state)
    cause = first_failure(outcomes)
    if cause is not None:
        root = dict(cause["root_cause"]) if cause.get("root_cause") else None
        return JobState("Failed", str(cause.get("reason") or "a process failed"), root, slurm.state)
    if word == "CANCELLED":
        return JobState("Canceled", "canceled in Slurm (scancel or an administrator)", None, slurm.state)
    if word in SLURM_FAILURE_REASONS:
        return JobState("Failed", SLURM_FAILURE_REASONS[word], None, slurm.state)
    if not missing and all(o.get("status") == "Completed" for o in outcomes):
        # The agents are done; while Slurm ends the batch step the job is finalizing.
        return JobState("Finalizing" if live else "Completed", "", None, slurm.state)
    stopped = [o for o in outcomes if o.get("status") == "Canceled"]
    if stopped and not missing:
        return JobState("Canceled", str(stopped[0].get("reason") or "stopped by a signal"), None, slurm.state)
    if not missing:
        return JobState("Failed", "the nodes reported no failure but did not all complete", None, slurm.state)
    ended = f"ended {word} (exit code {slurm.exit_code})" if word else "is no longer known to Slurm"
    return JobState(
        "Failed",
        f"Slurm job {slurm.job_id} {ended} and node(s) {', '.join(map(str, missing))} wrote no outcome: "
        "see slurm/output.txt in the job folder, and check that DISTRUN_HOME is on a filesystem every node sees",
        None,
        slurm.state,
    )


def read_outcomes(paths: SlurmPaths, node_count: int) -> list[dict[str, Any]]:
    outcomes = []
    for node_rank in range(node_count):
        with contextlib.suppress(OSError, ValueError):
            outcomes.append(json.loads(paths.node_outcome(node_rank).read_text()))
    return outcomes


# ---------------------------------------------------------------- the backend


def default_python() -> str:
    import sys

    return sys.executable


@dataclass(frozen=True)
class SlurmSubmission:
    job_id: str
    script: Path


class SlurmBackend:
    """Submit, observe and cancel distrun jobs on one Slurm compute target."""

    def __init__(self, target: SlurmTarget, env: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.client = SlurmClient(target.client_env(env))

    @property
    def python(self) -> str:
        return self.target.python or default_python()

    def render(self, job: JobSpec, *, job_name: str, job_dir: str) -> str:
        return render_batch_script(job, self.target, job_name=job_name, job_dir=job_dir, python=self.python)

    def preflight(self) -> None:
        """Raise before anything is recorded when Slurm cannot take a job (tools missing, controller down)."""
        self.client.check_controller()

    def submit(self, job: JobSpec, bindings: Bindings, *, job_name: str, job_dir: Path) -> SlurmSubmission:
        """Write batch.sh and launch.json into the job folder and submit; raise and leave no Slurm job on error."""
        self.preflight()
        paths = SlurmPaths(job_dir)
        paths.folder.mkdir(parents=True, exist_ok=True)
        paths.user_logs.mkdir(parents=True, exist_ok=True)
        document = launch_document(
            job, bindings, job_name=job_name, job_dir=str(job_dir), slurm_conf=self.client.env.get("SLURM_CONF")
        )
        paths.launch.write_text(json.dumps(document, indent=2) + "\n")
        paths.script.write_text(self.render(job, job_name=job_name, job_dir=str(job_dir)))
        job_id = self.client.submit(paths.script)
        paths.job_id.write_text(job_id + "\n")
        return SlurmSubmission(job_id, paths.script)

    def state(self, job_dir: Path, node_count: int) -> JobState:
        paths = SlurmPaths(job_dir)
        job_id = paths.job_id.read_text().strip()
        info = self.client.show_job(job_id)
        return job_state(info, read_outcomes(paths, node_count), node_count, paths.cancel.exists())

    def cancel(self, job_dir: Path) -> None:
        paths = SlurmPaths(job_dir)
        paths.cancel.write_text("")
        self.client.cancel(paths.job_id.read_text().strip())
