"""A Slurm compute target's settings, and what a job asks of each node (CPUs, memory, GPUs, time).

Settings live in `$DISTRUN_HOME/config.yaml` (or come from `distrun compute create --type
slurm --set K=V`); every mistake is reported in distrun's words with the known keys.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distrun.core.errors import DistrunError
from distrun.spec.models import JobSpec

# Slurm checks time limits about every 30 s and counts in whole minutes: its limit is a
# backstop behind the node agent's own timeout, late enough for the agent to stop the ranks.
SLURM_TIME_MARGIN_S = 30.0


class SlurmSettings(BaseModel):
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
    tracking_uri: str | None = Field(None, description="MLflow tracking URI for jobs' metrics (default: DISTRUN_HOME)")

    @field_validator("partition", "account", "qos")
    @classmethod
    def _slurm_name(cls, value: str | None) -> str | None:
        # Written into `#SBATCH --partition=VALUE`: a space, a newline or a leading '-' would make
        # it another option, or another line of the batch script.
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_.@+][A-Za-z0-9_.,:@+-]*", value):
            raise ValueError(
                f"{value!r} is not a Slurm name: use letters, digits and _ . , : @ + -, not starting with -"
            )
        return value

    @field_validator("time_limit")
    @classmethod
    def _time_limit(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9][0-9:-]*|(?i:unlimited|infinite)", value):
            raise ValueError(f"{value!r} is not a Slurm time: write MM, HH:MM:SS or D-HH:MM")
        return value

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
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> SlurmSettings:
        """Validate a target's settings; every mistake becomes one `DistrunError` that says how to fix it."""
        from distrun.backends.settings import validated_settings

        return validated_settings(cls, "slurm", name, settings)

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


def node_resources(job: JobSpec, target: SlurmSettings) -> NodeResources:
    """Per-node CPUs, memory and GPUs: the job's `resources.properties` first, then the target's."""
    props = job.resources.properties or {}
    merged = target.model_copy()
    overrides = {key: props[key] for key in JOB_RESOURCE_KEYS if props.get(key) is not None}
    if overrides:
        try:
            merged = SlurmSettings.model_validate({**target.model_dump(), **overrides})
        except Exception as exc:  # pydantic's ValidationError: report in distrun's words
            raise DistrunError(
                f"job resources.properties: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}",  # type: ignore[attr-defined]
                "cpus_per_node is a number; memory_per_node like 64G; gpus_per_node like 4 or a100:4",
            ) from None
    return NodeResources(cpus=merged.cpus_per_node, memory=merged.memory_per_node, gpus=merged.gpus_per_node)


SLURM_MAX_MINUTES = 100 * 365 * 24 * 60


def slurm_time_limit(job: JobSpec, target: SlurmSettings) -> str | None:
    """sbatch --time: limits.timeout plus the grace period and a margin, in whole minutes.

    The node agent stops the job at exactly limits.timeout; Slurm's limit only catches an
    agent that could not (Slurm counts minutes and checks about every 30 s).
    """
    if job.limits.timeout is None:
        return target.time_limit
    seconds = job.limits.timeout + job.limits.grace_seconds + SLURM_TIME_MARGIN_S
    # Slurm keeps minutes in 32 bits: a timeout of 1e300 s is asked for as 100 years.
    return str(min(max(1, math.ceil(seconds / 60)), SLURM_MAX_MINUTES))


def pinned_master_port(job: JobSpec) -> int | None:
    value = job.environment_variables.get("MASTER_PORT")
    return int(value) if value and value.isdigit() else None
