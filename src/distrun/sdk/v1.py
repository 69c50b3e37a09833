"""Azure ML SDK v1 (`azureml.core`): ScriptRunConfig, the distributed configurations, Experiment, Run.

A `ScriptRunConfig` becomes the same plain job data a v2 YAML file holds, and goes through
the same loader, submission and backends:

    script + arguments      -> command: python <script> <arguments>
    command (list or str)   -> command, joined with spaces (the per-node launch form)
    source_directory        -> code
    compute_target          -> compute
    PyTorchConfiguration(process_count=P, node_count=N)
                            -> resources.instance_count: N, distribution: {type: pytorch, process_count: P}
                               (P is a total; the loader checks it divides by N)
    MpiConfiguration(process_count_per_node=P, node_count=N)
    TensorflowConfiguration(worker_count=W, parameter_server_count=S)
                            -> instance_count W, distribution: {type: tensorflow, worker_count: W, ...}

`arguments` may refer to variables distrun sets for each process (`$LOCAL_RANK`, `${RANK}`):
each argument is passed as one word in which only such references are expanded.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.core.job_status import JobStatus
from distrun.core.user_paths import current_folder
from distrun.runner.jobs import cancel_job, get_job, list_jobs
from distrun.sdk import operations
from distrun.sdk.notices import Recorded, caller_position, note_ignored, recordable
from distrun.sdk.plain import path_text
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

DEFAULT_MAX_RUN_DURATION_SECONDS = 2592000  # azureml-core's default: 30 days
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_./:=,+@%^-]+$")
_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


def shell_word(value: Any) -> str:
    """One argument as one shell word; `$NAME` and `${NAME}` in it expand, nothing else does."""
    text = str(value)
    if _SAFE_WORD.match(text):
        return text
    if not _VARIABLE.search(text):
        return shlex.quote(text)
    out = []
    pos = 0
    for match in _VARIABLE.finditer(text):
        out.append(_double_quoted(text[pos : match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_double_quoted(text[pos:]))
    return '"' + "".join(out) + '"'


def _double_quoted(text: str) -> str:
    """Text inside double quotes: `\\`, `"`, `$` and backquote lose their meaning."""
    return re.sub(r'([\\"$`])', r"\\\1", text)


# ---------------------------------------------------------------- workspace, environment


class Workspace(Recorded):
    """Accepted and kept; distrun runs jobs here or on targets in $DISTRUN_HOME/config.yaml."""

    def __init__(
        self,
        subscription_id: str | None = None,
        resource_group: str | None = None,
        workspace_name: str | None = None,
        auth: Any = None,
        **kwargs: Any,
    ) -> None:
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self.name = workspace_name
        given = {
            "subscription_id": subscription_id,
            "resource_group": resource_group,
            "workspace_name": workspace_name,
            "auth": type(auth).__name__ if auth is not None else None,
            **kwargs,
        }
        self._accept({k: v for k, v in given.items() if v is not None})

    @classmethod
    def from_config(cls, path: Any = None, auth: Any = None, **kwargs: Any) -> Workspace:
        extra = {k: v for k, v in {"path": path_text(path), "auth": auth}.items() if v is not None}
        return cls(**extra, **kwargs)

    @classmethod
    def get(
        cls,
        name: str,
        auth: Any = None,
        subscription_id: str | None = None,
        resource_group: str | None = None,
        **kwargs: Any,
    ) -> Workspace:
        return cls(subscription_id, resource_group, name, auth, **kwargs)

    @property
    def compute_targets(self) -> dict[str, str]:
        """The compute targets distrun knows: `local` and those in $DISTRUN_HOME/config.yaml."""
        from distrun.prepare.compute import read_targets

        return {"local": "local", **{name: name for name in read_targets(Layout().config_path)}}

    def __repr__(self) -> str:
        return f"Workspace(name={self.name!r})"


class CondaDependencies:
    """azureml.core.conda_dependencies.CondaDependencies: the job's conda file, built into its environment."""

    def __init__(self, conda_dependencies_file_path: Any = None, **kwargs: Any) -> None:
        self.file_path = path_text(conda_dependencies_file_path)
        self.conda_packages: list[str] = []
        self.pip_packages: list[str] = []
        self.channels: list[str] = []
        self.python_version: str | None = None

    @classmethod
    def create(
        cls,
        pip_packages: list[str] | None = None,
        conda_packages: list[str] | None = None,
        python_version: str | None = None,
        channels: list[str] | None = None,
        **kwargs: Any,
    ) -> CondaDependencies:
        deps = cls()
        deps.pip_packages = list(pip_packages or [])
        deps.conda_packages = list(conda_packages or [])
        deps.channels = list(channels or [])
        deps.python_version = python_version
        return deps

    def add_pip_package(self, pip_package: str) -> None:
        self.pip_packages.append(pip_package)

    def add_conda_package(self, conda_package: str) -> None:
        self.conda_packages.append(conda_package)

    def add_channel(self, channel: str) -> None:
        self.channels.append(channel)

    def as_conda_file(self) -> Any:
        """A conda file: the path it came from, or the environment as a conda YAML mapping."""
        if self.file_path is not None:
            return self.file_path
        deps: list[Any] = [f"python={self.python_version}"] if self.python_version else []
        deps += self.conda_packages
        if self.pip_packages:
            deps.append({"pip": list(self.pip_packages)})
        return {"channels": list(self.channels), "dependencies": deps}


