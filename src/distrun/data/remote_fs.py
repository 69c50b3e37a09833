"""s3://, gs://, wasbs://, abfss:// inputs through fsspec: copied once into the download cache.

The copy lives in `$DISTRUN_HOME/cache/remote/<hash of URL and the source's fingerprint>/`, so
a changed object (new ETag, size or modification time) is fetched again and an unchanged one
is not. Credentials and endpoints are the plugin's own settings (AWS_* variables, fsspec's
FSSPEC_S3_ENDPOINT_URL style configuration, ...).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, TextIO

from distrun.core.console import say as _say
from distrun.core.errors import DistrunError
from distrun.core.file_modes import make_home

# fsspec protocol -> the package that provides it
FSSPEC_PLUGINS = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "wasbs": "adlfs",
    "wasb": "adlfs",
    "abfss": "adlfs",
    "abfs": "adlfs",
    "az": "adlfs",
    "adl": "adlfs",
}


def remote_fs_problem(scheme: str) -> None:
    """A clear error, naming the package, when fsspec or the scheme's plugin is not installed."""
    import importlib.util

    plugin = FSSPEC_PLUGINS[scheme]
    missing = [name for name in ("fsspec", plugin) if importlib.util.find_spec(name) is None]
    if missing:
        raise DistrunError(
            f"{scheme}:// inputs are read through fsspec with {plugin}, which {'is' if len(missing) == 1 else 'are'} "
            f"not installed ({', '.join(missing)})",
            f"pip install {' '.join(missing)}" + (" (or pip install 'distrun[s3]')" if plugin == "s3fs" else ""),
        )


def fetch_remote(url: str, home: Path, materialize: bool, out: TextIO | None = None) -> Path:
    """The local copy of `url`: the file itself for an object, the folder for a prefix."""
    scheme = url.split("://", 1)[0].lower()
    remote_fs_problem(scheme)
    base = home / "cache" / "remote" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:32]
    if not materialize:
        return base / "copy"
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
        info = fs.info(path)
    except FileNotFoundError:
        raise DistrunError(f"input {url} does not exist", "check the bucket and path") from None
    except Exception as exc:  # the plugin's own errors (credentials, endpoint, permissions)
        raise DistrunError(f"reading {url} failed: {type(exc).__name__}: {exc}", _hint(scheme)) from None
    fingerprint = hashlib.sha256(json.dumps(_fingerprint(fs, path, info), sort_keys=True).encode()).hexdigest()[:16]
    folder = base / fingerprint
    copy = folder / "copy"
    if copy.exists():
        return copy
    stream = out if out is not None else sys.stderr
    _say(stream, f"distrun: fetching {url}")
    tmp = base / f".fetch-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        make_home(home)
        tmp.mkdir(parents=True)
        if info.get("type") == "directory":
            fs.get(path.rstrip("/") + "/", str(tmp / "copy") + "/", recursive=True)
        else:
            fs.get(path, str(tmp / "copy"))
        folder.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp / "copy", copy)
        except OSError:
            if not copy.exists():  # another job put the same copy in place first: that one is used
                raise
    except DistrunError:
        raise
    except Exception as exc:
        raise DistrunError(f"fetching {url} failed: {type(exc).__name__}: {exc}", _hint(scheme)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _say(stream, f"distrun: fetched {url}")
    return copy


def _fingerprint(fs: Any, path: str, info: dict[str, Any]) -> list[Any]:
    """What changes when the data does: each object's name, size and ETag/modification time."""
    if info.get("type") != "directory":
        return [_stamp(info)]
    return sorted(_stamp(entry) for entry in fs.find(path, detail=True).values())


def _stamp(info: dict[str, Any]) -> list[Any]:
    changed = (
        info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime") or info.get("updated")
    )
    return [str(info.get("name")), info.get("size"), str(changed)]


def _hint(scheme: str) -> str:
    return f"check the URL and {FSSPEC_PLUGINS[scheme]}'s credentials and endpoint settings"
