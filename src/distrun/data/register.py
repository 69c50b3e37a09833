"""`data create`: a path checked (it resolves, and is a folder or a file as its type says), then
recorded as a data asset (`distrun.data.assets`)."""

from __future__ import annotations

from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.data.assets import DataAsset, create_asset
from distrun.data.locations import input_location


def register_path(
    home: Path, name: str, version: str, path: str, kind: str, description: str | None, cwd: Path
) -> DataAsset:
    """`data create`: check that `path` resolves (and is a folder or file as `kind` says), then record it.

    A local path is kept absolute; a URI as written (resolved again when a job uses it).
    """
    location = input_location(path, cwd, home)
    if location.url is None:
        if location.path is None:
            raise DistrunError(f"{path!r} is not a place distrun can read", "give a local path or a supported URI")
        found = "uri_folder" if location.path.is_dir() else "uri_file" if location.path.exists() else None
        if found is None:
            raise DistrunError(f"{location.path} does not exist", "check the path")
        if kind in ("uri_folder", "uri_file") and kind != found:
            raise DistrunError(f"type {kind} but {location.path} is a {found.split('_')[1]}", f"use type {found}")
    # A URL with a local copy (url_mirrors) stays a URL: the mirror is looked up again when a job uses it.
    local = location.path is not None and location.mirror is None and not path.startswith("azureml")
    stored = str(location.path.resolve()) if local and location.path is not None else path
    return create_asset(home, DataAsset(name, version, kind, stored, description))