class PythonSection:
    def __init__(self) -> None:
        self.conda_dependencies: CondaDependencies | None = None
        self.user_managed_dependencies = False
        self.interpreter_path = "python"


class DockerSection:
    def __init__(self) -> None:
        self.base_image: str | None = None
        self.base_dockerfile: str | None = None
        self.enabled = False


class Environment(Recorded):
    """azureml.core.Environment: its conda/pip dependencies are built into the job's environment (see
    docs/environments-and-data.md); a curated or image-only one runs in this Python."""

    def __init__(self, name: str = "default", **kwargs: Any) -> None:
        self.name = name
        self.version: str | None = None
        self.label: str | None = None
        self.registered = False  # a reference to a curated or registered environment
        self.environment_variables: dict[str, str] = {}
        self.python = PythonSection()
        self.docker = DockerSection()
        self._accept(kwargs)

    @staticmethod
    def get(workspace: Any, name: str, version: str | None = None, label: str | None = None) -> Environment:
        env = Environment(name)
        env.version = version
        env.label = label
        env.registered = True
        return env

    @staticmethod
    def from_conda_specification(name: str, file_path: Any) -> Environment:
        env = Environment(name)
        env.python.conda_dependencies = CondaDependencies(file_path)
        return env

    @staticmethod
    def from_pip_requirements(name: str, file_path: Any, pip_version: str | None = None) -> Environment:
        env = Environment(name)
        deps = CondaDependencies.create(pip_packages=[f"-r {path_text(file_path)}"])
        env.python.conda_dependencies = deps
        return env

    @staticmethod
    def from_docker_image(name: str, image: str, conda_specification: Any = None, **kwargs: Any) -> Environment:
        env = Environment(name, **kwargs)
        env.docker.base_image = image
        if conda_specification is not None:
            env.python.conda_dependencies = CondaDependencies(conda_specification)
        return env

    @staticmethod
    def from_dockerfile(name: str, dockerfile: Any, conda_specification: Any = None, **kwargs: Any) -> Environment:
        env = Environment(name, **kwargs)
        env.docker.base_dockerfile = path_text(dockerfile)
        if conda_specification is not None:
            env.python.conda_dependencies = CondaDependencies(conda_specification)
        return env

    def register(self, workspace: Any) -> Environment:
        return self

    def build(self, workspace: Any, **kwargs: Any) -> None:
        return None

    def job_environment(self) -> Any:
        """The job's `environment`: a reference for curated/registered ones, else an inline definition."""
        if self.registered:
            suffix = f":{self.version}" if self.version else f"@{self.label or 'latest'}"
            return f"azureml:{self.name}{suffix}"
        data: dict[str, Any] = {"name": self.name}
        if self.version:
            data["version"] = self.version
        if self.docker.base_image:
            data["image"] = self.docker.base_image
        dockerfile = self.docker.base_dockerfile
        if dockerfile and Path(dockerfile).is_file():
            data["build"] = {"path": str(Path(dockerfile).parent), "dockerfile_path": Path(dockerfile).name}
        deps = self.python.conda_dependencies
        if deps is not None:
            data["conda_file"] = deps.as_conda_file()
        return data

    def __repr__(self) -> str:
        return f"Environment(name={self.name!r})"


