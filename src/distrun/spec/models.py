"""The job model: one normalized description of a distributed command job.

It follows Azure ML's CLI v2 command-job schema (see docs/azureml-compat in the README):
every top-level key loads; nested objects reject unknown keys. Older spellings (the 2021
preview form, the seed draft's `distributed:` section) are rewritten into this shape by
`distrun.spec.normalize` before validation, so everything after the loader sees one model.

distrun extensions are marked as such in their field descriptions.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, field_validator
from pydantic_core import PydanticCustomError

from distrun.core.image_reference import IMAGE_HINT, image_reference_problem

# Seconds between SIGTERM and SIGKILL when the job does not set limits.grace_period.
from distrun.spec.defaults import DEFAULT_GRACE_PERIOD

NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
JOB_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$"
MAX_IO_NAME = 255

# Error types raised by the validators below, and how to fix each (the loader's hint).
CUSTOM_ERRORS = {
    "job_name": "use letters, digits, '_', '.' and '-', starting with a letter or digit, e.g. name: mnist_ddp-2",
    "io_name": "use letters, digits and '_', not starting with a digit, e.g. train_data",
    "shm_size": "write a number with an optional unit b, k, m or g, e.g. shm_size: 2g",
    "image_reference": IMAGE_HINT,
}

# Variables that distrun computes for every process. Setting one by hand would silently
# mis-wire the gang, so it is an error; MASTER_PORT is the exception: it pins the port.
RESERVED_ENV_VARS = frozenset(
    {
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE",
        "MASTER_ADDR",
        "AZUREML_CR_NODE_RANK",
        "AZUREML_PROCESS_NAME",
        "AZUREML_NODE_COUNT",
        "AZUREML_RUN_ID",
        "AZ_BATCH_HOST_LIST",
        "AZ_BATCH_MASTER_NODE",
        "AZ_BATCHAI_MPI_MASTER_NODE",
        "AZUREML_MPI_HOSTFILE",
        "TF_CONFIG",
        "DISTRUN_JOB_NAME",
    }
)
RESERVED_ENV_PREFIXES = ("OMPI_COMM_WORLD_", "DISTRUN_")


def _not_a_boolean(value: Any) -> Any:
    # pydantic reads `true` as 1; in a count or a port that is a slip, not a number.
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Whole = Annotated[int, BeforeValidator(_not_a_boolean)]
ExitCode = Annotated[Whole, Field(ge=0, le=255)]


def _version_text(value: Any) -> Any:
    # Azure ML reads `version: 1` as the version "1" (its examples write it so).
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


VersionText = Annotated[str, BeforeValidator(_version_text)]


class StrictModel(BaseModel):
    """Nested objects of a job reject keys they do not know (Azure ML does the same)."""

    # defer_build: a model's validator is built when it is first used, not when this module is
    # imported; a job's validation then builds the models it reaches in one pass (import plus
    # first validation measured 0.15-0.23 s before, 10-35 ms less with it on 2 cores).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, defer_build=True)


# ---------------------------------------------------------------- environment


class BuildContext(StrictModel):
    path: str | None = None
    dockerfile_path: str | None = None


class EnvironmentSpec(StrictModel):
    """An inline environment: a `conda_file` is built into a cached virtual environment the ranks run in;
    an image alone is kept for image-based backends."""

    name: str | None = None
    version: VersionText | None = None
    image: str | None = None
    conda_file: str | dict[str, Any] | None = None
    build: BuildContext | None = None
    os_type: str | None = None
    description: str | None = None
    tags: dict[str, str] | None = None
    inference_config: dict[str, Any] | None = None

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        # The image reaches podman's, docker's and a pod's command line: never as an option.
        problem = image_reference_problem(value) if value is not None else None
        if problem:
            raise PydanticCustomError("image_reference", "{problem}", {"problem": problem})
        return value


# ---------------------------------------------------------------- distribution


class PyTorchDistribution(StrictModel):
    type: Literal["pytorch"] = "pytorch"
    process_count_per_instance: Whole = Field(1, ge=1, description="processes per node")


class ParameterServerSettings(StrictModel):
    environment_variables: dict[str, str] = Field(default_factory=dict)
    environment: Any = None  # recorded for backends that start ps tasks in their own image
    resource_limits: dict[str, Any] | None = None

    @field_validator("environment_variables", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _stringify_env(value)


class TensorFlowDistribution(StrictModel):
    type: Literal["tensorflow"] = "tensorflow"
    worker_count: Whole | None = Field(None, ge=1, description="default: resources.instance_count")
    parameter_server_count: Whole = Field(0, ge=0)
    chief_count: Whole = Field(
        0,
        ge=0,
        le=1,
        description="distrun extension: 1 adds a `chief` task (TF2 ParameterServerStrategy's coordinator)",
    )
    parameter_server: ParameterServerSettings | None = Field(
        None, description="distrun extension (from the seed draft): settings for ps tasks only"
    )


class MpiDistribution(StrictModel):
    type: Literal["mpi"] = "mpi"
    process_count_per_instance: Whole = Field(1, ge=1)
    mpirun_args: list[str] = Field(
        default_factory=list, description="distrun extension: extra flags placed after `mpirun`"
    )
    launcher_resources: dict[str, Any] | None = Field(
        None, description="from the seed draft's distributed.mpi.launcher.resources; kept for backends"
    )


class RayDistribution(StrictModel):
    type: Literal["ray"] = "ray"
    port: Whole | None = Field(None, ge=1, le=65535)
    address: str | None = None
    include_dashboard: bool | None = None
    dashboard_port: Whole | None = Field(None, ge=1, le=65535)
    head_node_additional_args: str | None = None
    worker_node_additional_args: str | None = None


Distribution = Annotated[
    PyTorchDistribution | TensorFlowDistribution | MpiDistribution | RayDistribution,
    Field(discriminator="type"),
]
DISTRIBUTION_TYPES = ("pytorch", "tensorflow", "mpi", "ray")
DISTRIBUTION_MODELS: dict[str, type[StrictModel]] = {
    "pytorch": PyTorchDistribution,
    "tensorflow": TensorFlowDistribution,
    "mpi": MpiDistribution,
    "ray": RayDistribution,
}

# ---------------------------------------------------------------- inputs / outputs

DATA_TYPES = ("uri_file", "uri_folder", "mltable", "custom_model", "mlflow_model", "triton_model")


class DataInput(StrictModel):
    type: Literal["uri_file", "uri_folder", "mltable", "custom_model", "mlflow_model", "triton_model"] = "uri_folder"
    path: str
    mode: Literal["ro_mount", "rw_mount", "download", "direct", "eval_mount", "eval_download"] = "ro_mount"
    description: str | None = None
    optional: bool | None = None
    datastore: str | None = None


class LiteralInput(StrictModel):
    """`{value: ...}` form of a literal input (also `type: string|integer|number|boolean`)."""

    type: Literal["string", "integer", "number", "boolean"] | None = None
    value: str | bool | int | float | None = None
    default: str | bool | int | float | None = None
    description: str | None = None
    optional: bool | None = None


LITERAL_INPUT_TYPES = ("string", "integer", "number", "boolean")


def _input_kind(value: Any) -> str | None:
    """Which form an input takes; None (an error) for lists and other shapes."""
    if isinstance(value, (bool, int, float, str)):
        return "literal"
    if isinstance(value, DataInput):
        return "data"
    if isinstance(value, LiteralInput):
        return "literal_object"
    if isinstance(value, dict):
        if "value" in value or "default" in value or value.get("type") in LITERAL_INPUT_TYPES:
            return "literal_object"
        return "data"
    return None


InputValue = Annotated[
    Annotated[bool | int | float | str, Tag("literal")]
    | Annotated[DataInput, Tag("data")]
    | Annotated[LiteralInput, Tag("literal_object")],
    Discriminator(
        _input_kind,
        custom_error_type="input_shape",
        custom_error_message="an input is a literal (string, number, boolean) or an object "
        "{type: uri_file|uri_folder, path: ..., mode: ...}",
    ),
]


class OutputSpec(StrictModel):
    type: Literal["uri_file", "uri_folder", "mltable", "custom_model", "mlflow_model", "triton_model"] = "uri_folder"
    mode: Literal["rw_mount", "upload", "direct"] = "rw_mount"
    path: str | None = None
    description: str | None = None
    name: str | None = None
    version: VersionText | None = None


# ---------------------------------------------------------------- resources, limits, env


class ResourceConfiguration(StrictModel):
    instance_count: Whole = Field(1, ge=1)
    instance_type: str | None = None
    shm_size: str | None = None
    docker_args: str | None = None
    properties: dict[str, Any] | None = None
    locations: list[str] | None = None
    max_instance_count: Whole | None = Field(None, ge=1)

    @field_validator("shm_size")
    @classmethod
    def _shm_size(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9]+[bkmgBKMG]?", value):
            raise PydanticCustomError("shm_size", "shm_size '{value}' is not a size", {"value": value})
        return value


class JobLimits(StrictModel):
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False, description="seconds; the job fails when reached")
    hang_timeout: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "distrun extension: seconds; with no output from any process and no metric logged for this long, "
            "distrun writes every process's stack to hang/ and fails the job (hung)"
        ),
    )
    grace_period: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="distrun extension: seconds between SIGTERM and SIGKILL (default 10)",
    )
    max_restarts: Whole | None = Field(
        None, ge=0, description="distrun extension: restart the whole job this many times after a failure (default 0)"
    )
    max_preemptions: Whole | None = Field(
        None,
        ge=0,
        description="distrun extension: restarts after a preemption (default: unlimited when max_restarts is set)",
    )
    # An exit status is 0-255 (a process killed by a signal has none: distrun records the signal).
    no_restart_exit_codes: list[ExitCode] | None = Field(
        None, description="distrun extension: a rank exiting with one of these codes (0-255) is not restarted"
    )

    @property
    def grace_seconds(self) -> float:
        """The grace period in force: the job's own (0 means 0), else the default."""
        return DEFAULT_GRACE_PERIOD if self.grace_period is None else self.grace_period


