"""Resources, limits and environments of a job, as in `azure.ai.ml.entities`."""

from __future__ import annotations

from typing import Any

from distrun.sdk.notices import Recorded
from distrun.sdk.plain import present, to_data


class ResourceConfiguration(Recorded):
    def __init__(
        self,
        *,
        instance_count: int | None = None,
        instance_type: str | None = None,
        properties: dict[str, Any] | None = None,
        locations: list[str] | None = None,
        shm_size: str | None = None,
        docker_args: str | None = None,
        max_instance_count: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.instance_count = instance_count
        self.instance_type = instance_type
        self.properties = properties
        self.locations = locations
        self.shm_size = shm_size
        self.docker_args = docker_args
        self.max_instance_count = max_instance_count
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(
            instance_count=self.instance_count,
            instance_type=self.instance_type,
            properties=self.properties,
            locations=self.locations,
            shm_size=self.shm_size,
            docker_args=self.docker_args,
            max_instance_count=self.max_instance_count,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


class JobResourceConfiguration(ResourceConfiguration):
    """The name newer azure-ai-ml versions use for a job's resources."""


class CommandJobLimits(Recorded):
    def __init__(self, *, timeout: float | None = None, grace_period: float | None = None, **kwargs: Any) -> None:
        self.timeout = timeout
        self.grace_period = grace_period  # distrun extension: seconds between SIGTERM and SIGKILL
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(timeout=self.timeout, grace_period=self.grace_period)

    def __repr__(self) -> str:
        return f"CommandJobLimits({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


class BuildContext(Recorded):
    def __init__(self, *, path: Any = None, dockerfile_path: str | None = None, **kwargs: Any) -> None:
        self.path = path
        self.dockerfile_path = dockerfile_path
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(path=self.path, dockerfile_path=self.dockerfile_path)


class Environment(Recorded):
    """An inline environment: a `conda_file` is built into the job's environment; an image only is kept for
    image-based backends (local compute then runs the current Python)."""

    def __init__(
        self,
        *,
        name: str | None = None,
        version: str | None = None,
        description: str | None = None,
        image: str | None = None,
        build: BuildContext | dict[str, Any] | None = None,
        conda_file: Any = None,
        tags: dict[str, str] | None = None,
        os_type: str | None = None,
        inference_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.image = image
        self.build = BuildContext(**build) if isinstance(build, dict) else build
        self.conda_file = conda_file
        self.tags = tags
        self.os_type = os_type
        self.inference_config = inference_config
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(
            name=self.name,
            version=self.version,
            description=self.description,
            image=self.image,
            build=to_data(self.build) if self.build is not None else None,
            conda_file=self.conda_file,
            tags=self.tags,
            os_type=self.os_type,
            inference_config=self.inference_config,
        )

    def __repr__(self) -> str:
        return f"Environment({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


def environment_from_data(value: Any) -> Any:
    return Environment(**value) if isinstance(value, dict) else value