# ---------------------------------------------------------------- distributed configurations


class PyTorchConfiguration(Recorded):
    """`process_count` is the TOTAL number of processes (default: one per node)."""

    def __init__(
        self,
        communication_backend: str | None = None,
        process_count: int | None = None,
        node_count: int = 1,
        **kwargs: Any,
    ) -> None:
        self.communication_backend = communication_backend or "Nccl"
        self.process_count = process_count
        self.node_count = node_count
        extra = dict(kwargs)
        if communication_backend is not None:
            extra["communication_backend"] = communication_backend
        self._accept(extra)

    def _job_parts(self) -> tuple[int, dict[str, Any]]:
        dist: dict[str, Any] = {"type": "pytorch"}
        if self.process_count is not None:
            dist["process_count"] = self.process_count
        return self.node_count, dist


class MpiConfiguration(Recorded):
    def __init__(self, process_count_per_node: int = 1, node_count: int = 1, **kwargs: Any) -> None:
        self.process_count_per_node = process_count_per_node
        self.node_count = node_count
        self._accept(kwargs)

    def _job_parts(self) -> tuple[int, dict[str, Any]]:
        return self.node_count, {"type": "mpi", "process_count_per_instance": self.process_count_per_node}


class TensorflowConfiguration(Recorded):
    def __init__(self, worker_count: int = 1, parameter_server_count: int = 1, **kwargs: Any) -> None:
        self.worker_count = worker_count
        self.parameter_server_count = parameter_server_count
        self._accept(kwargs)

    def _job_parts(self) -> tuple[int, dict[str, Any]]:
        dist = {
            "type": "tensorflow",
            "worker_count": self.worker_count,
            "parameter_server_count": self.parameter_server_count,
        }
        return self.worker_count, dist


TensorFlowConfiguration = TensorflowConfiguration


class RunConfiguration(Recorded):
    """The older way to configure a run; ScriptRunConfig's own arguments take precedence."""

    def __init__(
        self, script: str | None = None, arguments: list[Any] | None = None, command: Any = None, **kwargs: Any
    ) -> None:
        self.script = script
        self.arguments = list(arguments or [])
        self.command = command
        self.target: Any = "local"
        self.environment: Environment | None = None
        self.node_count = 1
        self.environment_variables: dict[str, str] = {}
        self.max_run_duration_seconds: float | None = None
        self._accept(kwargs)


# ---------------------------------------------------------------- the run


