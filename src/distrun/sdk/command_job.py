"""The v2 command job: `command(...)`, `CommandJob`, `load_job(path)`.

A `Command` holds what the user gave, as Azure ML's entity does, and turns it into plain job
data only when it is submitted or validated. Relative paths (`code="./src"`) start at the
working directory when the job was built, as in azure-ai-ml; for `load_job` they start at the
YAML file's folder, and errors keep pointing into that file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.distributions import DistributionConfiguration, distribution_data, distribution_from
from distrun.sdk.inputs_outputs import Input, Output, input_from_data, output_from_data
from distrun.sdk.job_header import CreationContext, JobHeader
from distrun.sdk.job_settings import CommandJobLimits, Environment, JobResourceConfiguration, environment_from_data
from distrun.sdk.notices import caller_position, recordable
from distrun.sdk.operations import IGNORED_PROPERTY, JobSource, python_source
from distrun.sdk.plain import AttrDict, path_text, to_data

# Job fields that are copied to the data as they are, when given.
_PLAIN_FIELDS = ("name", "display_name", "experiment_name", "description", "command", "compute")
_OPTIONAL_OBJECTS = ("services", "identity", "queue_settings")


class Command(JobHeader):
    """A command job (`azure.ai.ml.entities.Command` / `CommandJob`)."""

    type = "command"

    def __init__(
        self,
        *,
        command: str | None = None,
        code: Any = None,
        inputs: dict[str, Any] | None = None,
        outputs: dict[str, Any] | None = None,
        environment: str | Environment | dict[str, Any] | None = None,
        environment_variables: dict[str, Any] | None = None,
        compute: str | None = None,
        distribution: DistributionConfiguration | dict[str, Any] | None = None,
        resources: JobResourceConfiguration | dict[str, Any] | None = None,
        limits: CommandJobLimits | dict[str, Any] | None = None,
        name: str | None = None,
        display_name: str | None = None,
        experiment_name: str | None = None,
        description: str | None = None,
        tags: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        services: dict[str, Any] | None = None,
        identity: Any = None,
        queue_settings: Any = None,
        **kwargs: Any,
    ) -> None:
        self._source_where = caller_position()
        self._base_dir = current_folder()
        self._file_source: JobSource | None = None
        self.command = command
        self.code = code
        self.inputs = AttrDict(inputs or {})
        self.outputs = AttrDict(outputs or {})
        self.environment = environment
        self.environment_variables = dict(environment_variables or {})
        self.compute = compute
        self.distribution = distribution
        self.resources = resources
        self.limits = limits
        self._set_header(
            name=name,
            display_name=display_name,
            experiment_name=experiment_name,
            description=description,
            tags=tags,
            properties=properties,
        )
        self.services = services
        self.identity = identity
        self.queue_settings = queue_settings
        self._accept(kwargs)
        self._join_pipeline()

    def _join_pipeline(self) -> None:
        """Made (or called) inside an `@pipeline` function: a step of that pipeline, whose
        outputs (`job.outputs.NAME`) other steps read."""
        from distrun.sdk.pipeline_nodes import NodeOutputs, building

        pipeline = building()
        if pipeline is None:
            return
        self.outputs = NodeOutputs(self, {k: None if v is None else to_data(v) for k, v in self.outputs.items()})
        self._source_where = caller_position()  # a problem of this step points at this line
        pipeline.add(self)

    def _name_hint(self) -> str:
        """A pipeline step's name when no variable holds it: the job's `name`, else "command"."""
        return self.name or "command"

    def _step_keys(self) -> dict[str, Any]:
        from distrun.sdk.pipeline_job import command_step_keys

        return command_step_keys(self)

    # ------------------------------------------------------------ Azure ML's setters

    @property
    def distribution(self) -> Any:
        return self._distribution

    @distribution.setter
    def distribution(self, value: Any) -> None:
        self._distribution = distribution_from(value)

    @property
    def resources(self) -> JobResourceConfiguration:
        return self._resources

    @resources.setter
    def resources(self, value: Any) -> None:
        if value is None:
            value = JobResourceConfiguration()
        elif isinstance(value, dict):
            value = JobResourceConfiguration(**value)
        self._resources = value

    @property
    def limits(self) -> CommandJobLimits:
        return self._limits

    @limits.setter
    def limits(self, value: Any) -> None:
        if value is None:
            value = CommandJobLimits()
        elif isinstance(value, dict):
            value = CommandJobLimits(**value)
        self._limits = value

    def set_resources(self, **kwargs: Any) -> None:
        """Change some resource fields (instance_count, instance_type, shm_size, ...)."""
        for key, value in kwargs.items():
            if value is not None:
                setattr(self.resources, key, value)

    def set_limits(self, *, timeout: float | None = None, **kwargs: Any) -> None:
        if timeout is not None:
            self.limits.timeout = timeout
        for key, value in kwargs.items():
            setattr(self.limits, key, value)

    def set_queue_settings(self, **kwargs: Any) -> None:
        self.queue_settings = {k: v for k, v in kwargs.items() if v is not None}

    def __call__(self, **inputs: Any) -> Command:
        """A copy with these inputs set, as azure-ai-ml's `job(lr=0.1)` (a sweep's search space included)."""
        import copy

        job = copy.copy(self)
        job.inputs = AttrDict({**self.inputs, **inputs})
        job._source_where = caller_position()  # its inputs were set here: a problem with them points here
        job._join_pipeline()
        return job

    def sweep(self, *, primary_metric: str, goal: str, **settings: Any) -> Any:
        """The sweep of this job (`distrun.sweep.SweepJob`): its inputs set to a search space
        expression (`job(lr=Choice([...]))`) are the parameters. The other arguments are
        azure-ai-ml's: sampling_algorithm, compute, max_concurrent_trials, max_total_trials,
        timeout, trial_timeout, early_termination_policy, search_space, identity, queue_settings."""
        from distrun.sdk.sweep_job import sweep_of

        return sweep_of(self, primary_metric=primary_metric, goal=goal, **settings)

    # ------------------------------------------------------------ to the job model

    def _ignored_by_part(self) -> dict[str, Any]:
        parts: list[tuple[str, Any]] = [
            ("command", self),
            ("distribution", self.distribution),
            ("resources", self.resources),
            ("limits", self.limits),
            ("environment", self.environment),
        ]
        parts += [(f"inputs.{k}", v) for k, v in self.inputs.items()]
        parts += [(f"outputs.{k}", v) for k, v in self.outputs.items()]
        found: dict[str, Any] = {}
        for where, part in parts:
            for key, value in (getattr(part, "_ignored", None) or {}).items():
                found[f"{where}.{key}"] = recordable(value)
        return found

    def _to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for key in _PLAIN_FIELDS:
            value = getattr(self, key)
            if value is not None:
                data[key] = path_text(value)
        if self.code is not None:
            data["code"] = path_text(self.code)
        if self.environment is not None:
            data["environment"] = to_data(self.environment)
        for key in ("environment_variables", "tags"):
            if getattr(self, key):
                data[key] = dict(getattr(self, key))
        properties = dict(self.properties)
        ignored = self._ignored_by_part()
        if ignored:
            properties[IGNORED_PROPERTY] = {**properties.get(IGNORED_PROPERTY, {}), **ignored}
        if properties:
            data["properties"] = properties
        if self.inputs:
            data["inputs"] = {k: to_data(v) for k, v in self.inputs.items()}
        if self.outputs:
            data["outputs"] = {k: to_data(v) for k, v in self.outputs.items()}
        resources = to_data(self.resources)
        if resources:
            data["resources"] = resources
        limits = to_data(self.limits)
        if limits:
            data["limits"] = limits
        if self.distribution is not None:
            data["distribution"] = distribution_data(self.distribution)
        for key in _OPTIONAL_OBJECTS:
            if getattr(self, key) is not None:
                data[key] = to_data(getattr(self, key))
        return data

    def _job_source(self) -> JobSource:
        self._refuse_search_space()
        data = self._to_data()
        if self._file_source is not None:
            # Loaded from YAML: relative paths and error positions stay those of the file.
            return JobSource(data, self._file_source.base_dir, self._file_source.source, self._file_source.positions)
        return python_source(data, self._base_dir, self._source_where)

    def _refuse_search_space(self) -> None:
        """A job whose input is a search space expression is a sweep's trial, not a job to run."""
        from distrun.core.errors import Problem, ValidationError
        from distrun.sdk.sweep_space import SweepDistribution

        swept = [name for name, value in self.inputs.items() if isinstance(value, SweepDistribution)]
        if swept:
            raise ValidationError(
                [
                    Problem(
                        f"input {name} is a search space ({self.inputs[name]!r}): a job with one runs as a sweep",
                        f"inputs.{name}",
                        self._source_where,
                        "submit job.sweep(primary_metric=..., goal=...) instead, or give the input one value",
                    )
                    for name in swept
                ]
            )

    def __repr__(self) -> str:
        shown = {k: v for k, v in self._to_data().items() if k != "type"}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class CommandJob(Command):
    """`azure.ai.ml.entities.CommandJob`: the same job as `command(...)` builds."""


