"""The model of an Azure ML Spark job (`type: spark`) and of a spark component's program.

It follows MicrosoftDocs/azure-ai-docs `reference-yaml-job-spark.md`: an entry (a Python file,
or a JVM class), the files Spark ships to its driver and executors (`py_files`, `jars`, `files`,
`archives`), `conf` (any `spark.*` setting: the driver's and executors' sizes and dynamic
allocation are checked as Azure ML checks them, in `distrun.spec.spark_conf`), `args` with
`${{inputs.x}}`/`${{outputs.y}}`, data `inputs` and `outputs`, `environment`, `resources`,
`compute` and `identity`. distrun runs it with `spark-submit` (`distrun.spec.spark_submit`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from distrun.spec.models import (
    EnvironmentSpec,
    InputValue,
    JobHeader,
    JobLimits,
    OutputSpec,
    StrictModel,
    checked_io_names,
)
from distrun.spec.pipeline_models import _Component

__all__ = ["SparkComponent", "SparkEntry", "SparkJobSpec", "SparkResources"]


class SparkEntry(StrictModel):
    """What Spark runs: a Python file in `code`, or the main class of a JVM program in `jars`."""

    file: str | None = Field(None, min_length=1)
    class_name: str | None = Field(None, min_length=1)


class SparkResources(StrictModel):
    """Azure ML's serverless Spark size; here the job runs where its compute target says."""

    instance_type: str | None = None
    runtime_version: str | None = None


def _conf_text(value: Any) -> Any:
    # Spark reads every setting as text; YAML gives numbers and booleans (`True`, `2`).
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, (int, float)):
            out[key] = str(item)
        else:
            out[key] = item
    return out


class SparkProgram(StrictModel):
    """What a Spark job and a spark component both say: the program and the files Spark ships."""

    code: str | None = None
    entry: SparkEntry
    py_files: list[str] = Field(default_factory=list)
    jars: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    archives: list[str] = Field(default_factory=list)
    args: str | None = None
    environment: str | EnvironmentSpec | None = None

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        # `args: 10` is the text "10", as Azure ML reads it.
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class SparkJobSpec(JobHeader, SparkProgram):
    """An Azure ML Spark job, as distrun runs it."""

    type: Literal["spark"] = "spark"
    tags: dict[str, str] = Field(default_factory=dict)
    conf: dict[str, str] = Field(default_factory=dict)
    environment_variables: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, InputValue] = Field(default_factory=dict)
    outputs: dict[str, OutputSpec | None] = Field(default_factory=dict)
    compute: str | None = None
    resources: SparkResources | None = None
    limits: JobLimits = Field(default_factory=JobLimits)
    identity: dict[str, Any] | None = None

    @field_validator("conf", mode="before")
    @classmethod
    def _conf(cls, value: Any) -> Any:
        return _conf_text(value)

    @field_validator("tags", "environment_variables", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        return _conf_text(value)

    @field_validator("inputs", "outputs")
    @classmethod
    def _names(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        return checked_io_names(value, info.field_name)


# What a spark step takes from its spark component; the step's own keys come over these.
SPARK_COMPONENT_KEYS = (
    "code", "entry", "py_files", "jars", "files", "archives", "conf", "args", "environment", "environment_variables",
)  # fmt: skip


class SparkComponent(_Component, SparkProgram):
    """A spark component: a Spark job's program with declared inputs and outputs, which a
    `type: spark` step of a pipeline names; the step's job is checked as a Spark job file is."""

    type: Literal["spark"] = "spark"
    conf: dict[str, Any] = Field(default_factory=dict)
    environment_variables: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] | None = None
