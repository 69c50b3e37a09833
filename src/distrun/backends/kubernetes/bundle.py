"""The job's files as one ConfigMap: how the code reaches pods without a shared filesystem.

A gzipped tar of `job.json`, `bindings.json`, `placement.json` and the code snapshot (plus
inputs copied with mode `download`), built the same way every time (sorted, no times or
owners), so the rendered objects are a pure function of the job. Kubernetes limits a
ConfigMap to 1 MiB, base64 included: the tar, with the zip of distrun's modules beside it in the
same ConfigMap (agent_zip, about 160 KiB), may be at most 700 KiB compressed. Larger code belongs
in the image (target setting `code_in_image: /path/in/image`).
"""

from __future__ import annotations

import base64
import gzip
import io
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path

from distrun.core.errors import DistrunError

BUNDLE_LIMIT = 700 * 1024
CODE = "code"
INPUTS = "inputs"


def _add_tree(tar: tarfile.TarFile, root: Path, arcname: str) -> None:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = Path(folder).relative_to(root)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue  # the snapshot has refused links out of the code already
            data = path.read_bytes()
            _add_bytes(tar, str(Path(arcname) / rel / name), data, 0o755 if os.access(path, os.X_OK) else 0o644)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def build_bundle(files: Mapping[str, bytes], trees: Mapping[str, Path]) -> bytes:
    """A gzipped tar of `files` (name -> content) and folders (`trees`: name -> folder)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            _add_bytes(tar, name, files[name])
        for name in sorted(trees):
            if trees[name].is_dir():
                _add_tree(tar, trees[name], name)
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def encoded(bundle: bytes, beside: int = 0) -> str:
    """`bundle` as the ConfigMap's base64, when it fits beside `beside` bytes of the same ConfigMap."""
    room = BUNDLE_LIMIT - beside
    if len(bundle) > room:
        raise DistrunError(
            f"the job's code and copied inputs are {len(bundle) // 1024} KiB compressed; a ConfigMap holds at most "
            f"{room // 1024} KiB of them beside distrun's own modules (Kubernetes limits ConfigMaps to 1 MiB)",
            "leave large files out with .amlignore, or build the code into the image and set the target's "
            "code_in_image to its folder there; large inputs (also a pipeline step's upstream outputs) belong "
            "on a datastore or volume the pods see",
        )
    return base64.b64encode(bundle).decode("ascii")


def listing(bundle: bytes, most: int = 40) -> list[str]:
    """What a bundle holds, for `distrun plan`: each file with its size (the first `most`)."""
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
    shown = [f"{m.name} ({m.size} bytes)" for m in members[:most]]
    if len(members) > most:
        shown.append(f"... and {len(members) - most} more files")
    return shown


def unpack(bundle: bytes, dest: Path) -> None:
    """In the pod: the bundle into the job folder; names that would leave it are refused."""
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
