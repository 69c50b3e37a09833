"""Registered models as they are read: a version's record, the versions of a name, and what
`azureml:NAME:VERSION`, `azureml:NAME@latest` or a registry's model URI names. The store's
layout and how versions are made: `distrun.data.model_assets`."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.registered_versions import pick_version
from distrun.core.safe_files import read_text

MODEL_TYPES = ("custom_model", "mlflow_model", "triton_model")
RECORD = "model.json"
FILES = "files"
ARCHIVED = "archived"
MLMODEL = "MLmodel"
RECORD_LIMIT = 1 << 20
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
# azureml:NAME:VERSION, azureml:NAME@LABEL, azureml:NAME
_REFERENCE = re.compile(r"^(?:azureml:)?(?!//)(?P<name>[^:@/]+)(?::(?P<version>[^:@/]+)|@(?P<label>[^:@/]+))?$")
_REGISTRY = re.compile(
    r"^azureml://registries/(?P<reg>[^/]+)/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/?$"
)


@dataclass(frozen=True)
class ModelVersion:
    name: str
    version: str
    type: str
    source: str
    description: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    job: str | None = None  # the job whose output or run it came from
    run_id: str | None = None
    created_at: float = 0.0
    mlflow_version: int | None = None  # its number in MLflow's model registry
    file: str | None = None  # the file's name, when one file was registered
    digest: str | None = None  # the files' content digest when registered (files_digest)
    folder: Path = Path()  # where the version lies (not recorded: found)
    archived: bool = False

    @property
    def path(self) -> Path:
        """The model as a job's input sees it: the folder of its files, or its one file."""
        files = self.folder / FILES
        return files / self.file if self.file else files

    @property
    def id(self) -> str:
        return f"azureml:{self.name}:{self.version}"

    def to_dict(self) -> dict[str, Any]:
        found = {k: v for k, v in asdict(self).items() if v is not None and k != "folder"}
        return {**found, "id": self.id, "path": str(self.path)}


def files_digest(model_files: Path) -> str | None:
    """The content digest of a version's files (None past `DigestLimits`: too large to hash)."""
    from distrun.core.content_hash import DigestLimitError, content_digest

    try:
        return content_digest(model_files, root=model_files.parent)
    except DigestLimitError:
        return None


def models_dir(home: Path) -> Path:
    return home / "models"


def list_models(home: Path, name: str | None = None, archived: bool = False) -> list[ModelVersion]:
    """The versions of every model (or of `name`), oldest first; archived ones with `archived`."""
    root = models_dir(home)
    if not root.is_dir():
        return []
    names = [name] if name else sorted(p.name for p in root.iterdir() if NAME_PATTERN.match(p.name))
    found = []
    for each in names:
        folder = root / each
        if not NAME_PATTERN.match(each) or not folder.is_dir():
            continue
        for version in folder.iterdir():
            model = _read(version)
            if model is not None and (archived or not model.archived):
                found.append(model)
    return sorted(found, key=lambda m: (m.name, m.created_at))


def get_model(home: Path, name: str, version: str | None = None, label: str | None = None) -> ModelVersion:
    everything = list_models(home, name, archived=True) if NAME_PATTERN.match(name) else []
    if version is None:  # @latest and the bare name skip archived versions, as Azure ML's do
        everything = [m for m in everything if not m.archived] or everything
    return pick_version(
        "model", name, everything, version, label, "register it: distrun model create --name NAME --path PATH"
    )


def model_by_reference(home: Path, text: str) -> ModelVersion:
    """`azureml:NAME:VERSION`, `azureml:NAME@latest`, `NAME:VERSION`, or a registry's model URI."""
    registry = _REGISTRY.match(text)
    if registry:
        raise DistrunError(
            f"{text} is a model in the registry {registry.group('reg')!r}, which is not on this machine: "
            f"distrun has no registries, only this DISTRUN_HOME's models",
            f"register the model here (distrun model create --name {registry.group('name')} --path ...) "
            f"and use azureml:{registry.group('name')}:VERSION",
        )
    match = _REFERENCE.match(text)
    if match is None:
        raise DistrunError(f"{text!r} does not name a model", "write azureml:NAME:VERSION or azureml:NAME@latest")
    return get_model(home, match.group("name"), match.group("version"), match.group("label"))


def is_model_reference(text: str) -> bool:
    return bool(_REGISTRY.match(text)) or (text.startswith("azureml:") and not text.startswith("azureml://"))


def models_of_job(home: Path, job: str) -> list[ModelVersion]:
    """The versions registered from `job`'s outputs or run."""
    return [m for m in list_models(home, archived=True) if m.job == job]


def _read(folder: Path) -> ModelVersion | None:
    try:
        data = json.loads(read_text(folder / RECORD, RECORD_LIMIT, root=folder.parent.parent.parent))
        return ModelVersion(**data, folder=folder, archived=(folder / ARCHIVED).exists())
    except (OSError, ValueError, TypeError):
        return None  # not a version distrun made, or damaged: never listed