def _stringify_env(value: Any) -> Any:
    """YAML gives numbers and booleans; environment variables are strings."""
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, (int, float)):
            out[key] = str(item)
        elif item is None:
            out[key] = ""
        else:
            out[key] = item
    return out


def checked_io_names(value: dict[str, Any], field_name: str) -> dict[str, Any]:
    """The names of `inputs` or `outputs` (`field_name`), each checked: a name becomes a folder
    (named-outputs/<name>, inputs/<name>), no longer than the filesystem allows a name to be, or
    the job would only fail when it is prepared."""
    kind = "input" if field_name == "inputs" else "output"
    for key in value:
        if not re.fullmatch(NAME_PATTERN, key) or len(key) > MAX_IO_NAME:
            raise PydanticCustomError(
                "io_name",
                "{kind} name '{name}' is not allowed: names hold letters, digits and '_', "
                "and do not start with a digit, at most 255 characters",
                {"kind": kind, "name": key},
            )
    return value


# ---------------------------------------------------------------- the job


class JobHeader(StrictModel):
    """The header every kind of job file starts with (Azure ML's job schemas share it). A kind
    says its own `type`; a field it redeclares keeps its place here, so a job's keys are dumped
    in this order whatever its kind."""

    schema_: str | None = Field(None, alias="$schema")
    type: str
    name: str | None = Field(None, pattern=JOB_NAME_PATTERN)
    display_name: str | None = None
    experiment_name: str | None = None
    description: str | None = None
    tags: dict[str, Any] = Field(default_factory=dict)
    properties: dict[str, Any] = Field(default_factory=dict)


