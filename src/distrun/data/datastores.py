"""Datastores: each a folder. `$DISTRUN_HOME/datastores/<name>/` unless config.yaml names one:

datastores:
  workspaceblobstore: /mnt/shared/blob     # an NFS export, a mounted blob container, ...
  scratch: {path: /scratch/datastore}
"""

from __future__ import annotations

import re
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.user_paths import expand_user

# azureml://datastores/<ds>/paths/<p>, also in the long form with subscription and workspace.
DATASTORE_URI = re.compile(
    r"^azureml://(?:subscriptions/[^/]+/resource[gG]roups/[^/]+/(?:providers/Microsoft\.MachineLearningServices/)?"
    r"workspaces/[^/]+/)?datastores/(?P<ds>[^/]+)/paths/?(?P<path>.*)$"
)


def datastore_reference(uri: str) -> tuple[str, str] | None:
    """`azureml://datastores/<ds>/paths/<p>` -> (ds, p); None for anything else."""
    match = DATASTORE_URI.match(uri)
    return (match.group("ds"), match.group("path")) if match else None


def datastore_root(home: Path, name: str) -> Path:
    configured = _configured(home / "config.yaml").get(name)
    if configured is None:
        return home / "datastores" / name
    path = expand_user(Path(configured))
    return path if path.is_absolute() else (home / path)


def datastore_path(home: Path, name: str, sub: str) -> Path:
    """`<root of name>/<sub>`; a path that would leave the datastore's folder is refused."""
    if not name or name in (".", "..") or "/" in name:
        raise DistrunError(
            f"datastore name {name!r} is not allowed", "e.g. azureml://datastores/workspaceblobstore/paths/data"
        )
    parts = [p for p in sub.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DistrunError(
            f"datastore path {sub!r} leaves the datastore with '..'",
            "write the path inside the datastore, e.g. paths/data/train",
        )
    return datastore_root(home, name).joinpath(*parts)


def _configured(config_path: Path) -> dict[str, str]:
    from distrun.spec.config_sections import read_section

    section, smap = read_section(config_path, "datastores", "datastores: {workspaceblobstore: /mnt/shared/blob}")
    out = {}
    for name, value in section.items():
        path = value.get("path") if isinstance(value, dict) else value
        if not isinstance(path, str) or not path:
            raise DistrunError(
                f"{smap.find(('datastores', name))}: datastores.{name}: expected a folder path",
                "e.g. datastores: {workspaceblobstore: /mnt/shared/blob}",
            )
        out[str(name)] = path
    return out
