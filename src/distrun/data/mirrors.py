"""`url_mirrors` in config.yaml: URL prefixes whose data already has a copy on this machine.

    url_mirrors:
      https://azuremlexamples.blob.core.windows.net/datasets/: /data/azureml-examples
      wasbs://datasets@azuremlexamples.blob.core.windows.net/: azureml://datastores/examples/paths/

An input whose URL starts with a prefix reads `<folder>/<the rest of the URL>` in place of
downloading it (the longest prefix wins), so a job written for Azure ML runs unchanged on a copy
made once. A query string (a SAS token) is not part of the path. The folder is a local path
(absolute, or starting with ~) or a datastore URI; it must exist when a job uses the entry.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.user_paths import expand_user
from distrun.data.remote_fs import FSSPEC_PLUGINS

SECTION = "url_mirrors"
EXAMPLE = "url_mirrors: {https://example.org/datasets/: /data/datasets}"
# What a prefix may start with: the URLs distrun would otherwise download or fetch.
MIRRORED_SCHEMES = ("http", "https", *FSSPEC_PLUGINS)


@dataclass(frozen=True)
class Mirror:
    """One entry: `prefix` (as written) -> `target` (a folder or datastore URI, as written)."""

    prefix: str
    target: str
    where: str  # config.yaml:LINE, for messages


@dataclass(frozen=True)
class Mirrored:
    """Where a mirrored URL's data is on this machine, and the entry that said so."""

    path: Path
    mirror: Mirror


def read_mirrors(config_path: Path) -> list[Mirror]:
    """The entries of config.yaml's `url_mirrors`, checked; an error names the file, line and key."""
    from distrun.spec.config_sections import read_section

    section, smap = read_section(config_path, SECTION, EXAMPLE)
    return [_checked(prefix, target, str(smap.find((SECTION, prefix)))) for prefix, target in section.items()]


def _checked(prefix: Any, target: Any, where: str) -> Mirror:
    key = f"{SECTION}.{prefix}"
    if not isinstance(prefix, str) or _scheme(prefix) not in MIRRORED_SCHEMES or not prefix.split("://", 1)[1]:
        raise DistrunError(
            f"{where}: {key}: expected a URL prefix (http://, https://, wasbs://, s3://, ...)", f"e.g. {EXAMPLE}"
        )
    if not isinstance(target, str) or not target.strip():
        raise DistrunError(
            f"{where}: {key}: expected a folder (an absolute path) or a datastore URI", f"e.g. {EXAMPLE}"
        )
    if not _is_datastore(target) and not _local(target).is_absolute():
        raise DistrunError(
            f"{where}: {key}: the folder {target!r} is relative",
            "give an absolute path (or ~/...), or azureml://datastores/<datastore>/paths/<path>",
        )
    return Mirror(prefix, target, where)


def add_mirror(config_path: Path, prefix: str, target: str, cwd: Path) -> Mirror:
    """`distrun data mirror add`: one entry written to config.yaml (a relative folder taken from
    `cwd`, made absolute); the folder must exist now, as it must when a job uses it."""
    from distrun.spec.config_sections import write_entry

    if not _is_datastore(target):
        target = str((cwd / _local(target)).absolute())
    mirror = _checked(prefix, target, "url_mirrors")
    root = _root(mirror, config_path.parent)
    if not root.is_dir():
        raise DistrunError(f"the folder {root} does not exist", f"put the copy of {prefix} there first")
    write_entry(config_path, SECTION, prefix, target)
    return mirror


def mirrored(url: str, home: Path) -> Mirrored | None:
    """The local copy of `url` that config.yaml names (the longest matching prefix), or None."""
    config_path = home / "config.yaml"
    if not config_path.is_file():
        return None
    matches = [m for m in read_mirrors(config_path) if _covers(m.prefix, url)]
    if not matches:
        return None
    mirror = max(matches, key=lambda m: len(m.prefix))
    root = _root(mirror, home)
    if not root.is_dir():
        raise DistrunError(
            f"{mirror.where}: {SECTION}.{mirror.prefix}: the folder {root} does not exist",
            f"put the copy of {mirror.prefix} there, or correct the entry in {config_path}",
        )
    rest = urllib.parse.urlsplit(url[len(mirror.prefix) :]).path
    parts = [p for p in urllib.parse.unquote(rest).split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DistrunError(f"{url!r} leaves its mirror {root} with '..'", "write the URL without '..'")
    return Mirrored(root.joinpath(*parts), mirror)


def _covers(prefix: str, url: str) -> bool:
    """`prefix` is the start of `url` at a path boundary (scheme and host in any letter case)."""
    prefix_n, url_n = _normal(prefix), _normal(url)
    if not url_n.startswith(prefix_n):
        return False
    return prefix_n.endswith("/") or len(url_n) == len(prefix_n) or url_n[len(prefix_n)] in "/?#"


def _normal(text: str) -> str:
    scheme, _, rest = text.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}"


def _scheme(text: Any) -> str | None:
    return text.split("://", 1)[0].lower() if isinstance(text, str) and "://" in text else None


def _is_datastore(target: str) -> bool:
    return target.startswith("azureml://")


def _local(target: str) -> Path:
    return expand_user(Path(target.removeprefix("file://")))


def _root(mirror: Mirror, home: Path) -> Path:
    if not _is_datastore(mirror.target):
        return _local(mirror.target)
    from distrun.data.datastores import datastore_path, datastore_reference

    found = datastore_reference(mirror.target)
    if found is None:
        raise DistrunError(
            f"{mirror.where}: {SECTION}.{mirror.prefix}: {mirror.target!r} is not a datastore URI",
            "e.g. azureml://datastores/workspaceblobstore/paths/datasets",
        )
    return datastore_path(home, *found)
