"""The models of a pipeline job and of a command component (Azure ML's pipelineJob and
commandComponent schemas), as distrun loads them.

A pipeline's steps are not validated here: each step becomes a command job document
(`distrun.spec.pipeline_steps`), which the command job's own model and checks validate, so a
step is held to exactly the standards of a command job. What this module checks is what only
a pipeline or a component has: the pipeline's `settings`, `jobs` as a mapping of steps, and a
component's `inputs`/`outputs` declarations.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from distrun.spec import models

DATA_TYPES = ("uri_file", "uri_folder", "mltable", "custom_model", "mlflow_model", "triton_model")
LITERAL_TYPES = ("string", "integer", "number", "boolean")
IO_TYPES = (*DATA_TYPES, *LITERAL_TYPES)


# Output names Azure ML reserves: every job has them, declared or not. Each is the job's artifact
# root, the folder holding what its processes wrote to ./outputs and ./logs (Azure ML's
# `azureml://datastores/workspaceartifactstore/paths/ExperimentRun/dcid.JOB/`), so that a step
# reading `${{parent.jobs.hello.outputs.artifacts}}` finds `outputs/world.txt` in it.
RESERVED_OUTPUTS = ("artifacts", "default")


def job_output_type(declared: str) -> str:
    """The type a step's job writes an output as: a value output is the file holding its text."""
    return "uri_file" if declared in LITERAL_TYPES else declared


# What a step may be (`type:`), and what distrun runs of them.
STEP_TYPES_RUN = ("command", "pipeline", "sweep", "spark")
STEP_TYPES_LATER = {
    "data_transfer": "data transfer steps are not supported by distrun",
    "import": "import steps are not supported by distrun",
}

Scalar = str | bool | int | float
# A component's input or output type: data (DATA_TYPES) or a value (LITERAL_TYPES).
IoType = Literal[
    "uri_file",
    "uri_folder",
    "mltable",
    "custom_model",
    "mlflow_model",
    "triton_model",
    "string",
    "integer",
    "number",
    "boolean",
]


class _NamedInputsOutputs(models.StrictModel):
    """A document with named `inputs` and `outputs`: names checked as a command job's are."""

    @field_validator("inputs", "outputs", check_fields=False)
    @classmethod
    def _names(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        return models.checked_io_names(value, info.field_name)


class InputDeclaration(models.StrictModel):
    """A component's input: its type, and a default or `optional` when a step need not give it."""

    type: IoType
    default: Scalar | None = None
    optional: bool = False
    description: str | None = None
    min: float | None = None
    max: float | None = None
    enum: list[Scalar] | None = None
    mode: Literal["ro_mount", "rw_mount", "download", "direct", "eval_mount", "eval_download"] | None = None

    @property
    def is_data(self) -> bool:
        return self.type in DATA_TYPES


class OutputDeclaration(models.StrictModel):
    """A component's output: data it writes, or a value (`string`, `integer`, `number`, `boolean`:
    Azure ML's primitive outputs) it writes to a file that the steps reading it get the text of."""

    type: IoType = "uri_folder"
    mode: Literal["rw_mount", "upload", "direct"] | None = None
    description: str | None = None
    is_control: bool | None = None  # Azure ML's flag for a value that steers later steps; kept, not used


class _Component(_NamedInputsOutputs):
    """What every component has: who it is, and its declared inputs and outputs."""

    schema_: str | None = Field(None, alias="$schema")
    name: str | None = None
    version: str | int | float | None = None
    display_name: str | None = None
    description: str | None = None
    tags: dict[str, Any] = Field(default_factory=dict)
    is_deterministic: bool = True
    inputs: dict[str, InputDeclaration] = Field(default_factory=dict)
    outputs: dict[str, OutputDeclaration] = Field(default_factory=dict)


class CommandComponent(_Component):
    """A command component: a command job's template with declared inputs and outputs."""

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    code: str | None = None
    environment: str | models.EnvironmentSpec | None = None
    environment_variables: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] | None = None  # validated as the step's job's resources
    distribution: dict[str, Any] | None = None  # validated as the step's job's distribution


class PipelineComponent(_Component):
    """A pipeline component: steps (`jobs`) with declared inputs and outputs, which a step of
    another pipeline names (`type: pipeline`, `component: ./stage.yml`). Its steps are checked
    when a pipeline names it, with the inputs that step gives."""

    type: Literal["pipeline"] = "pipeline"
    jobs: dict[str, dict[str, Any]]


class PipelineSettings(models.StrictModel):
    """`settings:`. Azure ML keeps keys it does not know here (and Microsoft's examples write
    `default_datestore`), so distrun keeps them too and names them in a note instead of failing."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    default_compute: str | None = None
    default_datastore: str | None = None
    default_environment: str | None = None
    continue_on_step_failure: bool = False
    force_rerun: bool = False

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(self.model_extra or {})


KNOWN_SETTINGS = (
    "default_compute",
    "default_datastore",
    "default_environment",
    "continue_on_step_failure",
    "force_rerun",
)


class PipelineJob(models.JobHeader, _NamedInputsOutputs):
    """A pipeline job: its steps (`jobs`), its own inputs and outputs, and its settings."""

    type: Literal["pipeline"] = "pipeline"
    compute: str | None = None
    inputs: dict[str, models.InputValue] = Field(default_factory=dict)
    outputs: dict[str, models.OutputSpec | None] = Field(default_factory=dict)
    settings: PipelineSettings = Field(default_factory=PipelineSettings)
    jobs: dict[str, dict[str, Any]]  # at least one step: the loader says so with a hint
    identity: dict[str, Any] | None = None

    @field_validator("jobs")
    @classmethod
    def _step_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            # A step's name becomes part of its job's name (a folder), and a binding's key.
            if not re.fullmatch(models.NAME_PATTERN, key) or len(key) > 100:
                raise PydanticCustomError(
                    "io_name",
                    "step name '{name}' is not allowed: names hold letters, digits and '_', "
                    "and do not start with a digit, at most 100 characters",
                    {"kind": "step", "name": key},
                )
        return value