def command(
    *,
    command: str | None = None,
    code: Any = None,
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    environment: str | Environment | dict[str, Any] | None = None,
    environment_variables: dict[str, Any] | None = None,
    compute: str | None = None,
    distribution: DistributionConfiguration | dict[str, Any] | None = None,
    instance_count: int | None = None,
    instance_type: str | None = None,
    locations: list[str] | None = None,
    docker_args: str | None = None,
    shm_size: str | None = None,
    timeout: float | None = None,
    resources: JobResourceConfiguration | dict[str, Any] | None = None,
    limits: CommandJobLimits | dict[str, Any] | None = None,
    name: str | None = None,
    display_name: str | None = None,
    experiment_name: str | None = None,
    description: str | None = None,
    tags: dict[str, Any] | None = None,
    properties: dict[str, Any] | None = None,
    services: dict[str, Any] | None = None,
    identity: Any = None,
    queue_settings: Any = None,
    **kwargs: Any,
) -> Command:
    """Build a command job, as `azure.ai.ml.command` does.

    `resources` and `limits` (objects or dicts) are also taken, as `CommandJob` takes them;
    `instance_count`, `timeout` and the other shortcuts are set on top of them.
    """
    job = Command(
        command=command,
        code=code,
        inputs=inputs,
        outputs=outputs,
        environment=environment,
        environment_variables=environment_variables,
        compute=compute,
        distribution=distribution,
        resources=resources,
        limits=limits,
        name=name,
        display_name=display_name,
        experiment_name=experiment_name,
        description=description,
        tags=tags,
        properties=properties,
        services=services,
        identity=identity,
        queue_settings=queue_settings,
        **kwargs,
    )
    job.set_resources(
        instance_count=instance_count,
        instance_type=instance_type,
        locations=locations,
        docker_args=docker_args,
        shm_size=shm_size,
    )
    job.set_limits(timeout=timeout)
    return job


