"""`Model` and `MLClient.models`, as in `azure.ai.ml`, over distrun's registered models
(`distrun model ...`, `distrun.data.model_assets`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from distrun.core.user_paths import current_folder
from distrun.sdk.notices import note_ignored
from distrun.sdk.plain import path_text
from distrun.sdk.versioned import VersionedAsset

if TYPE_CHECKING:
    from distrun.data.model_versions import ModelVersion
    from distrun.store.layout import Layout


class _Client(Protocol):
    @property
    def layout(self) -> Layout: ...


class Model(VersionedAsset):
    """A model: `Model(name=, version=, path=, type="custom_model", description=, tags=, properties=)`.

    `path`: a local file or folder, `azureml://jobs/JOB/outputs/OUTPUT`, `runs:/RUN/PATH`, or a
    job's output object (`returned_job.outputs.model`).
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Any = None,
        type: str = "custom_model",
        description: str | None = None,
        tags: dict[str, str] | None = None,
        properties: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.version = None if version is None else str(version)
        self.path = _path_of(path)
        self.type = type
        self.description = description
        self.tags = dict(tags or {})
        self.properties = dict(properties or {})
        self.creation_context: Any = None
        self.job_name: str | None = None
        self.stage: str | None = None
        self._accept(kwargs)


def _path_of(value: Any) -> Any:
    """A path, or the `path` of a job's input or output object."""
    inner = getattr(value, "path", None)
    return path_text(inner if inner is not None and not isinstance(value, (str, Path)) else value)


def _model_of(found: ModelVersion) -> Model:
    model = Model(
        name=found.name,
        version=found.version,
        path=str(found.path),
        type=found.type,
        description=found.description,
        tags=found.tags,
        properties=found.properties,
    )
    model.job_name = found.job
    model.stage = "Archived" if found.archived else "Development"
    return model


class ModelOperations:
    """`MLClient.models`: create_or_update, get, list, download, archive, restore."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    @property
    def _home(self) -> Path:
        """DISTRUN_HOME, with the versions jobs registered in MLflow's registry taken in."""
        from distrun.data.model_store import adopt_registered

        home = self._client.layout.home
        adopt_registered(home)
        return home

    def create_or_update(self, model: Model, **kwargs: Any) -> Model:
        """Register a version (the next number when `version` is None), its files copied in."""
        from distrun.core.errors import DistrunError
        from distrun.data.model_assets import create_model

        note_ignored("models.create_or_update", kwargs)
        if not model.name or model.path is None:
            raise DistrunError("a model needs a name and a path", "Model(name='my-model', path='./model')")
        made, _report = create_model(
            self._home,
            model.name,
            str(model.path),
            version=model.version,
            type=model.type,
            description=model.description,
            tags={str(k): str(v) for k, v in model.tags.items()},
            properties={str(k): str(v) for k, v in model.properties.items()},
            cwd=current_folder(),
        )
        return _model_of(made)

    def get(self, name: str, version: str | None = None, label: str | None = None) -> Model:
        from distrun.data.model_versions import get_model

        return _model_of(get_model(self._home, name, None if version is None else str(version), label))

    def list(self, name: str | None = None, *, archived_only: bool = False, **kwargs: Any) -> list[Model]:
        from distrun.data.model_versions import list_models

        found = list_models(self._home, name, archived=archived_only)
        return [_model_of(m) for m in found if m.archived or not archived_only]

    def download(self, name: str, version: str | None = None, download_path: Any = ".", **kwargs: Any) -> None:
        """The version's files to `download_path/NAME/`."""
        from distrun.data.model_assets import download_model
        from distrun.data.model_versions import get_model

        download_model(get_model(self._home, name, None if version is None else str(version)), Path(download_path))

    def archive(self, name: str, version: str | None = None, label: str | None = None, **kwargs: Any) -> None:
        self._set_archived(name, version, label, True)

    def restore(self, name: str, version: str | None = None, label: str | None = None, **kwargs: Any) -> None:
        self._set_archived(name, version, label, False)

    def _set_archived(self, name: str, version: str | None, label: str | None, archived: bool) -> None:
        from distrun.data.model_assets import set_archived
        from distrun.data.model_versions import get_model

        found = get_model(self._home, name, None if version is None else str(version), label)
        set_archived(self._home, found.name, found.version, archived)
