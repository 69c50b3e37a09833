"""Data assets: a name and version for a path, as `az ml data create` makes them.

    $DISTRUN_HOME/data/<name>/<version>.json   {name, version, type, path, description, created_at, job}

Each version is one file created with O_EXCL, so two registrations of one version cannot
both succeed, and a version never changes once made. `path` is an absolute local path or a
URI (datastore, another job's output, http(s), s3://...) resolved when a job uses it; `@latest`
is the version created last.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.file_modes import FILE_MODE, make_dirs, make_home
from distrun.core.registered_versions import pick_version
from distrun.core.safe_files import read_text

ASSET_TYPES = ("uri_folder", "uri_file", "mltable", "custom_model", "mlflow_model", "triton_model")
ASSET_RECORD_LIMIT = 1 << 20  # a record is a few hundred bytes
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")


@dataclass(frozen=True)
class DataAsset:
    name: str
    version: str
    type: str
    path: str
    description: str | None = None
    created_at: float = 0.0
    job: str | None = None  # the job whose output this is, when registered from one

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def assets_dir(home: Path) -> Path:
    return home / "data"


def create_asset(home: Path, asset: DataAsset) -> DataAsset:
    _check_name(asset.name, "name")
    version = asset.version or _next_version(home, asset.name)
    _check_name(version, "version")
    if asset.type not in ASSET_TYPES:
        raise DistrunError(f"data type {asset.type!r} is not known", f"use one of {', '.join(ASSET_TYPES)}")
    made = DataAsset(asset.name, version, asset.type, asset.path, asset.description, time.time(), asset.job)
    folder = assets_dir(home) / asset.name
    make_home(home)
    make_dirs(folder)
    try:
        fd = os.open(folder / f"{version}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        raise DistrunError(
            f"data asset {asset.name} already has version {version}",
            "versions never change: give a new --version (or none for the next number)",
        ) from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(made.to_dict(), indent=2))
    return made


def list_assets(home: Path, name: str | None = None) -> list[DataAsset]:
    folder = assets_dir(home)
    if not folder.is_dir():
        return []
    names = [name] if name else sorted(p.name for p in folder.iterdir() if p.is_dir())
    found = []
    for each in names:
        for file in (folder / each).glob("*.json"):
            try:
                found.append(DataAsset(**json.loads(read_text(file, ASSET_RECORD_LIMIT, root=home))))
            except (OSError, ValueError, TypeError):
                # being written (O_EXCL made it empty a moment), damaged, or not a regular file
                # (a named pipe or a link to a device put there by a job): never waited on or read
                continue
    return sorted(found, key=lambda a: (a.name, a.created_at))


def get_asset(home: Path, name: str, version: str | None = None, label: str | None = None) -> DataAsset:
    versions = list_assets(home, name) if _NAME.match(name) else []
    return pick_version(
        "data asset", name, versions, version, label, "register it: distrun data create --name ... --path ..."
    )


def _next_version(home: Path, name: str) -> str:
    numbers = [int(a.version) for a in list_assets(home, name) if a.version.isdigit()]
    return str(max(numbers, default=0) + 1)


def _check_name(text: str, what: str) -> None:
    if not _NAME.match(text):
        raise DistrunError(
            f"data asset {what} {text!r} is not allowed",
            "use letters, digits, '_', '.' and '-', starting with a letter or digit",
        )