def job_from_data(data: dict[str, Any], cls: type[Command] = Command) -> Command:
    """The SDK entity of a loaded (already valid) job."""
    fields = {k: v for k, v in data.items() if k not in ("$schema", "type")}
    job = cls(
        **{
            **fields,
            "inputs": {k: input_from_data(v) for k, v in (data.get("inputs") or {}).items()},
            "outputs": {k: output_from_data(v) for k, v in (data.get("outputs") or {}).items()},
            "environment": environment_from_data(data.get("environment")),
        }
    )
    return job


def load_job(source: Any, *, params_override: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    """Load a job YAML file (validated as `distrun job validate` does) into an SDK job: a command
    job, or, as the file says, a pipeline job or a sweep job (`distrun.sdk.loaded_documents`).

    `params_override` is azure-ai-ml's list of `{"key.path": value}` dicts, applied like `--set`.
    """
    import json

    from distrun.loading.loader import load_job_data
    from distrun.spec.job_kind import is_pipeline_document, is_sweep_document
    from distrun.spec.yaml_source import read_yaml_file

    overrides = [f"{key}={json.dumps(value)}" for item in params_override or [] for key, value in item.items()]
    path = Path(path_text(source))
    raw, smap = read_yaml_file(path)
    if isinstance(raw, dict) and (is_pipeline_document(raw) or is_sweep_document(raw)):
        from distrun.sdk.loaded_documents import load_document_job

        loaded_job = load_document_job(raw, smap, path, overrides)
        if kwargs:
            loaded_job._accept(kwargs)
        return loaded_job
    loaded = load_job_data(raw, path.resolve().parent, str(path), overrides, smap)
    data = loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    job = job_from_data(data, CommandJob)
    job._file_source = JobSource(data, loaded.base_dir, loaded.source, dict(loaded.source_map.positions))
    if kwargs:
        job._accept(kwargs)
    return job


__all__ = ["Command", "CommandJob", "CreationContext", "Input", "Output", "command", "job_from_data", "load_job"]
