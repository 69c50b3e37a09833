"""`MLClient` and `MLClient.jobs`, as in `azure.ai.ml`, over distrun's store and backends.

`MLClient()` needs no workspace: jobs run on the compute named by `MLClient(compute=...)`,
else the job's `compute`, else this machine, like `distrun job create [--compute]`. The
workspace arguments of azure-ai-ml are accepted, kept on the client and named once.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, ValidationError
from distrun.core.safe_files import read_text
from distrun.runner.job_kinds import row_of
from distrun.runner.jobs import get_job, list_jobs
from distrun.sdk import operations
from distrun.sdk.command_job import Command, job_from_data
from distrun.sdk.job_header import submitted_state
from distrun.sdk.notices import note_ignored
from distrun.sdk.pipeline_job import PipelineJob
from distrun.sdk.poller import Poller
from distrun.sdk.sweep_job import SweepJob
from distrun.store.index import JobRecord
from distrun.store.layout import Layout


class MLClient:
    def __init__(
        self,
        credential: Any = None,
        subscription_id: str | None = None,
        resource_group_name: str | None = None,
        workspace_name: str | None = None,
        registry_name: str | None = None,
        *,
        compute: str | None = None,
        home: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        """`compute`: the target for jobs (default: the job's own, else local). `home`: DISTRUN_HOME."""
        self.credential = credential
        self.subscription_id = subscription_id
        self.resource_group_name = resource_group_name
        self.workspace_name = workspace_name
        self.registry_name = registry_name
        self.default_compute = compute  # `compute`'s target name; `.compute` is Azure ML's ComputeOperations
        self._home = Path(home) if home is not None else None
        given = {
            "credential": credential,
            "subscription_id": subscription_id,
            "resource_group_name": resource_group_name,
            "workspace_name": workspace_name,
            "registry_name": registry_name,
            **kwargs,
        }
        self._ignored = {k: v for k, v in given.items() if v is not None}
        note_ignored("MLClient", self._ignored)
        self.jobs = JobOperations(self)
        from distrun.sdk.assets import DataOperations, EnvironmentOperations

        self.data = DataOperations(self)
        self.environments = EnvironmentOperations(self)
        from distrun.sdk.compute import ComputeOperations
        from distrun.sdk.workspaces import WorkspaceOperations

        self.compute = ComputeOperations(self)
        self.workspaces = WorkspaceOperations(self)
        from distrun.sdk.components import ComponentOperations

        self.components = ComponentOperations(self)
        from distrun.sdk.models import ModelOperations

        self.models = ModelOperations(self)

    @classmethod
    def from_config(
        cls, credential: Any = None, *, path: Any = None, file_name: str | None = None, **kwargs: Any
    ) -> MLClient:
        """azure-ai-ml reads a workspace's config.json here; distrun needs none."""
        extra = {k: v for k, v in {"path": path, "file_name": file_name}.items() if v is not None}
        return cls(credential, **extra, **kwargs)

    @property
    def layout(self) -> Layout:
        return Layout(self._home)

    def create_or_update(self, entity: Any, **kwargs: Any) -> Any:
        from distrun.sdk.automl_job import AutoMLJob
        from distrun.sdk.components import Component
        from distrun.sdk.pipeline_job import PipelineJob

        if isinstance(entity, (Command, PipelineJob, SweepJob, AutoMLJob)):
            return self.jobs.create_or_update(entity, **kwargs)
        if isinstance(entity, Component):
            return self.components.create_or_update(entity, **kwargs)
        from distrun.sdk.assets import Data
        from distrun.sdk.job_settings import Environment

        if isinstance(entity, Data):
            return self.data.create_or_update(entity, **kwargs)
        if isinstance(entity, Environment):
            return self.environments.create_or_update(entity, **kwargs)
        from distrun.sdk.models import Model

        if isinstance(entity, Model):
            return self.models.create_or_update(entity, **kwargs)
        from distrun.sdk.compute import Compute

        if isinstance(entity, Compute):
            return self.compute.create_or_update(entity)
        from distrun.core.errors import NotSupportedYetError

        raise NotSupportedYetError(
            f"distrun's MLClient does not create {type(entity).__name__} objects yet",
            "it creates jobs, pipeline jobs, components, data assets, models, environments and compute "
            "(AmlCompute: a local target)",
        )

    def begin_create_or_update(self, entity: Any, **kwargs: Any) -> Poller:
        return Poller.finished(self.create_or_update(entity, **kwargs))

    def __getattr__(self, name: str) -> Any:
        """Azure ML's operations for resources other than jobs say what to do instead."""
        from distrun.sdk import not_provided

        if name in not_provided.CLIENT:
            what, todo = not_provided.CLIENT[name]
            raise AttributeError(not_provided.message(f"MLClient.{name}", what, todo), name=name, obj=self)
        raise AttributeError(f"'MLClient' object has no attribute {name!r}", name=name, obj=self)

    def __repr__(self) -> str:
        return f"MLClient(compute={self.default_compute!r}, home={str(self.layout.home)!r})"


@dataclass
class ValidationResult:
    """What `jobs.validate` found: `passed`, and each problem by key path."""

    passed: bool
    error_messages: dict[str, str] = field(default_factory=dict)
    error: ValidationError | None = None


class JobOperations:
    """`MLClient.jobs`: create_or_update, validate, get, list, stream, begin_cancel, download."""

    def __init__(self, client: MLClient) -> None:
        self._client = client

    @property
    def _layout(self) -> Layout:
        return self._client.layout

    def create_or_update(
        self,
        job: Command | PipelineJob | SweepJob,
        *,
        description: str | None = None,
        compute: str | None = None,
        tags: dict[str, Any] | None = None,
        experiment_name: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Validate and start the job (or pipeline job, sweep job or AutoML job) in the background;
        returns it with its name and status."""
        from distrun.sdk.automl_job import AutoMLJob

        if not isinstance(job, (Command, PipelineJob, SweepJob, AutoMLJob)):
            raise DistrunError(
                "create_or_update takes a job built with command(...) or load_job(...), a pipeline job "
                f"from an @pipeline function, or a sweep from job.sweep(...), not {type(job).__name__}"
            )
        note_ignored("jobs.create_or_update", kwargs)
        job = copy.copy(job)
        if description is not None:
            job.description = description
        if experiment_name is not None:
            job.experiment_name = experiment_name
        if tags:
            job.tags = {**job.tags, **tags}
        if isinstance(job, PipelineJob):
            from distrun.sdk.pipeline_ops import submit_pipeline

            return self._job_of(submit_pipeline(job, self._layout, compute or self._client.default_compute))
        if isinstance(job, SweepJob):
            from distrun.sdk.sweep_ops import submit_sweep

            return self._job_of(submit_sweep(job, self._layout, compute or self._client.default_compute))
        source = job._job_source()
        if self._client._ignored:
            ignored = source.data.setdefault("properties", {}).setdefault(operations.IGNORED_PROPERTY, {})
            ignored.update({f"MLClient.{k}": _recordable_client_arg(k, v) for k, v in self._client._ignored.items()})
        record = operations.submit(source, self._layout, compute or self._client.default_compute)
        return self._job_of(record)

    def validate(
        self, job: Command | PipelineJob | SweepJob, *, raise_on_failure: bool = False, **kwargs: Any
    ) -> ValidationResult:
        """Check a job (or pipeline, or sweep) as `distrun job validate` does; nothing is recorded or started."""
        try:
            if isinstance(job, PipelineJob):
                from distrun.sdk.pipeline_ops import checked_pipeline

                checked_pipeline(job)
            else:
                job._job_source().load()
        except ValidationError as exc:
            if raise_on_failure:
                raise
            messages = {p.key_path or "<job>": p.message for p in exc.problems}
            return ValidationResult(False, messages, exc)
        return ValidationResult(True)

    def get(self, name: str) -> Any:
        """A job, a pipeline job (with `jobs`: its steps' jobs), or a sweep job (with its trials'
        states and its best trial)."""
        return self._job_of(get_job(self._layout, name))

    def list(self, *, max_results: int | None = None, parent_job_name: str | None = None, **kwargs: Any) -> list[Any]:
        """Jobs, newest first (all of them unless max_results is given); `parent_job_name`: the
        jobs of that pipeline's steps."""
        if parent_job_name is None:
            records = list_jobs(self._layout, -1 if max_results is None else max_results)
        else:
            get_job(self._layout, parent_job_name)  # an unknown pipeline says so
            records = [record for record in list_jobs(self._layout, -1) if record.parent == parent_job_name]
            records = records[:max_results] if max_results is not None else records
        return [self._job_of(record) for record in records]

    def stream(self, name: str) -> None:
        """Print the job's logs until it ends, as `distrun job stream` (a pipeline or sweep: each
        step's or trial's state, then its summary); raises JobFailedError if it failed."""
        if row_of(get_job(self._layout, name)).has_children:
            from distrun.sdk.pipeline_ops import stream_pipeline

            final = stream_pipeline(self._layout, name, sys.stdout)
        else:
            final = operations.stream(self._layout, name, sys.stdout)
        operations.raise_if_failed(final)

    def begin_cancel(self, name: str) -> Poller:
        """Cancel a job: SIGTERM to its processes, SIGKILL after the grace period. `.result()` waits."""
        from distrun.runner.jobs import cancel_job

        get_job(self._layout, name)  # an unknown name fails here, not in the background
        layout = self._layout
        return Poller.start(lambda: cancel_job(layout, name))

    def download(
        self, name: str, *, download_path: Any = ".", output_name: str | None = None, all: bool = False
    ) -> list[Path]:
        """Artifacts to `<download_path>/artifacts/`, named outputs to `<download_path>/named-outputs/<name>/`
        (a pipeline's own outputs by its names; its steps' each in a folder per step, as `job download`)."""
        from distrun.runner.download import download_job

        row = row_of(get_job(self._layout, name))
        download = row.download if row.has_children else download_job
        return download(self._layout, name, Path(download_path), output_name, all)

    def _job_of(self, record: JobRecord) -> Any:
        """The job object of a record: a `Command`, a `PipelineJob` or a `SweepJob`, as its kind's view is."""
        return _JOB_OF_VIEW[row_of(record).view](self, record)

    def _sweep_of(self, record: JobRecord) -> SweepJob:
        from distrun.sdk.sweep_ops import sweep_of_record

        return sweep_of_record(record, self._layout.job(record.name).root)

    def _pipeline_of(self, record: JobRecord) -> PipelineJob:
        from distrun.sdk.pipeline_ops import pipeline_of_record

        return pipeline_of_record(record, self._layout.job(record.name).root, self._job_of, self._layout)

    def _command_of(self, record: JobRecord) -> Command:
        folder = self._layout.job(record.name)
        try:
            data = json.loads(read_text(folder.job_json, root=folder.root))
        except (OSError, ValueError):
            data = None  # the job failed before its folder was filled
        if data is None:
            job = Command(
                name=record.name,
                display_name=record.display_name,
                experiment_name=record.experiment_name,
                tags=record.tags,
                compute=record.compute,
            )
        else:
            job = job_from_data(_runnable_again(data, folder))
        return _with_output_paths(submitted_state(job, record, folder.root))


_JOB_OF_VIEW = {
    "command": JobOperations._command_of,
    "automl": JobOperations._command_of,  # its search's one process: its status, outputs and logs are a job's
    "pipeline": JobOperations._pipeline_of,
    "sweep": JobOperations._sweep_of,
}


def _with_output_paths(job: Command) -> Command:
    """Each output's `path` as Azure ML reports it, a value a later job takes as an input: the
    datastore path with `${{name}}` filled in, else `azureml://jobs/<job>/outputs/<name>`."""
    from distrun.data.locations import job_output_uri
    from distrun.sdk.inputs_outputs import Output

    for name, out in list(job.outputs.items()):
        if out is None:
            out = job.outputs[name] = Output()
        if not isinstance(out, Output):
            continue
        if out.path is None:
            out.path = job_output_uri(job.name, name)
        elif isinstance(out.path, str):
            out.path = out.path.replace("${{name}}", job.name).replace("${{output_name}}", name)
    return job


def _runnable_again(data: dict[str, Any], folder: Any) -> dict[str, Any]:
    """A recorded job whose code and data paths point at what it ran with, so it can be sent again."""
    from distrun.prepare.submission import load_bindings

    data = dict(data)
    if "code" in data:
        data["code"] = str(folder.code)
    try:
        bound = load_bindings(folder).input_paths
    except (OSError, ValueError, TypeError):
        bound = {}
    inputs = dict(data.get("inputs") or {})
    for name, path in bound.items():
        if isinstance(inputs.get(name), dict):
            inputs[name] = {**inputs[name], "path": path}
    if inputs:
        data["inputs"] = inputs
    return data


def _recordable_client_arg(name: str, value: Any) -> Any:
    if name == "credential":
        return type(value).__name__  # never a secret in the job record
    from distrun.sdk.notices import recordable

    return recordable(value)