class ScriptRunConfig(Recorded):
    def __init__(
        self,
        source_directory: Any = None,
        script: str | None = None,
        arguments: list[Any] | None = None,
        run_config: RunConfiguration | None = None,
        _telemetry_values: Any = None,
        compute_target: Any = None,
        environment: Environment | None = None,
        distributed_job_config: PyTorchConfiguration | MpiConfiguration | TensorflowConfiguration | None = None,
        resume_from: Any = None,
        max_run_duration_seconds: float | None = DEFAULT_MAX_RUN_DURATION_SECONDS,
        command: list[Any] | str | None = None,
        docker_runtime_config: Any = None,
        **kwargs: Any,
    ) -> None:
        self._where = caller_position()
        self._base_dir = current_folder()
        self.run_config = run_config or RunConfiguration()
        self.source_directory = source_directory
        self.script = script if script is not None else self.run_config.script
        self.arguments = list(arguments) if arguments is not None else list(self.run_config.arguments)
        self.command = command if command is not None else self.run_config.command
        self.compute_target = compute_target if compute_target is not None else self.run_config.target
        self.environment = environment if environment is not None else self.run_config.environment
        self.distributed_job_config = distributed_job_config
        if max_run_duration_seconds == DEFAULT_MAX_RUN_DURATION_SECONDS and self.run_config.max_run_duration_seconds:
            max_run_duration_seconds = self.run_config.max_run_duration_seconds
        self.max_run_duration_seconds = max_run_duration_seconds
        extra = {"resume_from": resume_from, "docker_runtime_config": docker_runtime_config, **kwargs}
        self._accept({k: v for k, v in extra.items() if v is not None})

    def _command_line(self) -> str:
        if self.command and self.script:
            raise ValidationError(
                [Problem("ScriptRunConfig takes script= or command=, not both", "command", self._where, "keep one")]
            )
        if self.command:
            # Azure ML runs a command list as its words joined by spaces: `$NODE_RANK` expands.
            words = self.command if isinstance(self.command, str) else " ".join(str(w) for w in self.command)
            rest = " ".join(shell_word(a) for a in self.arguments)
            return f"{words} {rest}".strip()
        if not self.script:
            raise ValidationError(
                [
                    Problem(
                        "ScriptRunConfig needs script= or command=",
                        "command",
                        self._where,
                        "e.g. ScriptRunConfig(source_directory='./src', script='train.py')",
                    )
                ]
            )
        return " ".join(["python", shell_word(self.script), *(shell_word(a) for a in self.arguments)])

    def _to_data(self, experiment_name: str | None, ignored: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": "command",
            "command": self._command_line(),
            "code": path_text(self.source_directory) if self.source_directory is not None else ".",
        }
        if experiment_name:
            data["experiment_name"] = experiment_name
        target = self.compute_target
        target = getattr(target, "name", target)  # a compute target object, or its name
        if target is not None:
            data["compute"] = str(target)
        env_vars = dict(self.run_config.environment_variables)
        if isinstance(self.environment, Environment):
            env_vars.update(self.environment.environment_variables)
            data["environment"] = self.environment.job_environment()
        elif self.environment is not None:
            data["environment"] = self.environment
        if env_vars:
            data["environment_variables"] = env_vars
        nodes = self.run_config.node_count
        config = self.distributed_job_config
        if config is not None:
            nodes, data["distribution"] = config._job_parts()
        data["resources"] = {"instance_count": nodes}
        if self.max_run_duration_seconds and self.max_run_duration_seconds != DEFAULT_MAX_RUN_DURATION_SECONDS:
            data["limits"] = {"timeout": self.max_run_duration_seconds}
        parts = [("ScriptRunConfig", self), ("RunConfiguration", self.run_config)]
        parts += [("Environment", self.environment), ("distributed_job_config", config)]
        for owner, part in parts:
            for key, value in (getattr(part, "_ignored", None) or {}).items():
                ignored[f"{owner}.{key}"] = recordable(value)
        if ignored:
            data["properties"] = {operations.IGNORED_PROPERTY: ignored}
        return data

    def _job_source(self, experiment_name: str | None, ignored: dict[str, Any]) -> operations.JobSource:
        return operations.python_source(self._to_data(experiment_name, ignored), self._base_dir, self._where)


class Experiment:
    def __init__(self, workspace: Workspace | None, name: str, **kwargs: Any) -> None:
        self.workspace = workspace
        self.name = name
        note_ignored("Experiment", kwargs)

    def submit(self, config: ScriptRunConfig, tags: dict[str, str] | None = None, **kwargs: Any) -> Run:
        """Validate and start the run in the background (like `distrun job create`); returns its Run."""
        note_ignored("Experiment.submit", kwargs)
        ignored = {f"Workspace.{k}": recordable(v) for k, v in getattr(self.workspace, "_ignored", {}).items()}
        source = config._job_source(self.name, ignored)
        if tags:
            source.data["tags"] = dict(tags)
        record = operations.submit(source, Layout())
        return Run(self, record.name)

    def get_runs(self) -> list[Run]:
        """This experiment's runs, newest first."""
        records = list_jobs(Layout(), -1)
        return [Run(self, r.name) for r in records if r.experiment_name == self.name]

    def __repr__(self) -> str:
        return f"Experiment(name={self.name!r})"


