"""`MLClient.data` and `MLClient.environments`, as in `azure.ai.ml`, over distrun's data assets
(`distrun data ...`) and the environments named in config.yaml (`distrun env create`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from distrun.core.user_paths import current_folder
from distrun.sdk.notices import note_ignored
from distrun.sdk.plain import path_text
from distrun.sdk.versioned import VersionedAsset

if TYPE_CHECKING:
    from distrun.data.assets import DataAsset
    from distrun.sdk.job_settings import Environment
    from distrun.store.layout import Layout


class _Client(Protocol):
    """What the operations here use of their `MLClient` (which creates them): its DISTRUN_HOME."""

    @property
    def layout(self) -> Layout: ...


class Data(VersionedAsset):
    """A data asset: `Data(name=, version=, path=, type="uri_folder")`."""

    def __init__(
        self,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Any = None,
        type: str = "uri_folder",
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.version = version
        self.path = path_text(path)
        self.type = type
        self.description = description
        self.creation_context: Any = None
        self._accept(kwargs)


def _data_of(asset: DataAsset) -> Data:
    return Data(name=asset.name, version=asset.version, path=asset.path, type=asset.type, description=asset.description)


class DataOperations:
    """`MLClient.data`: create_or_update, get, list."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def create_or_update(self, data: Data, **kwargs: Any) -> Data:
        """Register a version (the next number when `version` is None); a local path is kept absolute."""
        from distrun.core.errors import DistrunError
        from distrun.data.register import register_path

        note_ignored("data.create_or_update", kwargs)
        if not data.name or data.path is None:
            raise DistrunError("a data asset needs a name and a path", "Data(name='cifar', path='./data')")
        home = self._client.layout.home
        made = register_path(
            home, data.name, data.version or "", str(data.path), data.type, data.description, current_folder()
        )
        return _data_of(made)

    def get(self, name: str, version: str | None = None, label: str | None = None) -> Data:
        from distrun.data.assets import get_asset

        return _data_of(get_asset(self._client.layout.home, name, version, label))

    def list(self, name: str | None = None, **kwargs: Any) -> list[Data]:
        from distrun.data.assets import list_assets

        return [_data_of(asset) for asset in list_assets(self._client.layout.home, name)]


class EnvironmentOperations:
    """`MLClient.environments`: create_or_update names the environment in config.yaml; jobs then
    use `azureml:NAME@latest` (or `NAME:VERSION`) and run in it."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def create_or_update(self, environment: Environment, **kwargs: Any) -> Environment:
        """Register `NAME:VERSION` (and `NAME`, what @latest finds). Without a version, the next
        number ("1", then "2", ...) for every call, changed or not, and set on `environment` too:
        azure-ai-ml does both. Returns the registered environment, with its version."""
        import copy

        from distrun.core.errors import DistrunError
        from distrun.environments.named import environment_body, next_version, register_environment

        note_ignored("environments.create_or_update", kwargs)
        if not environment.name:
            raise DistrunError("an environment needs a name to be registered", "Environment(name='my-env', ...)")
        body = environment_body(
            current_folder(),
            conda_file=path_text(environment.conda_file),
            image=environment.image,
            description=environment.description,
        )
        config = self._client.layout.config_path
        version = str(environment.version) if environment.version else next_version(config, environment.name)
        register_environment(config, environment.name, version, body)
        environment.version = version
        registered = copy.copy(environment)
        if "conda_file" in body and not isinstance(body["conda_file"], dict):
            registered.conda_file = body["conda_file"]  # as registered: absolute
        return registered

    def get(self, name: str, version: str | None = None, label: str | None = None) -> Environment:
        from distrun.core.errors import DistrunError
        from distrun.environments.named import find_named
        from distrun.sdk.job_settings import Environment

        reference = f"azureml:{name}:{version}" if version else f"azureml:{name}@{label or 'latest'}"
        found = find_named(reference, self._client.layout.config_path)
        if found is None:
            raise DistrunError(
                f"no environment named {name!r}", "register it with ml_client.environments.create_or_update"
            )
        body = found.body
        if version is None:
            from distrun.environments.named import latest_version

            version = latest_version(self._client.layout.config_path, name)
        return Environment(name=name, version=version, conda_file=body.get("conda_file"), image=body.get("image"))

    def list(self, name: str | None = None, **kwargs: Any) -> list[Environment]:
        from distrun.environments.named import read_named
        from distrun.sdk.job_settings import Environment

        named = read_named(self._client.layout.config_path)
        return [
            Environment(name=key, conda_file=entry.body.get("conda_file"), image=entry.body.get("image"))
            for key, entry in named.items()
            if name is None or key.split(":")[0] == name
        ]
