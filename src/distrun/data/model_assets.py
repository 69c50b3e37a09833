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

import json
import os
import shutil
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.file_modes import make_dirs, make_home
from distrun.data.model_files import CopyReport, copy_from_job, copy_from_user, make_read_only, make_writable
from distrun.data.model_sources import model_source
from distrun.data.model_versions import (
    ARCHIVED,
    FILES,
    MLMODEL,
    MODEL_TYPES,
    NAME_PATTERN,
    RECORD,
    ModelVersion,
    get_model,
    list_models,
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
            raise _taken(name, version)
    if type not in MODEL_TYPES:
        raise DistrunError(f"model type {type!r} is not known", f"use one of {', '.join(MODEL_TYPES)}")
    source = model_source(path, cwd or Path.cwd(), home)
    make_home(home)
    make_dirs(models_dir(home) / name)
    staging = models_dir(home) / name / f".new-{uuid.uuid4().hex}"
    staging.mkdir(mode=0o700)
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
        chosen = version or (str(number) if number is not None else _next_version(home, name))
        if number is not None and chosen != version and (models_dir(home) / name / chosen).exists():
            chosen = _next_version(home, name)  # the store has numbers MLflow's registry does not
        record = _with(record, version=chosen, mlflow_version=number)
        _write_record(staging, record)
        make_read_only(staging / FILES)
        try:
            os.rename(staging, models_dir(home) / name / chosen)
        except OSError:
            raise _taken(name, chosen) from None
    except BaseException:
        if number is not None:
            from distrun.metrics.model_registry import remove_version

            remove_version(home, name, number)
        make_writable(staging)
        shutil.rmtree(staging, ignore_errors=True)
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


def _write_record(staging: Path, record: ModelVersion) -> None:
    """model.json; and MLflow's row pointed at the version's own folder, now that it has a name."""
    data = {k: v for k, v in asdict(record).items() if k not in ("folder", "archived")}
    (staging / RECORD).write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.chmod(staging / RECORD, 0o444)
    if record.mlflow_version is not None:
        from distrun.metrics import model_registry

        final = staging.parent / record.version / FILES
        where = final / record.file if record.file else final
        model_registry.finish_version(home_of(staging), record.name, record.mlflow_version, str(where), record.version)


def home_of(staging: Path) -> Path:
    return staging.parent.parent.parent  # $DISTRUN_HOME/models/<name>/<folder>


def _check_files(report: CopyReport, type: str, target: Path, path: str) -> None:
    if report.files == 0:
        why = f" ({'; '.join(report.left_out)})" if report.left_out else ""
        raise DistrunError(f"{path} holds no file to register{why}", "give the model's file or folder")
    if type == "mlflow_model" and not (target / MLMODEL).is_file():
        raise DistrunError(
            f"type mlflow_model but {path} has no MLmodel file at its top: it is not an MLflow model folder",
            "give the folder mlflow.<flavor>.save_model wrote, or use --type custom_model",
        )


def _with(record: ModelVersion, **changes: Any) -> ModelVersion:
    from dataclasses import replace

    return replace(record, **changes)


def _taken(name: str, version: str) -> DistrunError:
    return DistrunError(
        f"model {name} already has version {version}",
        "versions never change: give a new --version (or none for the next number)",
    )


def _next_version(home: Path, name: str) -> str:
    numbers = [int(m.version) for m in list_models(home, name, archived=True) if m.version.isdigit()]
    return str(max(numbers, default=0) + 1)


def _check_name(text: str, what: str) -> None:
    if not NAME_PATTERN.match(text):
        raise DistrunError(
            f"model {what} {text!r} is not allowed",
            "use letters, digits, '_', '.' and '-', starting with a letter or digit",
        )