class Run:
    """A submitted run: status, waiting (with its streamed output), details, files, cancel."""

    def __init__(self, experiment: Experiment | None, run_id: str, **kwargs: Any) -> None:
        self.experiment = experiment
        self.id = run_id

    @classmethod
    def get_context(cls, allow_offline: bool = True, **kwargs: Any) -> Run:
        """The run of the job this process belongs to; outside a job, an offline run that prints."""
        import os

        return cls(None, os.environ.get("DISTRUN_JOB_NAME") or "OfflineRun")

    def log(self, name: str, value: Any, description: str = "", step: int | None = None) -> None:
        """A metric value into the job's MLflow run (steps 0, 1, 2... when not given)."""
        from distrun.metrics.rank_logging import log_value

        log_value(name, value, step)

    def log_list(self, name: str, value: list[Any], description: str = "") -> None:
        """A list of values of one metric, steps 0..n-1."""
        from distrun.metrics.rank_logging import log_values

        log_values(name, list(value))

    @property
    def _layout(self) -> Layout:
        return Layout()

    def _record(self) -> JobRecord:
        return get_job(self._layout, self.id)

    @property
    def status(self) -> str:
        return self._record().status.value

    def get_status(self) -> str:
        return self._record().status.value

    @property
    def display_name(self) -> str | None:
        return self._record().display_name

    def wait_for_completion(
        self, show_output: bool = False, wait_post_processing: bool = False, raise_on_error: bool = True
    ) -> dict[str, Any]:
        """Wait for the run to end; with show_output, stream its logs as `distrun job stream` does.

        Raises distrun.JobFailedError (with the rank that failed first) when it failed.
        """
        if show_output:
            final = operations.stream(self._layout, self.id, sys.stdout)
        else:
            final = operations.wait(self._layout, self.id)
        if raise_on_error:
            operations.raise_if_failed(final)
        return self.get_details()

    def get_details(self) -> dict[str, Any]:
        record = self._record()
        folder = self._layout.job(record.name)
        details: dict[str, Any] = {
            "runId": record.name,
            "target": record.compute,
            "status": record.status.value,
            "startTimeUtc": _utc(record.started_at),
            "endTimeUtc": _utc(record.ended_at),
            "properties": {"distribution": record.distribution, "folder": record.folder},
            "logFiles": {f"user_logs/{p.name}": str(p) for p in sorted(folder.user_logs.glob("*.txt"))},
        }
        if record.status == JobStatus.FAILED:
            details["error"] = {"message": record.reason, "rootCause": record.root_cause}
        return details

    def cancel(self) -> None:
        """Stop the run, as `distrun job cancel` does (waiting, bounded, for its final record)."""
        cancel_job(self._layout, self.id)

    def get_file_names(self) -> list[str]:
        """The run's files: what processes wrote to ./outputs and ./logs, and its user_logs."""
        from distrun.store.layout import ARTIFACT_DIRS

        folder = self._layout.job(self.id)
        roots = [(folder.code / d, d) for d in ARTIFACT_DIRS] + [(folder.user_logs, "user_logs")]
        names = []
        for root, prefix in roots:
            if root.is_dir():
                names += [f"{prefix}/{p.relative_to(root)}" for p in sorted(root.rglob("*")) if p.is_file()]
        return names

    def _file(self, name: str) -> Path:
        folder = self._layout.job(self.id)
        base = folder.root if name.startswith(("user_logs/", "system_logs/")) else folder.code
        path = folder.inside(base / name)
        if not path.is_file():
            from distrun.core.errors import DistrunError

            raise DistrunError(f"run {self.id} has no file {name!r}", "run.get_file_names() lists them")
        return path

    def download_file(self, name: str, output_file_path: Any = None, **kwargs: Any) -> None:
        import shutil

        source = self._file(name)
        target = Path(path_text(output_file_path)) if output_file_path is not None else Path(Path(name).name)
        if target.is_dir():
            target = target / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)

    def download_files(
        self, prefix: str | None = None, output_directory: Any = None, append_prefix: bool = True, **kwargs: Any
    ) -> None:
        base = Path(path_text(output_directory)) if output_directory is not None else current_folder()
        for name in self.get_file_names():
            if prefix and not name.startswith(prefix):
                continue
            relative = name if append_prefix or not prefix else name[len(prefix) :].lstrip("/")
            self.download_file(name, base / relative)

    def get_portal_url(self) -> str:
        return self._layout.job(self.id).root.as_uri()

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, status={self.get_status()!r})"


def _utc(timestamp: float | None) -> str | None:
    import datetime

    if timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


__all__ = [
    "CondaDependencies",
    "Environment",
    "Experiment",
    "MpiConfiguration",
    "PyTorchConfiguration",
    "Run",
    "RunConfiguration",
    "ScriptRunConfig",
    "TensorFlowConfiguration",
    "TensorflowConfiguration",
    "Workspace",
    "shell_word",
]
