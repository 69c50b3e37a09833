"""How a model version is put in place in distrun's store (`distrun.data.model_assets` says the
layout): its files are copied into a staging folder, then this module numbers it in MLflow's
registry, writes its model.json, makes its files read-only and renames the folder into place.

It also takes in the versions that someone else registered in MLflow's registry of distrun's
tracking store: `mlflow.register_model(...)` called in a job registers over distrun's MLflow
server, whose artifacts lie under DISTRUN_HOME/mlartifacts. Such a version gets its files copied
into the store (as a job's files: no link followed, no pipe read) the next time models are looked
up, keeps MLflow's number as its version, and is tagged `distrun.version` in MLflow.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from distrun.core.errors import DistrunError
from distrun.core.file_modes import make_dirs, make_home
from distrun.data.model_files import copy_from_job, make_read_only, make_writable
from distrun.data.model_versions import (
    FILES,
    MLMODEL,
    NAME_PATTERN,
    RECORD,
    ModelVersion,
    files_digest,
    list_models,
    models_dir,
)


def new_staging(home: Path, name: str) -> Path:
    """A fresh, private folder beside NAME's versions, where one version is made."""
    make_home(home)
    make_dirs(models_dir(home) / name)
    staging = models_dir(home) / name / f".new-{uuid.uuid4().hex}"
    staging.mkdir(mode=0o700)
    return staging


def discard(home: Path, staging: Path, name: str, number: int | None) -> None:
    """Take back a version whose making failed: its staging folder and its MLflow row."""
    if number is not None:
        from distrun.metrics.model_registry import remove_version

        remove_version(home, name, number)
    make_writable(staging)
    shutil.rmtree(staging, ignore_errors=True)


def place_version(home: Path, staging: Path, record: ModelVersion, wanted: str | None, number: int | None) -> str:
    """Give the staged version its name (`wanted`, else MLflow's `number`, else the next whole
    number), write its model.json, make it read-only and rename it into place; the version."""
    name = record.name
    chosen = wanted or (str(number) if number is not None else next_version(home, name))
    if wanted is None and number is not None and (models_dir(home) / name / chosen).exists():
        chosen = next_version(home, name)  # the store has numbers MLflow's registry does not
    record = replace(record, version=chosen, mlflow_version=number, digest=files_digest(staging / FILES))
    data = {k: v for k, v in asdict(record).items() if k not in ("folder", "archived")}
    (staging / RECORD).write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.chmod(staging / RECORD, 0o444)
    if number is not None:
        from distrun.metrics.model_registry import finish_version

        final = models_dir(home) / name / chosen / FILES
        finish_version(home, name, number, str(final / record.file if record.file else final), chosen)
    make_read_only(staging / FILES)
    try:
        os.rename(staging, models_dir(home) / name / chosen)
    except OSError:
        raise taken(name, chosen) from None
    return chosen


def taken(name: str, version: str) -> DistrunError:
    return DistrunError(
        f"model {name} already has version {version}",
        "versions never change: give a new --version (or none for the next number)",
    )


def next_version(home: Path, name: str) -> str:
    numbers = [int(m.version) for m in list_models(home, name, archived=True) if m.version.isdigit()]
    return str(max(numbers, default=0) + 1)


def adopt_registered(home: Path) -> None:
    """Copy in the versions MLflow's registry has that distrun's store does not (see above)."""
    from distrun.metrics.model_registry import JOB_TAG, TYPE_TAG, VERSION_TAG, foreign_versions, tag_version

    if not (home / "mlflow.db").is_file():
        return
    for found in foreign_versions(home):
        artifacts = home / "mlartifacts"
        folder = _local_folder(found.storage_location or found.source)
        if not NAME_PATTERN.match(found.name) or folder is None or not folder.is_relative_to(artifacts):
            continue  # not a model distrun can copy (another store's artifacts)
        if (models_dir(home) / found.name / str(found.number)).exists():
            continue
        try:
            record = _adopt(home, found.name, found.number, found.source, found.description, found.run_id, folder)
        except (DistrunError, OSError) as exc:
            if (models_dir(home) / found.name / str(found.number)).exists():
                continue  # another distrun process took it in at the same moment
            print(f"distrun: MLflow model {found.name} version {found.number} not taken in: {exc}", file=sys.stderr)
            continue
        tags = {VERSION_TAG: record.version, TYPE_TAG: record.type, **({JOB_TAG: record.job} if record.job else {})}
        tag_version(home, found.name, found.number, tags)


def _adopt(
    home: Path, name: str, number: int, source: str, description: str | None, run_id: str | None, folder: Path
) -> ModelVersion:
    artifacts = home / "mlartifacts"
    staging = new_staging(home, name)
    try:
        report = copy_from_job(artifacts, str(folder.relative_to(artifacts)), staging / FILES)
        if report.files == 0:
            raise DistrunError(f"{folder} holds no file", "")
        kind = "mlflow_model" if (staging / FILES / MLMODEL).is_file() else "custom_model"
        record = ModelVersion(
            name, str(number), kind, source, description, job=_job_of_run(home, run_id), run_id=run_id,
            created_at=time.time(),
        )  # fmt: skip
        version = place_version(home, staging, record, str(number), number)
    except BaseException:
        discard(home, staging, name, None)
        raise
    return replace(record, version=version, mlflow_version=number)


def _local_folder(uri: str | None) -> Path | None:
    if not uri:
        return None
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri) if uri.startswith("/") else None


def _job_of_run(home: Path, run_id: str | None) -> str | None:
    if not run_id:
        return None
    from distrun.metrics.sqlite_store import run_job_name

    return run_job_name(home / "mlflow.db", run_id)