class JobSpec(JobHeader):
    """An Azure ML CLI v2 command job, as distrun runs it."""

    type: Literal["command"] = "command"
    # The name is checked by `_job_name`, which says why; its tags are strings (`_stringify_tags`).
    name: str | None = Field(None, description="names the job's folder, so it is checked like a file name")
    tags: dict[str, str] = Field(default_factory=dict)
    command: str = Field(min_length=1)
    code: str | None = None
    environment: str | EnvironmentSpec | None = None
    environment_variables: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, InputValue] = Field(default_factory=dict)
    outputs: dict[str, OutputSpec | None] = Field(default_factory=dict)
    compute: str | None = None
    resources: ResourceConfiguration = Field(default_factory=ResourceConfiguration)
    limits: JobLimits = Field(default_factory=JobLimits)
    distribution: Distribution | None = None
    services: dict[str, Any] | None = None
    identity: dict[str, Any] | None = None
    queue_settings: dict[str, Any] | None = None

    @field_validator("environment_variables", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return _stringify_env(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _stringify_tags(cls, value: Any) -> Any:
        return _stringify_env(value)

    @field_validator("distribution", mode="before")
    @classmethod
    def _lowercase_type(cls, value: Any) -> Any:
        # Azure ML compares distribution types case-insensitively (PyTorch, MPI, ...).
        if isinstance(value, dict) and isinstance(value.get("type"), str):
            value = {**value, "type": value["type"].lower()}
        return value

    @field_validator("name")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        # The name becomes a folder under the job store: no '/', no '..', no leading dot.
        if value is not None and not re.fullmatch(JOB_NAME_PATTERN, value):
            raise PydanticCustomError(
                "job_name",
                "job name '{name}' is not allowed: it names a folder, so it may hold only letters, digits, "
                "'_', '.' and '-', must start with a letter or digit, and be at most 255 characters",
                {"name": value},
            )
        return value

    @field_validator("inputs", "outputs")
    @classmethod
    def _names(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        return checked_io_names(value, info.field_name)

    # ------------------------------------------------------------ derived facts

    @property
    def node_count(self) -> int:
        return self.resources.instance_count

    @property
    def distribution_type(self) -> str | None:
        return self.distribution.type if self.distribution else None
