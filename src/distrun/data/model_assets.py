"""Registered models, as `az ml model create` makes them: a name, a version, a type and files.

    $DISTRUN_HOME/models/<name>/<version>/model.json   {name, version, type, description, tags,
                                                        properties, source, job, run_id, created_at,
                                                        mlflow_version, file}
    $DISTRUN_HOME/models/<name>/<version>/files/       the model's files, read-only
    $DISTRUN_HOME/models/<name>/<version>/archived     present while the version is archived

distrun's store is the source of truth for a version's files and its Azure ML facts (a version
may be any string, a type, properties, archived or not); each version is also a version of the
same name in the MLflow model registry of distrun's tracking store (`metrics.model_registry`),
numbered by MLflow, so MLflow's clients and UI see it. A version is made in a staging folder
and renamed into place whole, with model.json in it: a version that is listed is complete, and
two registrations of one version cannot both succeed. Versions are numbers by default: MLflow's
number for it (the next whole number when mlflow is not installed). `@latest` is the newest
version that is not archived.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.data.model_files import CopyReport, copy_from_job, copy_from_user
from distrun.data.model_sources import model_source
from distrun.data.model_store import discard, new_staging, place_version, taken
from distrun.data.model_versions import (
    ARCHIVED,
    FILES,
    MLMODEL,
    MODEL_TYPES,
    NAME_PATTERN,
    RECORD,
    ModelVersion,
    get_model,
    models_dir,
)


def create_model(
    home: Path,
    name: str,
    path: str,
    *,
    version: str | None = None,
    type: str = "custom_model",
    description: str | None = None,
    tags: dict[str, str] | None = None,
    properties: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[ModelVersion, CopyReport]:
    """Register the model at `path` (see `model_sources`) as NAME:VERSION, its files copied in."""
    _check_name(name, "name")
    if version is not None:
        _check_name(version, "version")
        if (models_dir(home) / name / version / RECORD).exists():
            raise taken(name, version)
    if type not in MODEL_TYPES:
        raise DistrunError(f"model type {type!r} is not known", f"use one of {', '.join(MODEL_TYPES)}")
    source = model_source(path, cwd or Path.cwd(), home)
    staging = new_staging(home, name)
    number = None
    try:
        single = not source.path.is_dir()
        target = staging / FILES / source.path.name if single else staging / FILES
        if single:
            (staging / FILES).mkdir(mode=0o700)
        report = (
            copy_from_job(source.root, source.relative, target)
            if source.from_job
            else copy_from_user(source.path, target, home)
        )
        _check_files(report, type, target, path)
        record = ModelVersion(
            name, version or "", type, path, description, dict(tags or {}), dict(properties or {}),
            source.job, source.run_id, time.time(), None, source.path.name if single else None,
        )  # fmt: skip
        number = _mlflow_version(home, record, staging)
        chosen = place_version(home, staging, record, version, number)
    except BaseException:
        discard(home, staging, name, number)
        raise
    return get_model(home, name, chosen), report


def set_archived(home: Path, name: str, version: str, archived: bool) -> ModelVersion:
    model = get_model(home, name, version)
    marker = model.folder / ARCHIVED
    if archived:
        marker.touch(mode=0o600)
    else:
        marker.unlink(missing_ok=True)
    if model.mlflow_version is not None:
        from distrun.metrics.model_registry import set_stage

        set_stage(home, name, model.mlflow_version, archived)
    return get_model(home, name, version)


def download_model(model: ModelVersion, dest: Path) -> Path:
    """Copy a version's files to DEST/NAME/ (as `az ml model download`), writable; that folder."""
    target = dest / model.name
    if (target.is_dir() and any(target.iterdir())) or (target.exists() and not target.is_dir()):
        raise DistrunError(f"{target} already exists and is not empty", "download into another folder")
    try:
        shutil.copytree(model.folder / FILES, target, copy_function=_copy_writable, dirs_exist_ok=True)
        for folder, _dirs, _files in os.walk(target):
            os.chmod(folder, 0o755)
    except OSError as exc:
        raise DistrunError(
            f"cannot write {exc.filename or target}: {exc.strerror or exc}", "choose another folder"
        ) from None
    return target


def _copy_writable(source: str, target: str) -> None:
    shutil.copyfile(source, target)
    os.chmod(target, 0o644)


def _mlflow_version(home: Path, record: ModelVersion, staging: Path) -> int | None:
    """The version's number in MLflow's registry (None where mlflow is not installed)."""
    from distrun.metrics import model_registry

    # distrun.version marks it distrun's from the start (never taken for a foreign version);
    # its value and the source are set once the version has its name (finish_version).
    tags = {**record.tags, model_registry.TYPE_TAG: record.type, model_registry.VERSION_TAG: ""}
    if record.job:
        tags[model_registry.JOB_TAG] = record.job
    try:
        return model_registry.add_version(home, record.name, str(staging), record.description, tags, record.run_id)
    except model_registry.RegistryUnavailable:
        return None


def _check_files(report: CopyReport, type: str, target: Path, path: str) -> None:
    if report.files == 0:
        why = f" ({'; '.join(report.left_out)})" if report.left_out else ""
        raise DistrunError(f"{path} holds no file to register{why}", "give the model's file or folder")
    if type == "mlflow_model" and not (target / MLMODEL).is_file():
        raise DistrunError(
            f"type mlflow_model but {path} has no MLmodel file at its top: it is not an MLflow model folder",
            "give the folder mlflow.<flavor>.save_model wrote, or use --type custom_model",
        )


def _check_name(text: str, what: str) -> None:
    if not NAME_PATTERN.match(text):
        raise DistrunError(
            f"model {what} {text!r} is not allowed",
            "use letters, digits, '_', '.' and '-', starting with a letter or digit",
        )
